"""Hyperparameter sweeps as one compiled call per network shape.

Every continuous PPO hyperparameter is a field of ``PPOHyperparams``, a pytree the runner
state carries, so a grid is a ``vmap``: the grid x seeds is flattened onto the leading axis
of ``make_train``'s keys and hparams and trained in one ``jax.jit`` call, then every trained
policy is evaluated on the task's held-out protocol in one more (vmapped, on the device).
Choices that change array shapes or the program (minibatch size, network widths, number of
environments) make separate *groups*, one compiled call each.

Run ``r`` of a group is setting ``r // num_seeds`` with seed ``seeds[r % num_seeds]``; the
seed's key is ``PRNGKey(seed)``, the same key a single run of that seed uses, so a sweep
reproduces the runs made one at a time (``tests/test_sweep.py``).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import ALGORITHMS, DEFAULT_ALGORITHM, algorithm_of, get_algorithm
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds, validate_seeds
from purehr.engine.user_network import describe
from purehr.envs.base import Environment
from purehr.envs.curriculum import Curriculum
from purehr.experiments.group_result import GroupResult
from purehr.experiments.ranking import run_rows, setting_rows
from purehr.experiments.sensitivity import SENSITIVITY_STEM, write_sensitivity
from purehr.run.baselines import evaluate_baselines
from purehr.run.compiled.task_setup import build_task_setup
from purehr.run.store.files import atomic_write_json, check_output_file, json_values, write_csv
from purehr.tasks import curriculum_schedule, get_task, heldout_env_params
from purehr.viz.sweep_heatmap import heatmap_axes, plot_heatmap

HYPERPARAMETERS = get_algorithm(DEFAULT_ALGORITHM).hyperparameter_names()
"""The sweep's axes: the continuous hyperparameters the training state carries (vmapped)."""
SHAPE_FIELDS = (
    "num_envs",
    "num_steps",
    "num_epochs",
    "minibatch_size",
    "actor_hidden",
    "critic_hidden",
    "policy",
    "recurrent_width",
    "recurrent_skip",
    "network",
)
"""AlgorithmConfig fields that change the compiled program: one group (one compile) per choice."""


def shape_fields(config: AlgorithmConfig) -> tuple[str, ...]:
    """What makes groups for ``config``'s algorithm (``algorithm_shape_fields``)."""
    return algorithm_shape_fields(algorithm_of(config).name)


def algorithm_shape_fields(algorithm: str) -> tuple[str, ...]:
    """What makes groups for ``algorithm``: PPO's ``SHAPE_FIELDS``; another algorithm's config
    fields that are not its continuous hyperparameters (nor the budget)."""
    if algorithm == DEFAULT_ALGORITHM:
        return SHAPE_FIELDS
    entry = get_algorithm(algorithm)
    swept = set(entry.hyperparameter_names()) | {"total_timesteps"}
    return tuple(field.name for field in dataclasses.fields(entry.config_class()) if field.name not in swept)


def sweep_flag_fields() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every registered algorithm's continuous hyperparameters, every algorithm's shape fields
    not among them), each once, PPO's first: the sweep script's flags; which of them a sweep
    takes is its algorithm's (``validate_axes``, ``shape_fields``)."""
    order = [DEFAULT_ALGORITHM, *(name for name in ALGORITHMS if name != DEFAULT_ALGORITHM)]
    swept = dict.fromkeys(name for algorithm in order for name in get_algorithm(algorithm).hyperparameter_names())
    shapes = dict.fromkeys(name for algorithm in order for name in algorithm_shape_fields(algorithm))
    return tuple(swept), tuple(name for name in shapes if name not in swept)


SWEEP_MARKER = "sweep.json"
RANKING_CSV = "ranking.csv"
RUNS_CSV = "runs.csv"
HEATMAP_STEM = "heatmap"


# --- the grid ---------------------------------------------------------------------------------


def grid_settings(axes: Mapping[str, Sequence[float]], algorithm: str = DEFAULT_ALGORITHM) -> list[dict[str, float]]:
    """Every combination of the axes' values, the first axis varying slowest."""
    axes = validate_axes(axes, algorithm)
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*(axes[n] for n in names))]


