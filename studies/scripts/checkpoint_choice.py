"""The reported checkpoint chosen on validation starts (issue 51, item 2): evaluate every saved
checkpoint of every seed of a finished run on VALIDATION starts (the held-out evaluation
function with another seed: the same distribution, never the held-out starts), choose one
checkpoint per seed by a stated rule, and report the chosen checkpoint's HELD-OUT success and
speed against the last checkpoint's.

python studies/scripts/checkpoint_choice.py --task swing --run-dir /tmp/robust/swing-default --label swing-default
python studies/scripts/checkpoint_choice.py --task swing --setting xla-o1 --run-dir /tmp/robust/swing-xla-o1 \
    --label swing-xla-o1
python studies/scripts/checkpoint_choice.py --task hrv --run-dir /tmp/robust/hrv-default --label hrv-default --last-n 3
python studies/scripts/checkpoint_choice.py --table        # the Markdown tables of every JSON in --out-dir

Choosing on the held-out starts and reporting them would be selection bias (the held-out score
of the best of 41 draws is optimistic): the choice reads only the validation starts, and the
held-out evaluation of the chosen parameters is the report. The held-out "oracle" row (chosen on
the held-out starts themselves) is printed only to show that bias's size, not as a method.

Rules (``choose``): the highest validation success, ties by the faster validation speed (swing:
time to the first rotation, hrv: episode length; none, NaN: slowest), then the later checkpoint;
among all checkpoints, the last N, or the full ones (every full_eval_interval-th target, step 0 and
the last); ``latest-best``: the highest validation success, ties by the later checkpoint
(success only: the last checkpoint unless an earlier one succeeds more); and ``fastest-at-bar``:
the fastest among those at validation success >= the bar (none: as ``best``). Each with 100 and
20 validation episodes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
OUT_DIR = ROOT / "results" / "robustness" / "checkpoint-choice"
BAR = 0.95
VALIDATION_SEED = 20261205
"""The validation starts' seed: none of the held-out seeds (swing 20260901, hrv 20260902) or
showcase seeds (hrv 20260903), nor a training seed (0-19)."""
SPEED = {"swing": "time_to_rotation", "hrv": "episode_length"}


# --- the selection rule (no JAX) -----------------------------------------------------------


def _slowest_if_missing(speed) -> float:
    return math.inf if speed is None or not math.isfinite(speed) else float(speed)


def candidates(rows: list[dict], among: str) -> list[dict]:
    """The rows a rule chooses among: ``all``, ``last<N>`` (the last N checkpoints) or ``full``
    (the checkpoints with a full evaluation)."""
    if among == "all":
        return list(rows)
    if among == "full":
        return [row for row in rows if row["full"]]
    if among.startswith("last") and among[4:].isdigit() and int(among[4:]) > 0:
        return list(rows[-int(among[4:]) :])
    raise ValueError(f"among={among!r}: expected 'all', 'full' or 'last<N>' with N >= 1")


def choose(rows: list[dict], episodes: int, among: str = "all", rule: str = "best", bar: float = BAR) -> dict:
    """The row chosen on ``val<episodes>_success`` / ``_speed`` (lower speed is faster).
    ``best``: highest success, then faster, then later; ``latest-best``: highest success, then
    later (speed ignored); ``fastest-at-bar``: the fastest (then
    later) of those at success >= ``bar``, or ``best`` when none is."""
    pool = candidates(rows, among)
    if not pool:
        raise ValueError(f"no checkpoint to choose among ({among})")
    success, speed = f"val{episodes}_success", f"val{episodes}_speed"
    if rule == "fastest-at-bar":
        at_bar = [row for row in pool if row[success] is not None and row[success] >= bar]
        if at_bar:
            return max(at_bar, key=lambda row: (-_slowest_if_missing(row[speed]), row["steps"]))
    elif rule == "latest-best":
        return max(pool, key=lambda row: (row[success] or 0.0, row["steps"]))
    elif rule != "best":
        raise ValueError(f"rule={rule!r}: expected 'best', 'latest-best' or 'fastest-at-bar'")
    return max(pool, key=lambda row: (row[success] or 0.0, -_slowest_if_missing(row[speed]), row["steps"]))


def outcome(chosen: list[dict], reference: float | None, bar: float = BAR) -> dict:
    """The held-out verdict of one chosen row per seed: seeds at the bar, seeds faster than
    the reference, median / mean / worst speed over the seeds that succeed at all."""
    success = np.asarray([row["heldout_success"] for row in chosen], np.float64)
    speed = np.asarray([np.nan if row["heldout_speed"] is None else row["heldout_speed"] for row in chosen])
    finite = speed[np.isfinite(speed)]
    return {
        "chosen_steps": [row["steps"] for row in chosen],
        "heldout_success": success.tolist(),
        "heldout_speed": [None if not np.isfinite(s) else float(s) for s in speed],
        "seeds_at_bar": int(np.sum(success >= bar)),
        "seeds_faster": None if reference is None else int(np.sum(np.isfinite(speed) & (speed < reference))),
        "median_speed": float(np.median(finite)) if finite.size else None,
        "mean_speed": float(np.mean(finite)) if finite.size else None,
        "worst_speed": float(np.max(finite)) if finite.size else None,
    }


def choices(per_seed: list[list[dict]], reference, sizes, last_n, bar: float = BAR) -> list[dict]:
    """Every rule's outcome, after the last checkpoint's and the biased held-out oracle's."""
    results = [{"rule": "last checkpoint", **outcome([rows[-1] for rows in per_seed], reference, bar)}]
    oracle = [
        max(rows, key=lambda r: (r["heldout_success"], -_slowest_if_missing(r["heldout_speed"]), r["steps"]))
        for rows in per_seed
    ]
    results.append({"rule": "held-out oracle (selection bias, not a method)", **outcome(oracle, reference, bar)})
    for episodes in sizes:
        for rule, among in [("best", "all"), *[("best", f"last{n}") for n in last_n], ("best", "full")]:
            chosen = [choose(rows, episodes, among, rule, bar) for rows in per_seed]
            results.append({"rule": f"{rule} among {among}", "episodes": episodes, **outcome(chosen, reference, bar)})
        for rule in ("latest-best", "fastest-at-bar"):
            chosen = [choose(rows, episodes, "all", rule, bar) for rows in per_seed]
            results.append({"rule": f"{rule} among all", "episodes": episodes, **outcome(chosen, reference, bar)})
    return results


