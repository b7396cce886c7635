"""The robustness study of issue 51: one task's default protocol on many seeds under a named
numerical setting, and per seed what the record needs to say why a seed fails or is slow.

python studies/scripts/robustness_study.py --task hrv --setting default  # seeds 0-19, one compiled call
python studies/scripts/robustness_study.py --task hrv --setting xla-o1   # the same, other float32 rounding
python studies/scripts/robustness_study.py --task swing --setting default --summarise-only --run-dir DIR
python studies/scripts/robustness_study.py --table                       # the Markdown tables of results/robustness

Each (task, setting) writes ``results/robustness/<task>-<setting>.json``: the setting, the machine,
the command, the run's goal verdicts on all its seeds (``goals_met``) and per seed the held-out
success and speed of the last checkpoint, the checkpoints where it first and last met the bar,
its final state digest (equal digests across settings: the setting did not move the rounding)
and, for a seed that ends below the bar, its learning curve per checkpoint interval (mean
entropy, approx_kl, value_loss of the updates in it) and whether it collapsed after learning or
never learned. The run directory (checkpoints) stays outside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "robustness"
BAR = 0.95
SETTINGS = {
    "default": ({}, "the training program's own options (CPU: XLA backend optimisation level 2)"),
    "xla-o1": (
        {"XLA_FLAGS": "--xla_backend_optimization_level=1"},
        "XLA CPU backend optimisation level 1 (purehr.engine.compile_options: it changes the numbers)",
    ),
    "matmul-highest": (
        {"JAX_DEFAULT_MATMUL_PRECISION": "highest"},
        "float32 matmuls at the highest precision (GPUs, TPUs; the digests say if it moves the CPU)",
    ),
}
"""Per setting: the environment variables set before JAX starts, and what they change."""
SIGNALS = ("entropy", "approx_kl", "value_loss")
SPEED = {"swing": "time_to_rotation", "hrv": "episode_length"}


def apply_setting(name: str) -> dict[str, str]:
    """Sets the setting's environment variables (before JAX is imported); the values set."""
    if name not in SETTINGS:
        raise SystemExit(f"error: --setting {name!r}: expected one of {', '.join(SETTINGS)}")
    values = {}
    for key, value in SETTINGS[name][0].items():
        values[key] = f"{os.environ[key]} {value}".strip() if key == "XLA_FLAGS" and key in os.environ else value
        os.environ[key] = values[key]
    return values


def _checkpoints(run_dir: Path, task: str, seed: int) -> dict[str, np.ndarray]:
    from purehr.run.store.files import read_csv_columns
    from purehr.run.store.run_dir import CHECKPOINTS_CSV, seed_dir_name

    return read_csv_columns(run_dir / task / seed_dir_name(seed) / CHECKPOINTS_CSV, ("actual_steps",), numeric=True)


def learning_curve(run_dir: Path, task: str, seed: int) -> list[dict]:
    """Per checkpoint: its held-out success and speed, and the mean of each of ``SIGNALS`` over
    the updates since the previous checkpoint (the first: none, NaN)."""
    from purehr.run.store.files import read_csv_columns
    from purehr.run.store.run_dir import seed_dir_name

    points = _checkpoints(run_dir, task, seed)
    updates = read_csv_columns(run_dir / task / seed_dir_name(seed) / "updates.csv", ("env_steps", *SIGNALS))
    curve, previous = [], -1.0
    for index, steps in enumerate(points["actual_steps"]):
        inside = (updates["env_steps"] > previous) & (updates["env_steps"] <= steps)
        row = {"steps": int(steps), "success": float(points["eval_success_rate"][index])}
        speed = f"eval_{SPEED.get(task, 'episode_length')}"
        if speed in points:
            row["speed"] = float(points[speed][index])
        for name in SIGNALS:
            row[name] = float(np.mean(updates[name][inside])) if inside.any() else None
        curve.append(row)
        previous = steps
    return curve


def seed_summary(run_dir: Path, task: str, seed: int, bar: float = BAR, reference: float | None = None) -> dict:
    """One seed: the last checkpoint's held-out success and speed, the steps of the first and
    last checkpoint at or above ``bar`` (None: never), and for a seed ending below it the
    verdict (``collapsed after learning`` / ``never learned``) and its learning curve; a seed
    whose speed is not below ``reference`` (the baseline's: lower is faster) is ``slow`` and
    gets its learning curve too."""
    points = _checkpoints(run_dir, task, seed)
    success = points["eval_success_rate"]
    met = np.flatnonzero(success >= bar)
    speed = f"eval_{SPEED.get(task, 'episode_length')}"
    summary = {
        "seed": seed,
        "steps": int(points["actual_steps"][-1]),
        "success": float(success[-1]),
        "speed": float(points[speed][-1]) if speed in points else None,
        "return_mean": float(points["eval_return_mean"][-1]) if "eval_return_mean" in points else None,
        "first_met_steps": int(points["actual_steps"][met[0]]) if met.size else None,
        "last_met_steps": int(points["actual_steps"][met[-1]]) if met.size else None,
        "checkpoints_met": int(met.size),
        "best_success": float(success.max()),
        "state_digest": str(points["state_digest"][-1]) if "state_digest" in points else None,
    }
    if success[-1] < bar:
        summary["failure"] = "collapsed after learning" if met.size else "never learned"
    # NaN (no success to time) is not faster than the reference either
    summary["slow"] = bool(
        reference is not None and not (summary["speed"] is not None and summary["speed"] < reference)
    )
    if "failure" in summary or summary["slow"]:
        summary["learning_curve"] = learning_curve(run_dir, task, seed)
    return summary


