"""Does memory matter? The recurrent (GRU) policy against the feed-forward MLP at the same
budget, five seeds each (docs/recurrent.md, results/memory/):

    partial   the partially observed variants, swing-angles (no rates, no energy) and
              hrv-hidden-audience (no audience context, no gain): where memory should pay
    flicker   hrv-flicker (the text's reading lost at 3 steps in 4): the hrv variant where
              feedback cannot stand in for memory (hrv-hidden-audience turned out not to need it)
    full      the fully observed swing and hrv: where the GRU should not be much worse
    chain     bsuite's MemoryChain (gymnax), a memory benchmark nobody here wrote: the context
              is shown at the first step and asked for at the last; an MLP stays at chance

Each protocol run (``ARMS``) is judged at its final checkpoint on the held-out set: success,
return, the task's speed metric (swing: time to rotation, hrv: episode length) and the steps
at which success first reached ``SUCCESS_BAR``; mean and 95% t interval over seeds, and the
GRU-minus-MLP difference of each with Welch's t interval (the seeds of two arms are
independent samples, not pairs). The chain's number is the held-out return (+1 a right answer,
-1 a wrong one, 0 chance; gymnax's defaults: one context bit, a chain of memory_length 5 steps).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import jax
import numpy as np

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.trainer import make_train
from purehr.engine.seeds import keys_for_seeds
from purehr.envs.rollout import heldout_evaluation
from purehr.reports.stats import NON_NEGATIVE, mean_confidence_interval, metric_range, t_quantile
from purehr.run.protocol import train_all_seeds
from purehr.run.store.files import read_csv
from purehr.run.store.machine import load_average
from purehr.run.store.record import recorded_config
from purehr.run.store.run_dir import read_manifest
from purehr.tasks import get_task
from studies.ablation import SPEED_METRIC
from studies.pbt_comparison import SUCCESS_BAR, member_outcome

SEEDS = (0, 1, 2, 3, 4)
PARTIAL = ("swing-angles", "hrv-hidden-audience")
FLICKER = ("hrv-flicker",)
FULL = ("swing", "hrv")
TABLE_ORDER = PARTIAL + FLICKER + FULL
"""The tasks in the tables' order: partially observed variants first."""
FAMILY = {"swing": "swing", "swing-angles": "swing", "hrv": "hrv", "hrv-hidden-audience": "hrv", "hrv-flicker": "hrv"}
"""Each task's family: its budget, GRU settings and speed metric (``SPEED_METRIC``)."""
BUDGET = {"swing": 2_000_000, "hrv": 300_000}
"""Environment steps per seed, per family, the same for both policies."""
GRU_SETTINGS: dict[str, dict[str, Any]] = {
    "swing": {"policy": "gru", "recurrent_width": 64, "minibatch_size": 1024},
    "hrv": {"policy": "gru", "recurrent_width": 64},
}
"""The GRU's changes to the task's defaults, per family. The swing's minibatch of 1024 is 8 whole
sequences of 128 steps (a recurrent minibatch holds whole environments' sequences: 32 envs / 4)."""
GRU_TASK_SETTINGS: dict[str, dict[str, Any]] = {
    "swing-angles": {"policy": "gru", "recurrent_width": 64, "clip_range": 0.1, "recurrent_skip": True},
    "hrv-flicker": {"policy": "gru", "recurrent_width": 128, "recurrent_skip": True},
}
"""A task's own GRU settings where they are not its family's. swing-angles' GRU trains at the
MLP's minibatch (256: two environments' whole sequences) with a clip range of 0.1, the one
change among those tried (results/memory/README.md, "swing-angles: what was tried") after which a
seed that learned to rotate kept it to the end of its 2M steps, and reads [memory, this step's
embedding] (the skip readout): at clip 0.1 the hidden-only readout found the pumping on 2 of 5
seeds, the skip readout on 4 (results/memory/partial_skip). hrv-flicker's GRU reads
[memory, this step's embedding] (docs/recurrent.md, "The readout"), at width 128: in a probe
(reading dropout 0.5, seeds 0 and 1, 300k steps) it took 9.3 and 8.9 steps where the
hidden-only readout at width 64 took 21.5 and 18.8 and the MLP 10.3 and 12.4."""
METRICS = ("success_rate", "return_mean", "speed", "steps_to_bar")
"""The numbers of a seed's outcome (``member_outcome``), in the tables' order."""