def validate_axes(
    axes: Mapping[str, Sequence[float]], algorithm: str = DEFAULT_ALGORITHM
) -> dict[str, tuple[float, ...]]:
    """The axes checked against ``algorithm``'s continuous hyperparameters (what its state
    carries, so a grid is a vmap), each with distinct values."""
    names = get_algorithm(algorithm).hyperparameter_names()
    checked = {}
    for name, values in axes.items():
        if name not in names:
            raise ValueError(
                f"sweep axis {name!r} is not a continuous hyperparameter of {algorithm}; expected one of "
                f"{names} (other config fields make groups: one compiled call per choice)"
            )
        values = tuple(float(v) for v in values)
        if not values:
            raise ValueError(f"sweep axis {name!r} has no values")
        if len(set(values)) != len(values):
            raise ValueError(f"sweep axis {name!r} repeats a value: {values}")
        checked[name] = values
    return checked


def flatten_grid(
    config: AlgorithmConfig, settings: list[dict[str, float]], seeds: Sequence[int]
) -> tuple[jax.Array, Any]:
    """Keys (runs, 2) and hparams with a leading run axis (float32) for settings x seeds,
    setting-major. Fields not in a setting keep ``config``'s value; every setting is
    validated through ``PPOConfig`` (so e.g. a negative learning rate is refused here)."""
    seeds = validate_seeds(seeds)
    rows = []
    for setting in settings:
        hparams = config.replace(**setting).hyperparams()  # validates the values
        rows.extend([hparams] * len(seeds))
    flat = jax.tree.map(lambda *leaves: jnp.asarray(np.asarray(leaves, np.float32)), *rows)
    keys = jnp.tile(keys_for_seeds(seeds), (len(settings), 1))
    return keys, flat


# --- training and evaluation of one group -----------------------------------------------------


def train_group(
    config: AlgorithmConfig,
    env: Environment,
    axes: Mapping[str, Sequence[float]],
    seeds: Sequence[int],
    *,
    env_params=None,
    env_params_schedule=None,
    evaluate: Callable[[Any, Any, Any], dict[str, jax.Array]] | None = None,
    name: str = "default",
) -> GroupResult:
    """Train ``axes``' grid x ``seeds`` in one compiled ``make_train`` call.

    ``evaluate(ppo, network_params, hparams) -> metrics`` (one run, pure) is vmapped over
    every run and jitted as one more call; omit it to skip evaluation. Timing records the
    compile and run seconds of both calls; ``diverged_at`` the first non-finite update of each run."""
    settings = grid_settings(axes, algorithm_of(config).name)
    keys, hparams = flatten_grid(config, settings, seeds)
    train = make_train(config, env, env_params, env_params_schedule=env_params_schedule, hparams=hparams)
    timing = {}
    started = time.perf_counter()
    compiled = train.jitted.lower(keys, hparams).compile()
    timing["train_compile_s"] = time.perf_counter() - started
    started = time.perf_counter()
    result = jax.block_until_ready(compiled(keys, hparams))
    timing["train_run_s"] = time.perf_counter() - started
    runs = len(settings) * len(seeds)
    timing["env_steps"] = float(runs * config.num_updates * config.batch_size)
    timing["env_steps_per_s"] = timing["env_steps"] / timing["train_run_s"]
    evaluation = {}
    algorithm = train.algorithm
    params = algorithm.network_params(result.runner)
    if evaluate is not None:
        evaluate_all = jax.jit(jax.vmap(lambda params, run_hparams: evaluate(algorithm, params, run_hparams)))
        started = time.perf_counter()
        compiled_eval = evaluate_all.lower(params, result.runner.hparams).compile()
        timing["eval_compile_s"] = time.perf_counter() - started
        started = time.perf_counter()
        evaluation = jax.block_until_ready(compiled_eval(params, result.runner.hparams))
        timing["eval_run_s"] = time.perf_counter() - started
        evaluation = {k: np.asarray(v) for k, v in evaluation.items()}
    return GroupResult(
        name,
        config,
        settings,
        [int(s) for s in seeds],
        result.runner,
        {k: np.asarray(v) for k, v in result.metrics.items()},
        evaluation,
        timing,
        diverged_at=np.asarray(train.algorithm.diverged_at_update(result.runner)),
        network=describe(config.network, jax.tree.map(lambda leaf: leaf[0], params)),
    )


def task_evaluator(task_name: str, env: Environment, num_episodes: int, curriculum: Curriculum | None = None):
    """``evaluate(ppo, params, hparams)`` on the task's held-out protocol, at each run's own
    ``heldout_env_params``; hrv adds ``noisy_success_rate`` (purehr.tasks)."""
    task = get_task(task_name)

    def evaluate(ppo, network_params, hparams):
        return task.heldout_evaluation(
            env, heldout_env_params(ppo, hparams, curriculum), ppo.policy(network_params), num_episodes=num_episodes
        )

    return evaluate


