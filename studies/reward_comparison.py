"""Which HRV reward learns? Every reward form x similarity trained with the same seeds and
budget, and compared on held-out success (``studies/scripts/compare_rewards.py`` is its command line).

One compiled call per combination (the reward form and the similarity select code, so they
are static): the scan over updates is outside, ``vmap(update)`` over seeds inside; before
training, every ``eval_every`` updates and after the last, the held-out evaluation of
docs/hrv_task.md runs on the device (the task's checkpoint evaluation, vmapped over seeds).
Only those scalars leave the device.

Each combination writes ``<out>/<reward_form>__<similarity>/`` (curves.csv, run.json with
timing and load, final_metrics.csv last); ``summarize`` rebuilds from the finished folders
``<out>/curves.csv``, ``final_metrics.csv``, ``summary.csv`` (mean and two-sided 95% t interval
over seeds per combination), the figure and ``comparison.json``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from purehr.engine.loop import Hook, UpdateLoop, run_updates
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.hrv import HRV_OBSERVATION_NOISE_STD
from purehr.reports.stats import mean_confidence_interval, metric_range, tail_mean
from purehr.run.compiled.task_setup import build_task_setup
from purehr.run.store.files import atomic_write_json, parse_row, read_csv, write_csv
from purehr.run.store.machine import environment_description, load_average
from purehr.tasks import get_task
from studies.reward_comparison_figures import REFERENCE_POLICIES, plot_reward_comparison

COMBINATIONS = (
    ("distance", "hrv_similarity"),
    ("progress", "hrv_similarity"),
    ("potential", "hrv_similarity"),
    ("potential", "cosine"),
    ("seed", "hrv_similarity"),
    ("seed", "cosine"),
)
"""The similarity enters only the potential and seed forms (distance and progress measure
the gap directly), so those two are run once."""
EVAL_METRICS = ("success_rate", "noisy_success_rate", "return_mean", "final_distance", "alignment", "episode_length")
FINAL_CSV = "final_metrics.csv"


def make_comparison_program(env, config, eval_every: int, eval_episodes: int):
    """``train(keys) -> (runner, training metrics [update, seed], evaluations [update + 1, seed])``
    for one environment; evaluation rows that were not due are NaN."""
    setup = build_task_setup("hrv", config, env=env)
    ppo, num_updates = setup.algorithm, setup.algorithm.num_updates

    def evaluate(network_params):
        return setup.task.heldout_evaluation(
            env, setup.eval_env_params, ppo.policy(network_params), num_episodes=eval_episodes
        )

    def evaluate_seeds(runner):
        return jax.vmap(evaluate)(runner.params)

    def due(updates_done):
        return (updates_done % eval_every == 0) | (updates_done == num_updates)

    evaluation = Hook(due, lambda runner, _metrics: evaluate_seeds(runner), at_start=True)
    loop = UpdateLoop(jax.vmap(ppo.update), num_updates, (evaluation,))

    def train(keys):
        (runner,), (output,) = run_updates([loop], [jax.vmap(ppo.init)(keys)], num_updates)
        kept = {
            name: output.metrics[name]
            for name in ("mean_episode_return", "train_success_rate", "mean_distance", "entropy", "approx_kl")
        }
        evaluations = jax.tree.map(
            lambda first, rest: jnp.concatenate([first[None], rest]), output.at_start[0], output.hooks[0]
        )
        return runner, kept, evaluations

    return jax.jit(train), ppo


def combination_dir(out: Path, name: str) -> Path:
    return out / name.replace("/", "__")


def run_combination(
    out: Path,
    reward_form: str,
    similarity: str,
    *,
    steps: int,
    seeds: list[int],
    eval_every: int,
    eval_episodes: int,
    command: list[str],
) -> None:
    """Train and evaluate one combination (one compiled call); writes its folder under ``out``,
    ``final_metrics.csv`` last (it marks the combination done)."""
    name = f"{reward_form}/{similarity}"
    config = get_task("hrv").default_config.replace(total_timesteps=steps)
    keys = keys_for_seeds(seeds)
    env = get_task("hrv").make_env(similarity=similarity, reward_form=reward_form)
    train, ppo = make_comparison_program(env, config, eval_every, eval_episodes)
    steps = ppo.num_updates * config.batch_size
    metrics, evaluations, timing = _timed_training(train, keys, steps, name)
    curves, finals = _combination_rows(reward_form, similarity, seeds, config.batch_size, metrics, evaluations)
    folder = combination_dir(out, name)
    folder.mkdir(parents=True, exist_ok=True)
    write_csv(folder / "curves.csv", None, curves)
    atomic_write_json(
        folder / "run.json",
        {
            "command": command,
            "combination": name,
            "seeds": seeds,
            "steps_per_seed": steps,
            "config": config.to_dict(),
            "evaluation": {
                "episodes": eval_episodes,
                "every_updates": eval_every,
                "difficulty": 0.9,
                "target_precision": 0.05,
                "observation_noise_std": HRV_OBSERVATION_NOISE_STD,
            },
            "timing": timing,
        },
    )
    write_csv(folder / FINAL_CSV, None, finals)  # last: marks the combination done


def _timed_training(
    train, keys: jax.Array, steps_per_seed: int, name: str
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], dict[str, float]]:
    """Compile and run ``train(keys)`` (seeds = len(keys)), logging the timing and load:
    training metrics [update, seed], evaluations [update + 1, seed] and the timing."""
    num_seeds = len(keys)
    load_before = load_average()
    started = time.perf_counter()
    compiled = train.lower(keys).compile()
    compile_s = time.perf_counter() - started
    started = time.perf_counter()
    _, metrics, evaluations = jax.block_until_ready(compiled(keys))
    run_s = time.perf_counter() - started
    timing = {
        "compile_s": compile_s,
        "train_and_eval_s": run_s,
        "env_steps_per_seed": steps_per_seed,
        "env_steps_per_s_all_seeds": steps_per_seed * num_seeds / run_s,
        "load_average_before": load_before,
        "load_average_after": load_average(),
    }
    print(
        f"[{name}] compile {compile_s:.1f} s, train+eval {run_s:.1f} s "
        f"({steps_per_seed * num_seeds / run_s:.0f} steps/s over {num_seeds} seeds), "
        f"load {load_before} -> {timing['load_average_after']}",
        file=sys.stderr,
        flush=True,
    )
    return {k: np.asarray(v) for k, v in metrics.items()}, {k: np.asarray(v) for k, v in evaluations.items()}, timing


def _combination_rows(
    reward_form: str,
    similarity: str,
    seeds: list[int],
    batch_size: int,
    metrics: dict[str, np.ndarray],
    evaluations: dict[str, np.ndarray],
) -> tuple[list[dict], list[dict]]:
    """curves.csv (per seed, one row per evaluated update) and final_metrics.csv (per seed, its
    last evaluation plus the final training return and success) rows of one combination."""
    name = f"{reward_form}/{similarity}"
    evaluated = np.flatnonzero(np.isfinite(evaluations["success_rate"][:, 0]))
    curves, finals = [], []
    for index, seed in enumerate(seeds):
        for row_index in evaluated:
            row = {
                "combination": name,
                "reward_form": reward_form,
                "similarity": similarity,
                "seed": seed,
                "update": int(row_index),
                "env_steps": int(row_index) * batch_size,
            }
            row.update({f"eval_{m}": float(evaluations[m][row_index, index]) for m in EVAL_METRICS})
            curves.append(row)
        final = dict(curves[-1])
        for column, key in (
            ("train_final_return", "mean_episode_return"),
            ("train_final_success_rate", "train_success_rate"),
        ):
            final[column] = tail_mean(metrics[key][:, index])
        finals.append(final)
    return curves, finals


def summarize(out: Path, no_figure: bool = False) -> None:
    """Rebuild the comparison from every finished combination folder under ``out``."""
    names = [f"{r}/{s}" for r, s in COMBINATIONS if (combination_dir(out, f"{r}/{s}") / FINAL_CSV).exists()]
    if not names:
        print(f"no finished combination under {out}", file=sys.stderr)
        return
    curves, finals, runs, summary = [], [], {}, []
    for name in names:
        folder = combination_dir(out, name)
        curves += _rows(folder / "curves.csv")
        rows = _rows(folder / FINAL_CSV)
        finals += rows
        runs[name] = json.loads((folder / "run.json").read_text())
        entry = {"combination": name, "seeds": len(rows), "env_steps_per_seed": runs[name]["steps_per_seed"]}
        for metric in [f"eval_{m}" for m in EVAL_METRICS] + ["train_final_success_rate", "train_final_return"]:
            values = np.array([r[metric] for r in rows], float)
            ci = mean_confidence_interval(values, bounds=metric_range(metric.removeprefix("train_final_")))
            entry.update(
                {f"{metric}_mean": ci["mean"], f"{metric}_ci_low": ci["ci_low"], f"{metric}_ci_high": ci["ci_high"]}
            )
        summary.append(entry)
    write_csv(out / "curves.csv", None, curves)
    write_csv(out / FINAL_CSV, None, finals)
    write_csv(out / "summary.csv", None, summary)
    description = environment_description()
    description.update(combinations=runs)
    references = reference_metrics(out)
    description.update(reference_policies=references)
    atomic_write_json(out / "comparison.json", description)
    if not no_figure:
        plot_reward_comparison(out, curves, summary, names, references)
    print(f"{'combination':26s} held-out success, mean [95% t CI] over seeds   final distance   train success")
    for entry in summary:
        print(
            f"{entry['combination']:26s} {100 * entry['eval_success_rate_mean']:5.1f}% "
            f"[{100 * entry['eval_success_rate_ci_low']:6.1f}%, {100 * entry['eval_success_rate_ci_high']:6.1f}%]"
            f"           {entry['eval_final_distance_mean']:.3f}            "
            f"{100 * entry['train_final_success_rate_mean']:5.1f}%"
        )
    print(f"wrote {out}")


def _rows(path: Path) -> list[dict]:
    return [parse_row(row, ("combination", "reward_form", "similarity")) for row in read_csv(path)]


def reference_metrics(out: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Held-out metrics of the greedy oracle, the uniform random policy and the no-op policy
    (style none, keep, keep every dimension) under each reward: what PPO is judged against.
    Success, distance and alignment do not depend on the reward; the return does. Cached in
    ``<out>/reference_policies.json``."""
    path = out / "reference_policies.json"
    if path.exists():
        return json.loads(path.read_text())
    task = get_task("hrv")
    baselines = {baseline.name: baseline for baseline in task.baselines}
    references: dict[str, dict[str, dict[str, float]]] = {}
    for reward_form, similarity in COMBINATIONS:
        env = task.make_env(similarity=similarity, reward_form=reward_form)
        params = env.default_params
        policies = {name: baselines[name].make_policy(env, params) for name in REFERENCE_POLICIES}
        references[f"{reward_form}/{similarity}"] = {
            name: {k: float(v) for k, v in jax.jit(lambda: task.heldout_evaluation(env, params, policy))().items()}
            for name, policy in policies.items()
        }
    atomic_write_json(path, references)
    return references