@dataclass(frozen=True)
class Arm:
    """One protocol run: ``policy`` on ``tasks``, every seed of ``SEEDS``."""

    name: str
    policy: str
    tasks: tuple[str, ...]

    def configs(self) -> dict[str, AlgorithmConfig]:
        """task -> its config: the task's defaults at the family's budget, with the GRU's settings."""
        configs = {}
        for task in self.tasks:
            family = FAMILY[task]
            config = get_task(task).default_config.replace(total_timesteps=BUDGET[family])
            settings = GRU_TASK_SETTINGS.get(task, GRU_SETTINGS[family])
            configs[task] = config.replace(**settings) if self.policy == "gru" else config
        return configs


ARMS = (
    Arm("gru_partial", "gru", PARTIAL),
    Arm("mlp_partial", "mlp", PARTIAL),
    Arm("gru_full", "gru", FULL),
    Arm("mlp_full", "mlp", FULL),
    Arm("gru_flicker", "gru", FLICKER),
    Arm("mlp_flicker", "mlp", FLICKER),
)
ARM_BY_NAME = {arm.name: arm for arm in ARMS}


def train_arms(
    out_dir: Path, arms: Sequence[Arm] = ARMS, seeds: Sequence[int] = SEEDS, say: Callable[[str], None] = print
) -> dict[str, float]:
    """Trains each arm into ``out_dir/<name>`` through the protocol: a missing run is started, an
    unfinished one resumed, a finished one left alone. Returns each arm's seconds (0: finished)."""
    timing = {}
    for arm in arms:
        run_dir = Path(out_dir) / arm.name
        started = time.perf_counter()
        if (run_dir / "manifest.json").exists():
            status = read_manifest(run_dir).get("status")
            if status == "finished":
                say(f"[memory] {arm.name}: finished; kept")
                timing[arm.name] = 0.0
                continue
            say(f"[memory] {arm.name}: {status}; resumed")
            train_all_seeds(run_dir, resume=True, progress=False)
        else:
            say(f"[memory] {arm.name}: {arm.policy} on {', '.join(arm.tasks)} x seeds {list(seeds)}")
            train_all_seeds(run_dir, tasks=list(arm.tasks), seeds=list(seeds), configs=arm.configs(), progress=False)
        timing[arm.name] = time.perf_counter() - started
    return timing


def read_outcomes(run_dirs: Mapping[str, Path]) -> dict[str, dict[str, dict[int, dict[str, float]]]]:
    """arm name -> task -> seed -> the final checkpoint's outcome (``member_outcome``, with the
    ``steps`` and the ``eval_episodes`` of that row; ``steps_to_bar`` may come from a quick
    evaluation, docs/protocol.md). Refused (``ValueError``): a run that has not finished (its
    last checkpoint is not the budget's) or was trained with other settings than its arm's."""
    members = {}
    for name, run_dir in run_dirs.items():
        manifest = finished_manifest(name, Path(run_dir))
        members[name] = {}
        for task in ARM_BY_NAME[name].tasks:
            members[name][task] = {}
            for seed in manifest["seeds"]:
                rows = read_csv(Path(run_dir) / task / f"seed_{seed}" / "checkpoints.csv")
                if not rows:
                    raise ValueError(f"{run_dir}: no checkpoints.csv rows for {task} seed {seed}")
                outcome = member_outcome(rows, SPEED_METRIC[FAMILY[task]])
                final = {"steps": float(rows[-1]["actual_steps"]), "eval_episodes": float(rows[-1]["eval_episodes"])}
                members[name][task][int(seed)] = {**outcome, **final}
    return members