def run_task_sweep(
    task_name: str,
    base_config: AlgorithmConfig,
    axes: Mapping[str, Sequence[float]],
    seeds: Sequence[int],
    shape_choices: Mapping[str, Sequence[Any]] | None = None,
    curriculum: Curriculum | None = None,
    log: Callable[[str], None] = print,
    eval_episodes: int | None = None,
) -> list[GroupResult]:
    """One group per combination of ``shape_choices`` (e.g. ``{"minibatch_size": [64, 128]}``),
    each trained and evaluated as one compiled call on the task's held-out protocol
    (``eval_episodes``: its episodes, default the protocol's)."""
    task = get_task(task_name)
    env = task.make_env()
    axes = validate_axes(axes, algorithm_of(base_config).name)
    shape_choices = dict(shape_choices or {})
    for name in shape_choices:
        if name not in shape_fields(base_config):
            raise ValueError(f"shape choice {name!r}: expected one of {shape_fields(base_config)}")
    base_config, protocol = task.settings_for(base_config)  # the held-out episodes: the protocol's
    if eval_episodes is not None:
        protocol = protocol.replace(eval_episodes=eval_episodes)
    configs = [(group_name(c), base_config.replace(**c)) for c in shape_combinations(shape_choices)]  # validates all
    if curriculum is not None:
        curriculum.check_params(env.default_params)
    groups = []
    settings = grid_settings(axes, algorithm_of(base_config).name)
    for name, config in configs:
        log(
            f"[sweep] group {name}: {len(settings)} settings x {len(seeds)} seeds = "
            f"{len(settings) * len(seeds)} runs of {config.num_updates * config.batch_size} steps"
        )
        group = train_group(
            config,
            env,
            axes,
            seeds,
            env_params=env.default_params,
            env_params_schedule=curriculum_schedule(curriculum, config),
            evaluate=task_evaluator(task_name, env, protocol.eval_episodes, curriculum),
            name=name,
        )
        t = group.timing
        log(
            f"[sweep] group {name}: compile {t['train_compile_s']:.1f} s, train {t['train_run_s']:.1f} s "
            f"({t['env_steps_per_s']:.0f} steps/s over all runs), evaluation compile "
            f"{t['eval_compile_s']:.1f} s, run {t['eval_run_s']:.1f} s"
        )
        diverged = int(np.count_nonzero(group.diverged_at))
        if diverged:
            log(
                f"[sweep] group {name}: {diverged} of {group.num_runs} runs diverged "
                "(their settings rank after every healthy one)"
            )
        groups.append(group)
    return groups


def sweep_references(
    task_name: str,
    config: AlgorithmConfig,
    curriculum: Curriculum | None = None,
    eval_episodes: int | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, dict[str, float]]:
    """``{"reference: NAME" | "floor: NAME": held-out metrics}``: the task's reference policy
    (where it has one) and its floors on the held-out protocol the sweep's runs are judged on,
    at ``config``'s evaluation params (the protocol's results table shows the same rows; the
    numbers are kept as a run's are, ``purehr.run.baselines``)."""
    protocol = get_task(task_name).settings_for(config)[1]
    if eval_episodes is not None:
        protocol = protocol.replace(eval_episodes=eval_episodes)
    setup = build_task_setup(task_name, config, curriculum, protocol=protocol)
    found = evaluate_baselines([setup], say=log)[setup.name]
    references = {} if found["metrics"] is None else {f"reference: {found['name']}": found["metrics"]}
    return {**references, **{f"floor: {name}": metrics for name, metrics in found["floors"].items()}}