def study_summary(run_dir: Path, task: str, setting: str, command: list[str] | None = None) -> dict:
    """The JSON of one (task, setting): machine, command, goal verdicts, baseline and per seed."""
    import jax

    from purehr.reports.results_table import goals_met
    from purehr.run.store.run_dir import read_manifest

    manifest = read_manifest(run_dir)
    seeds = [int(seed) for seed in manifest["seeds"]]
    baseline = manifest.get("baselines", {}).get(task, {})
    reference = (baseline.get("metrics") or {}).get(SPEED.get(task, "episode_length"))
    per_seed = [seed_summary(run_dir, task, seed, reference=reference) for seed in seeds]
    return {
        "task": task,
        "setting": setting,
        "setting_env": SETTINGS[setting][0],
        "setting_meaning": SETTINGS[setting][1],
        "bar": BAR,
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared), jax {jax.__version__}",
        "command": command,
        "run_command": manifest.get("command"),
        "git_revision": manifest.get("git_revision"),
        "run_status": manifest.get("status"),  # not "finished": the per-seed rows are its last checkpoints
        "wall_time_s": manifest.get("wall_time_s"),
        "seeds": seeds,
        "baseline": {"name": baseline.get("name"), "speed": reference},
        "seeds_at_bar": sum(seed["success"] >= BAR for seed in per_seed),
        "seeds_faster_than_baseline": sum(not seed["slow"] for seed in per_seed) if reference is not None else None,
        "goals": goals_met(run_dir).get(task),
        "per_seed": per_seed,
    }


def markdown_table(study: dict) -> str:
    """One (task, setting) as Markdown: a line of totals, then a row per seed."""
    speed = "time to rotation (s)" if study["task"] == "swing" else "episode length (steps)"
    unfinished = "" if study.get("run_status") == "finished" else f" [run {study.get('run_status')}: partial]"
    lines = [
        f"**{study['task']}, setting `{study['setting']}`**{unfinished} ({study['setting_meaning']}): "
        f"{study['seeds_at_bar']}/{len(study['seeds'])} seeds at held-out success >= {study['bar']}, "
        f"{study['seeds_faster_than_baseline']}/{len(study['seeds'])} faster than the "
        f"{study['baseline']['name']} ({_number(study['baseline']['speed'])})",
        "",
        f"| seed | held-out success | {speed} | first / last checkpoint >= {study['bar']} (steps) | "
        "checkpoints >= bar | failure, or slower than the reference | state digest |",
        "|---|---|---|---|---|---|---|",
    ]
    for seed in study["per_seed"]:
        lines.append(
            f"| {seed['seed']} | {seed['success']:.2f} | {_number(seed['speed'])} | "
            f"{_number(seed['first_met_steps'])} / {_number(seed['last_met_steps'])} | {seed['checkpoints_met']} | "
            f"{seed.get('failure') or ('slow' if seed['slow'] else '')} | `{(seed['state_digest'] or '')[:12]}` |"
        )
    return "\n".join(lines) + "\n"


def summary_row(study: dict) -> str:
    """One (task, setting) as a row of the summary table: counts, median and mean speed, goal."""
    speeds = np.asarray([seed["speed"] for seed in study["per_seed"]], np.float64)
    goals, count = study.get("goals") or {}, len(study["seeds"])
    status = "" if study.get("run_status") == "finished" else f" ({study.get('run_status')}: partial)"
    return (
        f"| {study['task']} | `{study['setting']}`{status} | {study['seeds_at_bar']}/{count} | "
        f"{study['seeds_faster_than_baseline']}/{count} ({study['baseline']['name']} "
        f"{_number(study['baseline']['speed'])}) | {np.nanmedian(speeds):.2f} | {np.nanmean(speeds):.2f} | "
        f"{'met' if goals.get('met') else 'not met'} |"
    )


def _number(value) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:.2f}"


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter, non_negative_int, positive_int

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--task", choices=sorted(SPEED), help="the task whose default protocol is studied")
    parser.add_argument(
        "--setting", default="default", choices=sorted(SETTINGS), help=f"numerical setting: {', '.join(SETTINGS)}"
    )
    parser.add_argument("--seeds", nargs="+", type=non_negative_int, default=list(range(20)), help="seeds")
    parser.add_argument(
        "--steps", type=positive_int, default=None, help="steps per seed (default: the task's protocol)"
    )
    parser.add_argument("--run-dir", type=Path, default=None, help="run directory (default: /tmp/robustness/...)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON goes")
    parser.add_argument("--summarise-only", action="store_true", help="summarise the finished run in --run-dir")
    parser.add_argument("--table", action="store_true", help="print the Markdown tables of every JSON in --out")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.table:
        studies = [json.loads(path.read_text()) for path in sorted(args.out.glob("*.json"))]
        print("\n".join(summary_row(study) for study in studies) + "\n")
        print("\n".join(markdown_table(study) for study in studies))
        return 0
    if args.task is None:
        parser.error("--task is required (or --table)")
    apply_setting(args.setting)  # before JAX starts
    run_dir = args.run_dir or Path("/tmp/robustness") / f"{args.task}-{args.setting}"
    if not args.summarise_only:
        from purehr.run.protocol import train_all_seeds

        overrides = {} if args.steps is None else {"total_timesteps": args.steps}
        command = sys.argv if argv is None else argv
        train_all_seeds(
            run_dir, tasks=[args.task], seeds=args.seeds, overrides=overrides, progress=False, command=command
        )
    study = study_summary(run_dir, args.task, args.setting, command=sys.argv if argv is None else argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.task}-{args.setting}.json"
    path.write_text(json.dumps(study, indent=1) + "\n")
    print(markdown_table(study))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