# --- evaluating the checkpoints ------------------------------------------------------------


def episode_starts(task: str, setup, episodes: int, seed: int) -> np.ndarray:
    """[episodes, features]: what makes each evaluation episode (swing: theta, theta'; hrv: its
    reset state, as ``purehr.envs.hrv.evaluation._run_episode`` draws it from the seed's keys)."""
    if task == "swing":
        from purehr.envs.swing.evaluation import heldout_starts

        return np.stack(heldout_starts(episodes, seed), axis=1)
    import jax

    def reset(key):
        _, state = setup.env.reset(jax.random.split(key)[0], setup.eval_env_params)
        return [leaf.reshape(-1).astype(float) for leaf in jax.tree.leaves(state)]

    leaves = jax.vmap(reset)(jax.random.split(jax.random.PRNGKey(seed), episodes))
    return np.concatenate([np.asarray(leaf, np.float64) for leaf in leaves], axis=1)


def starts_check(task: str, setup, sizes, seed: int) -> dict:
    """How many validation episodes coincide with a held-out one (must be 0; the held-out set
    of 100 and the quick evaluation's 20) and the smallest max-abs difference between any two."""
    from purehr.envs.hrv.evaluation import HRV_EVAL_SEED
    from purehr.envs.swing.evaluation import HELDOUT_SEED

    heldout_seed = {"swing": HELDOUT_SEED, "hrv": HRV_EVAL_SEED}[task]
    heldout = np.concatenate([episode_starts(task, setup, n, heldout_seed) for n in (100, 20)])
    validation = np.concatenate([episode_starts(task, setup, n, seed) for n in sizes])
    distance = np.abs(validation[:, None, :] - heldout[None, :, :]).max(axis=2)
    return {
        "heldout_seed": heldout_seed,
        "coinciding": int(np.sum(distance == 0.0)),
        "smallest_difference": float(distance.min()),
    }