def shape_combinations(shape_choices: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    """Every group's shape choice, the first field varying slowest ([{}]: one group, no choice)."""
    return [dict(zip(shape_choices, values)) for values in itertools.product(*shape_choices.values())] or [{}]


def group_name(choice: Mapping[str, Any]) -> str:
    if not choice:
        return "default"
    return " ".join(f"{k}={'x'.join(map(str, v)) if isinstance(v, tuple) else v}" for k, v in choice.items())


# --- the output directory ---------------------------------------------------------------------


class SweepDirectoryInUse(FileExistsError):
    pass


OUTPUT_NAMES = (SWEEP_MARKER, RANKING_CSV, RUNS_CSV, f"{HEATMAP_STEM}.png", f"{HEATMAP_STEM}.pdf") + tuple(
    f"{SENSITIVITY_STEM}.{suffix}" for suffix in ("md", "png", "pdf")
)


def sweep_settings(
    task: str,
    base_config: AlgorithmConfig,
    axes: Mapping[str, Sequence[float]],
    shape_choices: Mapping[str, Sequence[Any]],
    seeds: Sequence[int],
    curriculum=None,
) -> dict[str, Any]:
    """What decides a sweep's results, as JSON values: two sweeps with equal settings train the
    same runs. Recorded in ``sweep.json`` (key ``settings``) and compared by prepare_out_dir."""
    settings = {
        "task": task,
        "axes": {name: list(values) for name, values in axes.items()},
        "shape_choices": {
            name: [list(v) if isinstance(v, tuple) else v for v in values] for name, values in shape_choices.items()
        },
        "seeds": list(seeds),
        "base_config": base_config.to_dict(),
        "curriculum": None if curriculum is None else curriculum.to_dict(),
    }
    return json_values(settings)


def read_sweep(out_dir: Path) -> dict[str, Any] | None:
    """The description in ``<out_dir>/sweep.json`` when it is a purehr sweep's, else None."""
    try:
        description = json.loads((Path(out_dir) / SWEEP_MARKER).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(description, dict) or not {"command", "groups"} <= set(description):
        return None
    return description


def prepare_out_dir(out_dir: Path, overwrite: bool, settings: Mapping[str, Any] | None = None) -> None:
    """Checks ``out_dir`` before any work; creates and removes nothing (write_outputs does, once
    there are results). New or empty: accepted. Holding a purehr sweep: refused unless
    ``overwrite`` (the message says whether its settings are these ``settings``). Holding
    anything else: refused, ``overwrite`` or not, as the trainer refuses a foreign --run-dir."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise SweepDirectoryInUse(f"--out {out_dir} is a file; expected a directory (new, empty or a sweep's)")
    if not out_dir.exists():
        check_output_file(out_dir / SWEEP_MARKER)  # its nearest existing parent can be written
        return
    entries = sorted(entry.name for entry in out_dir.iterdir())
    if not entries:
        return
    previous = read_sweep(out_dir)
    if previous is None:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise SweepDirectoryInUse(
            f"{out_dir} is not empty and holds no purehr sweep (it has {shown}); choose a "
            "new or empty --out (--overwrite replaces only a sweep)"
        )
    if overwrite:
        return
    if settings is not None and previous.get("settings") == json_values(settings):
        raise SweepDirectoryInUse(
            f"{out_dir} already holds a sweep of the same settings ({SWEEP_MARKER}); pass "
            "--overwrite to run it again, or choose another --out"
        )
    differences = settings_differences(previous.get("settings"), settings)
    raise SweepDirectoryInUse(
        f"{out_dir} already holds a sweep of other settings ({differences}); pass "
        "--overwrite to replace it, or choose another --out"
    )


def settings_differences(previous: Mapping[str, Any] | None, settings: Mapping[str, Any] | None) -> str:
    if previous is None or settings is None:
        return "not recorded in its sweep.json" if previous is None else "not compared"
    names = [name for name in sorted(set(previous) | set(settings)) if previous.get(name) != settings.get(name)]
    return "differs in " + ", ".join(names)


def write_outputs(
    out_dir: Path,
    groups: list[GroupResult],
    axes: Mapping[str, Sequence[float]],
    ranking: list[dict[str, Any]],
    description: dict[str, Any],
    heatmap: Sequence[str] | None = None,
    reduce: str = "max",
) -> list[Path]:
    names = list(axes)
    replacing = read_sweep(out_dir) is not None
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(out_dir / RANKING_CSV, None, ranking)
    write_csv(out_dir / RUNS_CSV, None, run_rows(groups, names))
    paths = [out_dir / RANKING_CSV, out_dir / RUNS_CSV]
    paths += plot_heatmap(setting_rows(groups, names), axes, heatmap_axes(axes, heatmap), out_dir, reduce, HEATMAP_STEM)
    description = dict(
        description,
        groups=[
            {"name": g.name, "config": g.config.to_dict(), "timing": g.timing}
            | ({"network": g.network} if g.network else {})
            for g in groups
        ],
    )
    atomic_write_json(out_dir / SWEEP_MARKER, description)
    paths.append(out_dir / SWEEP_MARKER)
    paths += write_sensitivity(out_dir)  # from the files just written: the IQM ranking, the sensitivity
    if replacing:  # what the replaced sweep wrote and this one did not (a heat map)
        for name in set(OUTPUT_NAMES) - {path.name for path in paths}:
            (out_dir / name).unlink(missing_ok=True)
    return paths