def finished_manifest(name: str, run_dir: Path) -> dict[str, Any]:
    """The manifest of arm ``name``'s run, checked: finished, its tasks, and its configs equal to
    ``Arm.configs()`` (so the module reproduces the runs it reports)."""
    if name not in ARM_BY_NAME:
        raise ValueError(f"arm {name!r}: expected one of {sorted(ARM_BY_NAME)}")
    manifest, arm = read_manifest(run_dir), ARM_BY_NAME[name]
    if manifest.get("status") != "finished":
        raise ValueError(
            f"{run_dir}: the run's manifest says {manifest.get('status')!r}, expected 'finished' "
            "(wait for it, or resume it with train_arms)"
        )
    if list(manifest.get("tasks", [])) != list(arm.tasks):
        raise ValueError(f"{run_dir}: tasks {manifest.get('tasks')}, expected arm {name}'s {list(arm.tasks)}")
    for task, config in arm.configs().items():
        recorded = recorded_config(manifest, task)
        if recorded != config:
            changed = {k: v for k, v in recorded.to_dict().items() if config.to_dict()[k] != v}
            raise ValueError(f"{run_dir}: {task} was trained with {changed}, not arm {name}'s settings")
    return manifest


def run_records(run_dirs: Mapping[str, Path]) -> dict[str, dict[str, Any]]:
    """What each arm's manifest says of its run: revision, seeds, wall and compile seconds."""
    keys = ("git_revision", "seeds", "wall_time_s", "compile_s", "platform")
    return {name: {k: finished_manifest(name, Path(d)).get(k) for k in keys} for name, d in run_dirs.items()}


def interval_columns(name: str, values: Sequence[float], bounds: tuple[float, float] | None = None) -> dict[str, Any]:
    """``name``, its 95% t interval (clipped to ``bounds``) and ``name_n``, the finite values."""
    interval = mean_confidence_interval(np.asarray(values, float), bounds=bounds)
    return {
        name: interval["mean"],
        f"{name}_ci_low": interval["ci_low"],
        f"{name}_ci_high": interval["ci_high"],
        f"{name}_n": interval["n"],
    }


def welch_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> dict[str, float]:
    """mean(a) - mean(b) and its two-sided Welch t interval (NaN entries dropped; NaN bounds
    below two values on either side; a zero-width interval when neither varies)."""
    a, b = (np.asarray(x, float) for x in (a, b))
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not len(a) or not len(b):
        return {"mean": math.nan, "ci_low": math.nan, "ci_high": math.nan}
    difference = float(a.mean() - b.mean())
    if len(a) < 2 or len(b) < 2:
        return {"mean": difference, "ci_low": math.nan, "ci_high": math.nan}
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = math.sqrt(va + vb)
    if se == 0.0:
        return {"mean": difference, "ci_low": difference, "ci_high": difference}
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    return {"mean": difference, "ci_low": difference - half, "ci_high": difference + half}


def summarise(members: Mapping[str, Mapping[str, Mapping[Any, Mapping[str, float]]]]) -> list[dict[str, Any]]:
    """The protocol rows from every arm's per-seed outcomes (``read_outcomes``; also as
    comparison.json keeps them): one per (task, policy), then one GRU-minus-MLP difference per
    task both policies ran, partial variants first."""
    rows, samples = [], {}
    for name, tasks in members.items():
        arm = ARM_BY_NAME[name]
        for task, seeds in tasks.items():
            outcomes = list(seeds.values())
            samples[task, arm.policy] = outcomes
            row = _row("protocol", task, arm.policy, name, len(outcomes))
            row["steps"] = max(o["steps"] for o in outcomes)
            for metric in METRICS:
                row.update(interval_columns(metric, [o[metric] for o in outcomes], _bounds(task, metric)))
            row["seeds_at_bar"] = sum(o["success_rate"] >= SUCCESS_BAR for o in outcomes)
            rows.append(row)
    order = {task: i for i, task in enumerate(TABLE_ORDER)}
    rows.sort(key=lambda r: (order[r["task"]], r["policy"] != "gru"))
    for task in sorted({task for task, _ in samples}, key=order.get):
        if (task, "gru") in samples and (task, "mlp") in samples:
            gru, mlp = samples[task, "gru"], samples[task, "mlp"]
            row = _row("difference", task, "gru - mlp", "", min(len(gru), len(mlp)))
            for metric in METRICS:
                difference = welch_difference([o[metric] for o in gru], [o[metric] for o in mlp])
                row.update({f"{metric}{suffix}": difference[key] for suffix, key in _SUFFIXES})
                row[f"{metric}_n"] = min(int(np.isfinite([o[metric] for o in s]).sum()) for s in (gru, mlp))
            row["seeds_at_bar"] = sum(o["success_rate"] >= SUCCESS_BAR for o in gru) - sum(
                o["success_rate"] >= SUCCESS_BAR for o in mlp
            )
            rows.append(row)
    return rows