def evaluate_run(run_dir: Path, task: str, sizes, seed: int) -> tuple[dict, list[list[dict]]]:
    """Every checkpoint of every seed on the validation starts (each size) and on the held-out
    starts: one jitted evaluation per kind, vmapped over the seeds of one checkpoint."""
    import jax
    import jax.numpy as jnp

    from purehr.run.compiled.task_setup import recorded_setup
    from purehr.run.store.checkpoints import SeedCheckpoints
    from purehr.run.store.run_dir import RunDirectory, read_checkpoint_rows
    from purehr.tasks import get_task

    run = RunDirectory(run_dir)
    manifest = run.read_manifest()
    setup = recorded_setup(manifest, get_task(task))
    check = starts_check(task, setup, sizes, seed)
    if check["coinciding"]:
        raise SystemExit(f"error: --validation-seed {seed}: {check['coinciding']} episodes coincide with held-out ones")
    seeds = [int(s) for s in manifest["seeds"]]
    logged = {s: read_checkpoint_rows(run.checkpoints_csv(task, s)) for s in seeds}
    steps = [row["actual_steps"] for row in logged[seeds[0]]]
    if any([row["actual_steps"] for row in logged[s]] != steps for s in seeds):
        raise SystemExit(f"error: the seeds of {run_dir} list different checkpoints; expected one schedule")
    speed = SPEED[task]

    def kind(episodes, eval_seed):
        def one(params):
            policy = setup.algorithm.policy(params)
            metrics = setup.task.heldout_evaluation(
                setup.env, setup.eval_env_params, policy, num_episodes=episodes, seed=eval_seed
            )
            return metrics["success_rate"], metrics[speed]

        return jax.jit(jax.vmap(one))

    kinds = {f"val{n}": kind(n, seed) for n in sizes} | {"heldout": kind(100, check["heldout_seed"])}
    stores = {s: SeedCheckpoints(run.checkpoint_dir(task, s), read_only=True) for s in seeds}
    abstract = setup.abstract_state()
    timing = {name: {"compile_s": 0.0, "run_s": 0.0, "calls": 0} for name in kinds}
    per_seed = {s: [] for s in seeds}
    try:
        for index, step in enumerate(steps):
            states = [stores[s].restore(step, abstract, logged[s][index]["state_digest"]) for s in seeds]
            params = jax.tree.map(
                lambda *leaves: jnp.stack(leaves), *[setup.algorithm.network_params(x) for x in states]
            )
            results = {}
            for name, function in kinds.items():
                if index == 0:
                    start = time.perf_counter()
                    kinds[name] = function = function.lower(params).compile()
                    timing[name]["compile_s"] = time.perf_counter() - start
                start = time.perf_counter()
                results[name] = [np.asarray(x, np.float64) for x in jax.block_until_ready(function(params))]
                timing[name]["run_s"] += time.perf_counter() - start
                timing[name]["calls"] += 1
            for i, s in enumerate(seeds):
                per_seed[s].append(_row(logged[s][index], setup.protocol.eval_episodes, speed, results, i))
            print(f"  checkpoint {step:,}: {len(seeds)} seeds evaluated", file=sys.stderr, flush=True)
    finally:
        for store in stores.values():
            store.finish()
    baseline = manifest.get("baselines", {}).get(task, {})
    info = {
        "starts_check": check,
        "timing": timing,
        "seeds": seeds,
        "checkpoint_steps": steps,
        "reference": {"name": baseline.get("name"), "speed": (baseline.get("metrics") or {}).get(speed)},
        "run_command": manifest.get("command"),
        "run_git_revision": manifest.get("git_revision"),
        "eval_episodes_full": setup.protocol.eval_episodes,
    }
    return info, [per_seed[s] for s in seeds]


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _row(logged: dict, full_episodes: int, speed: str, results: dict, i: int) -> dict:
    """One (seed, checkpoint): its logged held-out metrics, and the new evaluations."""
    row = {
        "steps": logged["actual_steps"],
        "full": logged["eval_episodes"] == full_episodes,
        "logged_episodes": logged["eval_episodes"],
        "logged_success": _finite(logged["eval_success_rate"]),
        "logged_speed": _finite(logged[f"eval_{speed}"]),
    }
    for name, (success, speeds) in results.items():
        row[f"{name}_success"], row[f"{name}_speed"] = _finite(success[i]), _finite(speeds[i])
    return row


