"""Population-based training's settings (Jaderberg et al. 2017, as docs/pbt.md describes): which
hyperparameters a population explores and within which bounds, the exploit rule (truncation
selection), the explore rule (perturb or resample), the fitness of each task and how often the
step fires. Everything is checked here, before anything is compiled, naming the bad value.

The defaults are Ray Tune's ``PopulationBasedTraining`` defaults (quantile fraction 0.25,
resample probability 0.25) with factors 0.8 / 1.25 instead of its 0.8 / 1.2: a pair whose
product is 1 is symmetric in log scale, so a hyperparameter perturbed at random does not drift.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM, algorithm_of, get_algorithm

HYPERPARAMETERS = get_algorithm(DEFAULT_ALGORITHM).hyperparameter_names()
"""The default algorithm's (PPO's) continuous hyperparameters; what a task may explore is its own
algorithm's (``explorable``)."""


def explorable() -> dict[str, tuple[str, ...]]:
    """Each registered algorithm's continuous hyperparameters (what its state carries: PBT may
    explore them), by algorithm name."""
    return {name: entry.hyperparameter_names() for name, entry in ALGORITHMS.items()}


def _explorable_text() -> str:
    return "; ".join(f"{name}: {list(names)}" for name, names in explorable().items())


FITNESS_RULES = ("success", "return")
"""``success``: held-out success rate, ties broken by held-out mean return; ``return``: held-out
mean return. Any tie left goes to the lower member index (docs/pbt.md)."""

DEFAULT_BOUNDS: dict[str, tuple[float, float]] = {
    "learning_rate": (1e-5, 1e-2),
    "clip_range": (0.05, 0.5),
    "ent_coef": (1e-5, 0.1),
    "vf_coef": (0.1, 2.0),
    "gae_lambda": (0.8, 0.999),
    "gamma": (0.5, 0.9999),
    "max_grad_norm": (0.1, 10.0),
}
"""Where each hyperparameter may go unless ``--pbt-bounds`` says otherwise."""

COMPLEMENT_SCALE = ("gae_lambda", "gamma")
"""Explored through 1 - x in log scale (the horizon 1 / (1 - x) is what matters: 0.99 -> 0.995
halves what 0.9 -> 0.95 halves); every other hyperparameter is explored in log scale of x. Any
algorithm's discount or lambda is too, by its name (``in_complement_scale``)."""

DEFAULT_EXPLORE = ("learning_rate", "ent_coef", "clip_range")
"""What a population explores unless ``--pbt-explore`` says: each task those of these its
algorithm carries (PPO: all three)."""

NAMED_BOUNDS: tuple[tuple[tuple[str, ...], tuple[float, float]], ...] = (
    (("learning_rate", "lr"), (1e-5, 1e-2)),
    (("gamma",), (0.5, 0.9999)),
    (("lambda",), (0.8, 0.999)),
    (("coef", "tau", "alpha", "temperature"), (1e-5, 10.0)),
    (("epsilon", "eps"), (1e-4, 1.0)),
)
"""The default bounds of a hyperparameter outside ``DEFAULT_BOUNDS`` (another algorithm's), by
what its name ends with (``actor_learning_rate``, ``q_lr``, ``td_lambda``, ``polyak_tau``,
``epsilon_finish``): learning rates and coefficients in log scale, discounts and lambdas in
1 - x (``in_complement_scale``). Wide on purpose: a run narrows them with ``--pbt-bounds``."""


def in_complement_scale(name: str) -> bool:
    """Explored through 1 - x: PPO's gamma and gae_lambda, any name ending in gamma or lambda."""
    return name in COMPLEMENT_SCALE or name.endswith(("gamma", "lambda"))


def default_bounds(name: str) -> tuple[float, float] | None:
    """``name``'s default bounds (``DEFAULT_BOUNDS``, else by its name: ``NAMED_BOUNDS``), or None
    where its name says nothing of its scale."""
    if name in DEFAULT_BOUNDS:
        return DEFAULT_BOUNDS[name]
    for endings, bounds in NAMED_BOUNDS:
        if name.endswith(endings):
            return bounds
    return None


