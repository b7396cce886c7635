"""Ablations: each design change of a task turned off, one at a time, over several seeds.

A variant is a whole task setup (environment, its training params, PPO config). Every
variant trains all its seeds in one compiled call (``sweep.train_group``) and is judged on
the task's own held-out protocol, so the rows of the table differ only in the change they
name. The table reports held-out success and the task's speed metric (swing: time to
rotation, hrv: episode length) as the mean and two-sided 95% t interval over seeds.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from purehr.algorithms.base import AlgorithmConfig
from purehr.envs import hrv
from purehr.envs.base import Environment
from purehr.envs.swing import SwingEnv
from purehr.experiments.sweep import train_group
from purehr.reports.stats import UNINFORMATIVE_NOTE, mean_confidence_interval, metric_range
from purehr.run.store.files import atomic_write_json, atomic_write_text, write_csv
from purehr.run.store.machine import load_average
from purehr.tasks import HRV_DEFAULTS, SWING_DEFAULTS, get_task

SPEED_METRIC = {"swing": "time_to_rotation", "hrv": "episode_length"}
"""The held-out metric that says how fast a successful policy is, per task."""


@dataclass(frozen=True)
class Variant:
    name: str
    change: str  # what differs from the default, in words
    make_env: Callable[[], Environment]
    config: AlgorithmConfig
    train_param_overrides: dict[str, Any] = field(default_factory=dict)
    """Fields of the environment params replaced for training only (evaluation keeps the
    held-out protocol, e.g. the swing's fixed small-angle starts)."""
    core: bool = True
    """Core variants make the ablation table; the others (levers tried for a goal, e.g. the
    swing's speed) run only when named with ``only``."""


def swing_variants(steps: int) -> list[Variant]:
    """The swing's core variants, then the levers tried for its speed."""
    config = SWING_DEFAULTS.replace(total_timesteps=steps)
    return _swing_core_variants(config) + _swing_speed_levers(config)


def _swing_core_variants(config: AlgorithmConfig) -> list[Variant]:
    """The defaults, and each of their design changes turned off."""
    task_env = get_task("swing").make_env  # wide starts, a quarter at the held-out scale
    return [
        Variant(
            "default",
            "wide training starts (reset_noise 1.0) with a quarter at the held-out scale "
            "(small_start_fraction 0.25), 32 envs x 128 steps, minibatch 256",
            task_env,
            config,
        ),
        Variant(
            "no small starts",
            "wide training starts only (small_start_fraction 0)",
            task_env,
            config,
            {"small_start_fraction": 0.0},
        ),
        Variant(
            "minibatch 1024",
            "minibatch 1024 (4 per epoch) instead of 256",
            task_env,
            config.replace(minibatch_size=1024),
        ),
        Variant(
            "narrow starts",
            "training starts = the held-out scale (reset_noise 0.01, no mixture)",
            task_env,
            config,
            {"reset_noise": 0.01, "small_start_fraction": 0.0},
        ),
        Variant(
            "old batch",
            "8 envs x 256 steps, minibatch 256 (the first defaults)",
            task_env,
            config.replace(num_envs=8, num_steps=256, minibatch_size=256),
        ),
    ]


def _swing_speed_levers(config: AlgorithmConfig) -> list[Variant]:
    """Levers tried for the time to rotation, each against the defaults before it (minibatch
    1024, wide starts only, with SwingEnv): results/ablation/swing_speed.md."""
    before = config.replace(minibatch_size=1024)

    def lever(
        name: str, change: str, lever_config: AlgorithmConfig, overrides: dict[str, Any] | None = None
    ) -> Variant:
        return Variant(name, change, SwingEnv, lever_config, overrides or {}, core=False)

    def discount(gamma: float) -> Variant:
        change = f"minibatch 1024, wide starts; discount {gamma} in PPO and in the shaping"
        return lever(f"gamma {gamma}", change, before.replace(gamma=gamma), {"gamma": gamma})

    def small_starts(name: str, fraction: float, minibatch: int) -> Variant:
        change = (
            f"minibatch {minibatch}, wide training starts with {fraction} of them at the "
            "held-out scale (small_start_fraction, small_reset_noise 0.05)"
        )
        return lever(name, change, before.replace(minibatch_size=minibatch), {"small_start_fraction": fraction})

    return [
        discount(0.998),
        discount(0.999),
        lever(
            "success bonus 50", "minibatch 1024, wide starts; k_success 50 instead of 10", before, {"k_success": 50.0}
        ),
        lever(
            "minibatch 512",
            "wide starts; minibatch 512 (8 per epoch) instead of 1024",
            before.replace(minibatch_size=512),
        ),
        lever("minibatch 256", "wide starts; minibatch 256 (16 per epoch) instead of 1024", config),
        small_starts("small starts 0.25", 0.25, 1024),
        small_starts("minibatch 256 small starts 0.25", 0.25, 256),
        small_starts("minibatch 256 small starts 0.5", 0.5, 256),
    ]


def hrv_variants(steps: int) -> list[Variant]:
    config = HRV_DEFAULTS.replace(total_timesteps=steps)

    def env(**kwargs) -> Callable[[], Environment]:
        return lambda: hrv.HRWritingEnv(hrv_dim=8, **kwargs)

    return [
        Variant("default", "gap + gain features, distance reward, 64 envs x 32 steps, minibatch 512", env(), config),
        Variant(
            "no gap features", "observation without the scaled gap and context gain", env(gap_features=False), config
        ),
        Variant(
            "progress reward",
            "reward_form='progress' (L1 progress in steps minus a time cost)",
            env(reward_form="progress"),
            config,
        ),
        Variant(
            "potential reward",
            "reward_form='potential' (the first default: shaping + bonus)",
            env(reward_form="potential"),
            config,
        ),
        Variant(
            "old batch",
            "8 envs x 256 steps, minibatch 64 (the first defaults)",
            env(),
            config.replace(num_envs=8, num_steps=256, minibatch_size=64),
        ),
    ]


VARIANTS: dict[str, Callable[[int], list[Variant]]] = {"swing": swing_variants, "hrv": hrv_variants}


def run_variant(task: str, variant: Variant, seeds: Sequence[int]) -> dict[str, Any]:
    """Train and evaluate one variant for every seed; per-seed metrics and timing."""
    env = variant.make_env()
    train_params = env.default_params.replace(**variant.train_param_overrides)
    group = train_group(
        variant.config,
        env,
        {},
        seeds,
        env_params=train_params,
        evaluate=_evaluator(task, env, variant),
        name=variant.name,
    )
    return {
        "variant": variant,
        "seeds": list(seeds),
        "evaluation": {name: np.asarray(values) for name, values in group.evaluation.items()},
        "timing": group.timing,
    }


def _evaluator(task: str, env: Environment, variant: Variant):
    """The task's held-out protocol with the training-only overrides undone (e.g. the swing
    is judged from its fixed small-angle starts whatever its training starts were)."""
    heldout_evaluation = get_task(task).heldout_evaluation
    restore = {name: getattr(env.default_params, name) for name in variant.train_param_overrides}

    _, protocol = get_task(task).settings_for(variant.config)

    def evaluate(algorithm, network_params, hparams):
        env_params = algorithm.env_params_at(algorithm.num_updates - 1, hparams).replace(**restore)
        return heldout_evaluation(
            env, env_params, algorithm.policy(network_params), num_episodes=protocol.eval_episodes
        )

    return evaluate


def summary_rows(task: str, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    speed = SPEED_METRIC[task]
    rows = []
    for result in results:
        evaluation = result["evaluation"]
        success = mean_confidence_interval(evaluation["success_rate"], bounds=metric_range("success_rate"))
        pace = mean_confidence_interval(evaluation[speed], bounds=metric_range(speed))
        rows.append(
            {
                "variant": result["variant"].name,
                "change": result["variant"].change,
                "seeds": len(result["seeds"]),
                "success_mean": success["mean"],
                "success_ci_low": success["ci_low"],
                "success_ci_high": success["ci_high"],
                "success_ci_uninformative": success["uninformative"],
                "success_per_seed": " ".join(f"{v:.2f}" for v in evaluation["success_rate"]),
                f"{speed}_per_seed": " ".join(f"{v:.2f}" for v in evaluation[speed]),
                f"{speed}_median": float(np.nanmedian(evaluation[speed]))
                if np.isfinite(evaluation[speed]).any()
                else float("nan"),
                f"{speed}_mean": pace["mean"],
                f"{speed}_ci_low": pace["ci_low"],
                f"{speed}_ci_high": pace["ci_high"],
                f"{speed}_ci_uninformative": pace["uninformative"],
                "train_s": result["timing"]["train_run_s"],
                "compile_s": result["timing"]["train_compile_s"],
            }
        )
    return rows


def format_markdown(task: str, rows: list[dict[str, Any]]) -> str:
    speed = SPEED_METRIC[task]

    def interval(row: dict[str, Any], name: str, digits: int) -> str:
        low, high = row[f"{name}_ci_low"], row[f"{name}_ci_high"]
        mean = row[f"{name}_mean"]
        if not math.isfinite(mean):
            return "-"
        bounds = f" [{low:.{digits}f}, {high:.{digits}f}]" if math.isfinite(low) else ""
        return f"{mean:.{digits}f}{bounds}" + ("*" if bounds and row.get(f"{name}_ci_uninformative") else "")

    lines = [f"| variant | change | held-out success (95% t interval) | per seed | {speed} |", "|---|---|---|---|---|"]
    for row in rows:
        lines.append(
            f"| {row['variant']} | {row['change']} | {interval(row, 'success', 2)} | "
            f"{row['success_per_seed']} | {interval(row, speed, 1)} |"
        )
    if any("*" in line for line in lines[2:]):
        lines += ["", UNINFORMATIVE_NOTE]
    return "\n".join(lines) + "\n"


def write_outputs(out_dir: Path, task: str, rows: list[dict[str, Any]], description: dict[str, Any]) -> list[Path]:
    return [
        write_csv(out_dir / f"{task}.csv", list(rows[0]), rows),
        atomic_write_text(out_dir / f"{task}.md", format_markdown(task, rows)),
        atomic_write_json(out_dir / f"{task}.json", description),
    ]


def run_ablation(
    task: str, steps: int, seeds: Sequence[int], only: Sequence[str] | None = None, log: Callable[[str], None] = print
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every variant of ``task`` (or those named in ``only``) over ``seeds``."""
    if task not in VARIANTS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(VARIANTS)}")
    variants = VARIANTS[task](steps)
    if only:
        names = [v.name for v in variants]
        unknown = sorted(set(only) - set(names))
        if unknown:
            raise ValueError(f"unknown variant(s) {unknown} for {task}; expected some of {names}")
        variants = [v for v in variants if v.name in only]
    else:
        variants = [v for v in variants if v.core]
    load_before, started = load_average(), time.perf_counter()
    results = []
    for variant in variants:
        log(f"[ablation] {task}: {variant.name} ({variant.change}), {len(seeds)} seeds x {steps} steps")
        result = run_variant(task, variant, seeds)
        log(
            f"[ablation] {task}: {variant.name}: success per seed "
            f"{np.round(result['evaluation']['success_rate'], 2).tolist()}, "
            f"train {result['timing']['train_run_s']:.1f} s"
        )
        results.append(result)
    timing = {
        "wall_time_s": time.perf_counter() - started,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }
    return summary_rows(task, results), timing
