"""What a task is: its environment, PPO defaults, reference policies, held-out evaluation and
showcase recorder, so the runner, the scripts and the API treat every task alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax

from purehr.algorithms.base import Algorithm, AlgorithmConfig
from purehr.algorithms.registry import algorithm_of, get_algorithm
from purehr.envs.base import Environment
from purehr.envs.curriculum import Curriculum
from purehr.protocol_settings import ProtocolSettings, without_legacy_settings
from purehr.types import EnvParamsSchedule, Evaluation, Policy


@dataclass(frozen=True)
class Baseline:
    """A reference policy, evaluated on the same held-out protocol as PPO."""

    name: str  # as manifests and tables name it
    flag: str  # as ``scripts/evaluate.py --policy`` names it
    make_policy: Callable[[Environment, Any], Policy]  # make_policy(env, env_params)
    definition: str = ""


@dataclass(frozen=True)
class Task:
    name: str
    env_class: type
    make_env: Callable[..., Environment]
    """``make_env(**env_kwargs)``; it also takes the fields of the environment's params by name
    (``PPOModel.load`` rebuilds a saved model's env params through it, so they are validated)."""
    default_config: AlgorithmConfig
    baselines: tuple[Baseline, ...]
    """The reference baseline first (structured controller, oracle) when the task has one
    (``has_reference``), then the floors PPO must beat by a wide margin (doing nothing, acting
    at random)."""
    heldout_evaluation: Evaluation
    """The protocol's held-out evaluation (checkpoints, baselines, sweeps)."""
    env_evaluation: Evaluation
    """The environment's own held-out evaluation (``PPOModel.evaluate``, ``scripts/evaluate.py``):
    the same episodes, without the protocol's extra probes."""
    record_showcase: Callable[[Environment, Any, Policy], dict[str, jax.Array]]
    env_kwargs: Callable[[Environment], dict[str, Any]] = lambda env: {}
    """What a run records in its manifest to rebuild the same environment (restore, resume)."""
    legacy_env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The environment of runs recorded before manifests named it (``run.store.record.recorded_env``)."""
    unrecorded_env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword values a recorded environment had before the keyword existed (``record.recorded_env_kwargs``)."""
    has_reference: bool = True
    """False for a task from a suite or a user's environment, and for a partially observed
    variant (``swing-angles``, ``hrv-hidden-audience``: the reference reads what the variant
    hides): only floors, no reference policy."""
    owns: Callable[[Environment], bool] = lambda env: True
    """Whether an ``env_class`` environment is this task's (``task_of_env``): a variant built of
    the same class (``swing-angles`` of ``SwingEnv``) tells its environments apart by their option."""
    source: Callable[[Environment], dict[str, Any]] = lambda env: {"suite": "purehr"}
    """Where the environment comes from (suite, environment name, package versions, factory):
    recorded in the manifest's ``sources``, compared on resume."""
    default_protocol: ProtocolSettings = dataclasses.field(default_factory=ProtocolSettings)
    """How often a run of this task checkpoints and how many held-out episodes judge it."""
    default_configs: Mapping[str, AlgorithmConfig] = dataclasses.field(default_factory=dict)
    """Algorithm name -> the task's tuned config for it; ``default_config`` is filed under its
    own algorithm's name (``"ppo"``). An algorithm without one gets its own defaults for the
    task's action space (``config_for``)."""
    algorithm: str | None = None
    """The algorithm of a run entry ``swing@sac`` (``get_task("swing@sac")``: this task named
    so, its ``default_config`` the algorithm's); None: a task, trained by the run's algorithm."""

    def __post_init__(self) -> None:
        own = {algorithm_of(self.default_config).name: self.default_config}
        object.__setattr__(self, "default_configs", {**own, **dict(self.default_configs)})

    @property
    def task_name(self) -> str:
        """The task an entry ``swing@sac`` trains (``swing``); a task's own name otherwise."""
        return self.name.rpartition("@")[0] if self.algorithm is not None else self.name

    def config_for(self, algorithm: str, entry: str | None = None) -> AlgorithmConfig:
        """``algorithm``'s config for this task: its tuned default (``default_configs``), else
        the algorithm's own for the task's action space. ``ValueError`` naming ``entry``, the
        algorithm and the spaces it supports when it cannot act in this task's actions."""
        spec = get_algorithm(algorithm)
        if algorithm in self.default_configs and set(spec.action_spaces) >= {"Discrete", "MultiDiscrete", "Box"}:
            return self.default_configs[algorithm]  # serves every space: no environment to build
        env = self.make_env()
        space = env.action_space(env.default_params)
        spec.check_serves(entry or self.name, self.task_name, space)
        return self.default_configs.get(algorithm) or spec.defaults_for(space)

    def settings_for(self, config: AlgorithmConfig | None) -> tuple[AlgorithmConfig, ProtocolSettings]:
        """(the algorithm's config, the protocol's settings) a run of ``config`` (default: the
        task's) gets: the task's protocol settings, with those a config written when they were
        its fields carries (``PPOConfig(checkpoint_interval=...)``) over them."""
        config, legacy = without_legacy_settings(self.default_config if config is None else config)
        return config, self.default_protocol.replace(**legacy)

    @property
    def baseline(self) -> Baseline | None:
        """The reference policy, or None for a task without one (``has_reference``)."""
        return self.baselines[0] if self.has_reference else None

    @property
    def floors(self) -> tuple[Baseline, ...]:
        return self.baselines[1:] if self.has_reference else self.baselines

    def baseline_by_flag(self, flag: str) -> Baseline:
        for baseline in self.baselines:
            if baseline.flag == flag:
                return baseline
        raise ValueError(
            f"{flag!r} is not a {self.name} policy; choose from {', '.join(b.flag for b in self.baselines)}"
        )


def one_observation(make_env: Callable[..., Environment], option: str, value: bool | float, other: str):
    """``make_env`` with ``option`` (an observation option: a switch, or hrv's reading dropout) at
    ``value`` unless given; any other value is refused (``ValueError``) because it is task
    ``other``'s environment, which a run of this task would record and report under the wrong
    name."""

    def make(**kwargs: Any) -> Environment:
        env = make_env(**{option: value, **kwargs})  # the environment validates the value
        if getattr(env, option) != value:
            raise ValueError(
                f"{option}={kwargs[option]!r}: expected {value} (or leave it out); {option}={kwargs[option]!r} "
                f"is the environment of task {other!r}, train that task instead"
            )
        return env

    return make


def curriculum_schedule(curriculum: Curriculum | None, config: AlgorithmConfig) -> EnvParamsSchedule | None:
    """The ``env_params_schedule`` a curriculum gives a run of ``config`` (None: no schedule)."""
    return None if curriculum is None else curriculum.schedule(config.num_updates)


def heldout_env_params(algorithm: Algorithm, hparams: Any, curriculum: Curriculum | None = None) -> Any:
    """The params a policy is judged on: those of its last update (the env's discount is the
    algorithm's, for potential shaping), at a curriculum's final stage. ``hparams`` may be
    traced (a sweep)."""
    params = algorithm.env_params_at(algorithm.num_updates - 1, hparams)
    return params if curriculum is None else curriculum.final_params(params)