_SUFFIXES = (("", "mean"), ("_ci_low", "ci_low"), ("_ci_high", "ci_high"))


def _row(section: str, task: str, policy: str, arm: str, n: int) -> dict[str, Any]:
    observation = "partial" if task in PARTIAL + FLICKER else "full" if task in FULL else "memory benchmark"
    speed = SPEED_METRIC[FAMILY[task]] if task in FAMILY else ""
    return {
        "section": section,
        "task": task,
        "observation": observation,
        "policy": policy,
        "arm": arm,
        "n": n,
        "speed_metric": speed,
        "steps": math.nan,
    }


def _bounds(task: str, metric: str) -> tuple[float, float]:
    if metric == "speed":
        return metric_range(SPEED_METRIC[FAMILY[task]])
    return NON_NEGATIVE if metric == "steps_to_bar" else metric_range(metric)


# --- bsuite's MemoryChain ---------------------------------------------------------------------

MEMORY_CHAIN = "gymnax:MemoryChain-bsuite"
MEMORY_CHAIN_SETTINGS: dict[str, Any] = {
    "total_timesteps": 40_960,
    "num_envs": 16,
    "num_steps": 32,
    "minibatch_size": 128,
    "recurrent_width": 32,
    "actor_hidden": (32,),
    "critic_hidden": (32,),
    "learning_rate": 1e-3,
}
"""tests/test_recurrent.py's settings (the test that the GRU learns the chain and the MLP does not)."""
MEMORY_CHAIN_STEPS = 102_400
"""The comparison's budget per seed: 200 updates of 512 steps, 2.5 times the test's, so the MLP
at chance is not a matter of training time (2-core CPU, compile included, 5 seeds: 20 s for the
MLP, 30 s for the GRU at load 1; 34 s and 72 s at load 5)."""
MEMORY_CHAIN_EPISODES = 200