def reproduction(per_seed: list[list[dict]]) -> dict:
    """The held-out re-evaluation against the logged one at the full checkpoints (same 100
    starts): how many match in success exactly and in speed to 1e-3."""
    full = [row for rows in per_seed for row in rows if row["full"]]
    same = [
        row
        for row in full
        if row["heldout_success"] == row["logged_success"]
        and (row["logged_speed"] is None) == (row["heldout_speed"] is None)
        and (row["logged_speed"] is None or abs(row["logged_speed"] - row["heldout_speed"]) < 1e-3)
    ]
    return {"full_checkpoints": len(full), "matching": len(same)}


# --- reporting -------------------------------------------------------------------------------


def _number(value, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_table(study: dict) -> str:
    """One run: a row per rule (seeds at the bar, faster than the reference, speeds)."""
    ref, count = study["reference"], len(study["seeds"])
    lines = [
        f"| {study['label']}: rule | validation episodes | seeds at >= {study['bar']} | faster than the "
        f"{ref['name']} ({_number(ref['speed'])}) | median | mean | worst |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for entry in study["choices"]:
        lines.append(
            f"| {entry['rule']} | {entry.get('episodes', '-')} | {entry['seeds_at_bar']}/{count} | "
            f"{entry['seeds_faster']}/{count} | {_number(entry['median_speed'])} | {_number(entry['mean_speed'])} | "
            f"{_number(entry['worst_speed'])} |"
        )
    return "\n".join(lines) + "\n"


def seed_table(study: dict, rules: tuple[tuple[str, int], ...] = (("best among all", 100), ("best among all", 20))):
    """Per seed: the last checkpoint's held-out success and speed, then each rule's choice."""
    by_name = {(entry["rule"], entry.get("episodes")): entry for entry in study["choices"]}
    columns = [by_name[("last checkpoint", None)], *[by_name[rule] for rule in rules]]
    header = "| seed | last: success, speed | " + " | ".join(f"{r} ({n}): steps, success, speed" for r, n in rules)
    lines = [header + " |", "|---" * (2 + len(rules)) + "|"]
    for i, seed in enumerate(study["seeds"]):
        cells = [f"{e['heldout_success'][i]:.2f}, {_number(e['heldout_speed'][i])}" for e in columns]
        chosen = [f"{e['chosen_steps'][i]:,}, {cell}" for e, cell in zip(columns[1:], cells[1:])]
        lines.append(f"| {seed} | {cells[0]} | " + " | ".join(chosen) + " |")
    return "\n".join(lines) + "\n"


def dumps(study: dict) -> str:
    """The JSON, one line per (seed, checkpoint) row and per rule's outcome: readable, and a
    run's 820 rows stay about 300 lines' worth of diff."""
    head = {key: value for key, value in study.items() if key not in ("choices", "per_seed")}
    text = json.dumps(head, indent=1)[:-2]
    rules = ",\n  ".join(json.dumps(entry) for entry in study["choices"])
    seeds = ",\n  ".join(
        "[\n   " + ",\n   ".join(json.dumps(row) for row in rows) + "\n  ]" for rows in study["per_seed"]
    )
    return f'{text},\n "choices": [\n  {rules}\n ],\n "per_seed": [\n  {seeds}\n ]\n}}\n'


def optimism(study: dict, episodes: int) -> str:
    """How much better the chosen checkpoints look on the validation starts they were chosen on
    than on the held-out starts, beyond what the two sets of starts differ by at the last
    checkpoint (not chosen): the selection's winner's curse, in speed (mean over the seeds
    that succeed on both) and success."""
    lines = []
    for name, pick in (("last", lambda rows: rows[-1]), ("chosen", lambda rows: choose(rows, episodes))):
        picked = [pick(rows) for rows in study["per_seed"]]
        success = np.mean([row[f"val{episodes}_success"] - row["heldout_success"] for row in picked])
        both = [row for row in picked if row[f"val{episodes}_speed"] is not None and row["heldout_speed"] is not None]
        speed = np.mean([row[f"val{episodes}_speed"] - row["heldout_speed"] for row in both])
        lines.append(f"{name}: validation - held-out success {success:+.3f}, speed {speed:+.2f} ({len(both)} seeds)")
    return f"{study['label']}, best among all ({episodes} episodes): " + "; ".join(lines)


def _setting(name: str) -> tuple[dict, str]:
    """robustness_study's numerical setting ``name`` applied (before JAX starts)."""
    spec = importlib.util.spec_from_file_location("_robustness_study", Path(__file__).with_name("robustness_study.py"))
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    return study.apply_setting(name), study.SETTINGS[name][1]


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, non_negative_int, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--task", choices=sorted(SPEED), default="swing", help="the run's task")
    parser.add_argument("--run-dir", type=Path, help="a finished run that kept every checkpoint (not a record)")
    parser.add_argument("--label", help="the run's name in the tables and the JSON's file name (default: --run-dir's)")
    parser.add_argument(
        "--setting",
        default="default",
        choices=("default", "xla-o1", "matmul-highest"),
        help="numerical setting to evaluate under (studies/scripts/robustness_study.py's): the run's own, so the "
        "held-out re-evaluation reproduces the logged one",
    )
    parser.add_argument(
        "--validation-seed",
        type=non_negative_int,
        default=VALIDATION_SEED,
        help="seed of the validation starts, drawn by the task's held-out evaluation with this seed instead of "
        "its own; refused if any validation episode coincides with a held-out one",
    )
    parser.add_argument(
        "--episodes", nargs="+", type=positive_int, default=[100, 20], help="validation set sizes to choose on"
    )
    parser.add_argument(
        "--last-n", nargs="+", type=positive_int, default=[10], help="'best among the last N checkpoints' variants"
    )
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR, help="where the JSON goes (and --table reads)")
    parser.add_argument("--table", action="store_true", help="print the Markdown tables of every JSON in --out-dir")
    parser.add_argument(
        "--rechoose",
        action="store_true",
        help="recompute every JSON's choices in --out-dir from its rows with today's rules and its recorded "
        "--last-n (no evaluation)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rechoose:
        for path in sorted(args.out_dir.glob("*.json")):
            study = json.loads(path.read_text())
            recorded = parser.parse_args(study["command"][1:])
            study["choices"] = choices(
                study["per_seed"], study["reference"]["speed"], study["validation_episodes"], recorded.last_n
            )
            path.write_text(dumps(study))
            print(f"rewrote {path}")
        return 0
    if args.table:
        for path in sorted(args.out_dir.glob("*.json")):
            study = json.loads(path.read_text())
            print(summary_table(study) + "\n" + seed_table(study))
            print("\n".join(optimism(study, episodes) for episodes in study["validation_episodes"]) + "\n")
        return 0
    if args.run_dir is None or not (args.run_dir / "manifest.json").is_file():
        parser.error(f"--run-dir {args.run_dir}: expected a finished run directory with a manifest.json")
    setting_env, meaning = _setting(args.setting)  # before JAX starts
    import jax

    from purehr.run.store.machine import git_revision

    started = time.perf_counter()
    info, per_seed = evaluate_run(args.run_dir, args.task, args.episodes, args.validation_seed)
    label = args.label or args.run_dir.name
    study = {
        "label": label,
        "task": args.task,
        "run_dir": str(args.run_dir),
        "setting": args.setting,
        "setting_env": setting_env,
        "setting_meaning": meaning,
        "validation_seed": args.validation_seed,
        "validation_episodes": args.episodes,
        "bar": BAR,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), jax {jax.__version__}",
        "command": sys.argv if argv is None else argv,
        "git_revision": git_revision(),
        "wall_time_s": None,
        **info,
        "reproduction": reproduction(per_seed),
        "choices": choices(per_seed, info["reference"]["speed"], args.episodes, args.last_n),
        "per_seed": per_seed,
    }
    study["wall_time_s"] = round(time.perf_counter() - started, 1)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"{label}.json"
    path.write_text(dumps(study))
    print(summary_table(study) + "\n" + seed_table(study))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