def _ordinal(number: int) -> str:
    """1st, 2nd, 3rd, 4th, ..., 11th, 12th, 13th, ..., 21st."""
    suffix = "th" if 10 <= number % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(number % 10, "th")
    return f"{number}{suffix}"


@dataclass(frozen=True)
class PBTSettings:
    explore: tuple[str, ...] = field(
        default=DEFAULT_EXPLORE,
        metadata={"help": "the hyperparameters the population explores (of each task's algorithm, those it carries)"},
    )
    bounds: dict[str, tuple[float, float]] = field(
        default_factory=dict, metadata={"help": "NAME=LOW:HIGH per explored hyperparameter (default: DEFAULT_BOUNDS)"}
    )
    fraction: float = field(
        default=0.25, metadata={"help": "truncation selection: the bottom fraction copies a member of the top fraction"}
    )
    factors: tuple[float, float] = field(
        default=(0.8, 1.25), metadata={"help": "explore: a copied hyperparameter is multiplied by one of these"}
    )
    resample_probability: float = field(
        default=0.25, metadata={"help": "explore: the chance a copied hyperparameter is drawn anew within its bounds"}
    )
    interval: int = field(default=1, metadata={"help": "the step fires at every k-th checkpoint target"})
    fitness: dict[str, str] = field(
        default_factory=dict, metadata={"help": "TASK=success|return (default: success where the task defines it)"}
    )

    def schedule_text(self) -> str:
        """What the step does and when, for the plan printed at a run's start."""
        return f"exploit and explore ({', '.join(self.explore)}) at every {_ordinal(self.interval)} checkpoint target"

    def bounds_of(self, name: str) -> tuple[float, float]:
        if name in self.bounds:
            return tuple(self.bounds[name])
        bounds = default_bounds(name)
        if bounds is None:
            raise ValueError(
                f"--pbt-explore {name}: no default bounds for {name!r} (its name is no learning rate, coefficient, "
                f"discount or lambda); expected --pbt-bounds {name}=LOW:HIGH"
            )
        return bounds

    def explored_by(self, hyperparameters) -> tuple[str, ...]:
        """What a task explores: those of ``explore`` its algorithm's ``hyperparameters`` hold."""
        return tuple(name for name in self.explore if name in hyperparameters)

    def selected(self, population: int) -> int:
        """How many members copy (and how many are copied from) at each step."""
        return math.floor(population * self.fraction)

    # ------------------------------------------------------------------------------ checks
    @classmethod
    def checked(cls, **given: Any) -> PBTSettings:
        """The settings from keyword values (None: the default), each checked by name."""
        given = {name: value for name, value in given.items() if value is not None}
        unknown = set(given) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown PBT setting(s) {sorted(unknown)}")
        if "explore" in given:
            given["explore"] = tuple(given["explore"])
        if "factors" in given:
            given["factors"] = tuple(float(f) for f in given["factors"])
        if "bounds" in given:
            given["bounds"] = {name: tuple(float(b) for b in pair) for name, pair in given["bounds"].items()}
        settings = cls(**given)
        settings._check_names()
        settings._check_numbers()
        # the defaults written out: what the manifest records is the whole of what was used
        return dataclasses.replace(settings, bounds={name: settings.bounds_of(name) for name in settings.explore})

    def _check_names(self) -> None:
        if not self.explore:
            raise ValueError(f"--pbt-explore {list(self.explore)}: expected at least one of {_explorable_text()}")
        known = {name for names in explorable().values() for name in names}
        for name in self.explore:
            if name not in known:
                raise ValueError(
                    f"--pbt-explore {name!r}: not a hyperparameter PBT can explore; expected some of each task's "
                    f"algorithm's ({_explorable_text()}; shapes such as network width or batch size are out of scope)"
                )
        if len(set(self.explore)) != len(self.explore):
            raise ValueError(f"--pbt-explore {list(self.explore)}: each hyperparameter may appear once")
        for name, (low, high) in self.bounds.items():
            if name not in self.explore:
                raise ValueError(f"--pbt-bounds {name}: {name!r} is not explored (--pbt-explore {list(self.explore)})")
            if not (math.isfinite(low) and math.isfinite(high) and 0 < low < high):
                at_zero = (
                    f" ({name} is explored in log scale, where 0 has no place: a task whose {name} is 0 cannot "
                    f"explore it; leave {name} out of --pbt-explore)"
                    if math.isfinite(low) and low <= 0 < high and not in_complement_scale(name)
                    else ""
                )
                raise ValueError(f"--pbt-bounds {name}={low}:{high}: expected 0 < LOW < HIGH, both finite{at_zero}")
            if in_complement_scale(name) and not high < 1:
                raise ValueError(f"--pbt-bounds {name}={low}:{high}: expected HIGH < 1 ({name} is explored as 1 - x)")

    def _check_numbers(self) -> None:
        if not 0 < self.fraction <= 0.5:
            raise ValueError(f"--pbt-fraction {self.fraction}: expected a number in (0, 0.5]")
        if len(self.factors) != 2 or not all(math.isfinite(f) and f > 0 for f in self.factors):
            raise ValueError(f"--pbt-factors {list(self.factors)}: expected two finite positive numbers")
        if not 0 <= self.resample_probability <= 1:
            raise ValueError(f"--pbt-resample {self.resample_probability}: expected a probability in [0, 1]")
        if isinstance(self.interval, bool) or not isinstance(self.interval, int) or self.interval < 1:
            raise ValueError(f"--pbt-interval {self.interval!r}: expected a positive integer (checkpoint targets)")
        for task, rule in self.fitness.items():
            if rule not in FITNESS_RULES:
                raise ValueError(f"--pbt-fitness {task}={rule}: expected one of {list(FITNESS_RULES)}")

    def check_run(
        self,
        population: int,
        configs: dict[str, AlgorithmConfig],
        steps_between: dict[str, list[int]],
        checkpoints_between: dict[str, list[int]],
        protocols: dict[str, Any],
    ) -> None:
        """What needs the run: the population, each task's starting values and PBT updates.
        ``steps_between[task]`` lists the updates at which the step would fire;
        ``checkpoints_between[task]`` the checkpoint updates between the first and the last
        (where an interval of 1 fires)."""
        if self.selected(population) < 1:
            raise ValueError(
                f"--population {population}: truncation selection with --pbt-fraction {self.fraction} "
                f"needs at least {math.ceil(1 / self.fraction)} members (floor(population x fraction) >= 1)"
            )
        unknown = set(self.fitness) - set(configs)
        if unknown:
            raise ValueError(f"--pbt-fitness for {sorted(unknown)}: not trained in this run ({sorted(configs)})")
        self._check_algorithms(configs)
        for task, config in configs.items():
            for name in self.explored_by(algorithm_of(config).hyperparameter_names()):
                low, high = self.bounds_of(name)
                value = getattr(config, name)
                if (1 - value if in_complement_scale(name) else value) <= 0:
                    raise ValueError(self._unexplorable(task, config, name, value))
                if not low <= value <= high:
                    raise ValueError(
                        f"--pbt-bounds {name}={low:g}:{high:g} exclude {task}'s starting value {name}={value:g}; "
                        f"expected bounds around it (give --pbt-bounds {name}=LOW:HIGH)"
                    )
            if not steps_between[task]:
                raise ValueError(self._never_fires(task, config, protocols[task], len(checkpoints_between[task])))

    def _unexplorable(self, task: str, config: AlgorithmConfig, name: str, value: float) -> str:
        """Why ``task`` cannot explore ``name`` from its starting ``value`` (0, or 1 for a name
        explored as 1 - x: where the log scale has no place) and the way out: leave it out."""
        edge, scale = ("1", f"log scale of 1 - {name}") if in_complement_scale(name) else ("0", "log scale")
        algorithm = algorithm_of(config)
        rest = [other for other in self.explore if other != name]
        if any(other in algorithm.hyperparameter_names() for other in rest):
            way_out = f"--pbt-explore {' '.join(rest)}"
        else:
            others = [other for other in algorithm.hyperparameter_names() if other != name]
            way_out = f"--pbt-explore with others of {algorithm.name}'s hyperparameters ({' '.join(others)})"
        side = "below 1" if edge == "1" else "above 0"
        return (
            f"--pbt: {task} starts at {name}={value:g}, which PBT cannot explore: it moves {name} in {scale} "
            f"(multiplied by --pbt-factors, drawn within --pbt-bounds), where {name}={edge} has no place; leave "
            f"{name} out of the explored set ({way_out}), or start {task} with {name} {side} "
            f"(--{name.replace('_', '-')})"
        )

    def _check_algorithms(self, configs: dict[str, AlgorithmConfig]) -> None:
        """Each task explores the names of ``explore`` its algorithm carries: at least one; a name
        given that no task's algorithm carries is refused (the default set is each algorithm's part
        of it)."""
        carried = {task: algorithm_of(config).hyperparameter_names() for task, config in configs.items()}
        for task, names in carried.items():
            if not self.explored_by(names):
                algorithm = algorithm_of(configs[task]).name
                if self.explore == DEFAULT_EXPLORE:  # not given: say it is PPO's, and what to give
                    rates = [name for name in names if name.endswith(("learning_rate", "lr"))] or list(names[:1])
                    raise ValueError(
                        f"--pbt: {task} trains {algorithm}, which has none of the hyperparameters PBT explores "
                        f"by default ({' '.join(DEFAULT_EXPLORE)}: PPO's); expected --pbt-explore with some of "
                        f"{algorithm}'s: {' '.join(names)} (e.g. --pbt-explore {' '.join(rates)})"
                    )
                raise ValueError(
                    f"--pbt-explore {' '.join(self.explore)}: {task}'s algorithm {algorithm} has none of them; "
                    f"expected some of its hyperparameters {list(names)}"
                )
        if self.explore == DEFAULT_EXPLORE:
            return
        for name in self.explore:
            if not any(name in names for names in carried.values()):
                held = "; ".join(
                    f"{task} ({algorithm_of(configs[task]).name}): {list(n)}" for task, n in carried.items()
                )
                raise ValueError(
                    f"--pbt-explore {name!r}: no task of this run has it; expected each task's algorithm's ({held})"
                )

    def _never_fires(self, task: str, config: AlgorithmConfig, protocol: Any, targets: int) -> str:
        """Why the step never fires within ``task``'s budget, in the numbers the run trains with:
        no checkpoint between the first and the last update (the checkpoint interval's doing,
        whatever --pbt-interval is), or fewer ``targets`` there than --pbt-interval."""
        batch, updates = config.batch_size, config.num_updates
        trained = updates * batch
        rounded = (
            f"total_timesteps {config.total_timesteps:,} rounded up to {updates} whole updates of {batch:,}"
            if trained != config.total_timesteps
            else f"{updates} updates of {batch:,}"
        )
        if targets == 0:
            return (
                f"--pbt: the PBT step never fires within {task}'s budget: {task} trains {trained:,} steps ({rounded}) "
                f"and with a checkpoint every {protocol.checkpoint_interval:,} steps (checkpoint_interval) no "
                "checkpoint falls between its first and last update, where the step runs; expected a checkpoint "
                f"interval of at most {(updates - 1) * batch:,} steps (--checkpoint-interval), or a larger budget"
            )
        return (
            f"--pbt-interval {self.interval}: the PBT step never fires within {task}'s budget: it runs at every "
            f"{_ordinal(self.interval)} checkpoint target, and {task}'s {trained:,} steps ({rounded}) hold "
            f"{targets} checkpoint targets before its last update (a checkpoint every "
            f"{protocol.checkpoint_interval:,} steps); expected --pbt-interval at most {targets}"
        )

    def check_fitness(self, task: str, defines_success: bool) -> None:
        """``success`` ranks nothing where the task defines no success (every member NaN: -inf)."""
        if self.fitness.get(task) == "success" and not defines_success:
            raise ValueError(
                f"--pbt-fitness {task}=success: {task} defines no success (its held-out success_rate is NaN, so "
                f"every member would rank alike and the tie-break alone would choose); {task} has a held-out return "
                f"(return_mean) to rank by: expected {task}=return, or no --pbt-fitness for it"
            )

    def fitness_of(self, task: str, defines_success: bool) -> str:
        return self.fitness.get(task, "success" if defines_success else "return")

    # ------------------------------------------------------------------------------ records
    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["explore"] = list(self.explore)
        data["factors"] = list(self.factors)
        data["bounds"] = {name: list(self.bounds_of(name)) for name in self.explore}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PBTSettings:
        return cls.checked(**data)