def memory_chain(
    seeds: int = 5,
    total_timesteps: int = MEMORY_CHAIN_STEPS,
    episodes: int = MEMORY_CHAIN_EPISODES,
    say: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Trains the MLP and the GRU on MemoryChain (all ``seeds`` in one compiled call each) and
    evaluates each seed's final policy on ``episodes`` held-out episodes. Returns the settings,
    each seed's held-out return, the rows (mean and 95% t interval, and the difference) and the
    wall time of each policy (compile included) with the load after it."""
    if seeds < 2 or total_timesteps <= 0 or episodes <= 0:
        raise ValueError(
            f"seeds={seeds} (>= 2, for an interval), total_timesteps={total_timesteps} and "
            f"episodes={episodes} (> 0) expected"
        )
    task = get_task(MEMORY_CHAIN)
    env = task.make_env()
    settings = {**MEMORY_CHAIN_SETTINGS, "total_timesteps": total_timesteps}
    returns, timing, load = {}, {}, {}
    for policy in ("mlp", "gru"):
        config = task.default_config.replace(**settings, policy=policy)
        say(f"[memory] {MEMORY_CHAIN}: {policy}, {config.total_timesteps:,} steps x {seeds} seeds")
        started = time.perf_counter()
        returns[policy] = _heldout_returns(config, env, seeds, episodes)
        timing[policy], load[policy] = time.perf_counter() - started, load_average()
    return {
        "task": MEMORY_CHAIN,
        "settings": settings,
        "episodes": episodes,
        "env_params": {field.name: getattr(env.default_params, field.name) for field in fields(env.default_params)},
        "returns": returns,
        "timing_s": timing,
        "load_average_after": load,
    }


def _heldout_returns(config: AlgorithmConfig, env, seeds: int, episodes: int) -> list[float]:
    """Seeds 0..seeds-1 trained in one call; each final policy's held-out return, [seeds]."""
    train = make_train(config, env)
    result = train(keys_for_seeds(range(seeds)))

    def heldout_return(params):
        return heldout_evaluation(env, env.default_params, train.algorithm.policy(params), episodes)["return_mean"]

    return [float(r) for r in np.asarray(jax.jit(jax.vmap(heldout_return))(result.runner.params))]


def memory_chain_rows(chain: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``memory_chain``'s per-seed returns -> a row per policy and the GRU-minus-MLP row."""
    returns, rows = chain["returns"], []
    for policy in ("gru", "mlp"):
        row = _row("memory_chain", chain["task"], policy, "", len(returns[policy]))
        row["steps"] = float(chain["settings"]["total_timesteps"])
        rows.append({**row, **interval_columns("return_mean", returns[policy])})
    difference = welch_difference(returns["gru"], returns["mlp"])
    row = _row("memory_chain", chain["task"], "gru - mlp", "", min(len(r) for r in returns.values()))
    rows.append({**row, **{f"return_mean{suffix}": difference[key] for suffix, key in _SUFFIXES}})
    return rows


# --- the tables -------------------------------------------------------------------------------


def format_tables(rows: Sequence[Mapping[str, Any]]) -> str:
    """The comparison as Markdown: the protocol arms, the differences, the memory chain."""
    protocol = [r for r in rows if r["section"] == "protocol"]
    differences = [r for r in rows if r["section"] == "difference"]
    chain = [r for r in rows if r["section"] == "memory_chain"]
    head = f"| final success | final return | final speed | steps to success >= {SUCCESS_BAR} |"
    lines = [
        "Held-out, final checkpoint: mean [95% t interval] over seeds (intervals clipped to the metric's "
        "range; speed is swing's time to rotation, hrv's episode length; both lower is faster).",
        "",
        f"| task | observation | policy | seeds | steps per seed {head} seeds at >= {SUCCESS_BAR} |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in protocol:
        lines.append(
            f"| {r['task']} | {r['observation']} | {r['policy']} | {r['n']} | {r['steps']:,.0f} "
            + "".join(f"| {_cell(r, m)} " for m in METRICS)
            + f"| {r['seeds_at_bar']}/{r['n']} |"
        )
    if differences:
        lines += [
            "",
            "GRU minus MLP: difference of the means [95% Welch t interval]; an interval that excludes 0 "
            "is a difference at that level.",
            "",
            f"| task | observation {head} seeds at the bar |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in differences:
            cells = "".join(f"| {_cell(r, m, signed=True)} " for m in METRICS)
            lines.append(f"| {r['task']} | {r['observation']} {cells}| {r['seeds_at_bar']:+d} |")
    if chain:
        lines += [
            "",
            f"{chain[0]['task']} ({chain[0]['steps']:,.0f} steps per seed): held-out return, "
            "+1 a right answer, -1 a wrong one, 0 chance.",
            "",
            "| policy | seeds | return |",
            "|---|---|---|",
        ]
        for r in chain:
            lines.append(f"| {r['policy']} | {r['n']} | {_cell(r, 'return_mean', signed=r['policy'] == 'gru - mlp')} |")
    return "\n".join(lines)


def _cell(row: Mapping[str, Any], metric: str, signed: bool = False) -> str:
    digits = {"success_rate": 2, "return_mean": 2, "speed": 1, "steps_to_bar": 0}[metric]
    value = row[metric]
    if not math.isfinite(value):
        return "never" if metric == "steps_to_bar" else "-"
    sign = "+" if signed else ""
    low, high = row[f"{metric}_ci_low"], row[f"{metric}_ci_high"]
    interval = f" [{low:{sign},.{digits}f}, {high:{sign},.{digits}f}]" if math.isfinite(low) else ""
    n, count = row.get(f"{metric}_n", row["n"]), row["n"]
    reached = f" ({n}/{count} seeds)" if n < count else ""
    return f"{value:{sign},.{digits}f}{interval}{reached}"
