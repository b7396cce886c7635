"""How good is good: optimal-control references for both tasks (results/limits/README.md, results/limits/).

    python studies/scripts/limits.py                              # the recorded run: results/limits
    python studies/scripts/limits.py --out /tmp/limits --starts 8 --rounds 1 --iterations 2   # a quick look

Swing: per held-out start, a lower bound on the time to rotation from the energy the rider must
add and the most power the servo can put in, and an upper bound, the fastest rotation found by
shooting through the differentiable plant (warm-started from the structured controller's and
every PPO seed's actions) and verified by replay in SwingEnv. HRV: per held-out episode, the
per-dimension lower bound and the exact fewest steps (noise-free, and with the evaluation's
realised noise), replayed in HRWritingEnv. Against both: PPO's final checkpoint of every seed
of --protocol (a protocol record, e.g. results/protocol) and the hand-made references.

Writes to --out (new or empty, or an earlier run's with --overwrite): swing.csv, hrv.csv, summary.json,
swing_actions.npz, hrv_plans.npz, swing_limits.png, hrv_limits.png and README.md (the command,
the machine, the wall time and the numbers). 3.8 minutes on the 2-core CPU (no GPU).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: studies/ is not installed

ROOT = Path(__file__).resolve().parents[2]
TASKS = ("swing", "hrv")
MAX_STARTS = 100
SUMMARY = "summary.json"  # written last by every run: what marks a folder as a limits run's
LIMITS_COMMANDS = ("studies/scripts/limits.py", "scripts/limits.py")  # the second: runs from before the script moved


def build_parser() -> argparse.ArgumentParser:
    from purehr.cli.arguments import HelpFormatter

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument(
        "--protocol",
        type=Path,
        default=Path("results/protocol"),
        help="protocol record or run with swing and hrv checkpoints: PPO's final checkpoint of each seed is judged",
    )
    parser.add_argument("--out", type=Path, default=Path("results/limits"), help="output folder (new or empty)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="write into an --out that holds an earlier limits run (its summary.json), replacing that run's files; "
        "a folder holding anything else is refused",
    )
    parser.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="PPO seeds of the record to judge (not set: all of them)"
    )
    parser.add_argument(
        "--starts", type=int, default=MAX_STARTS, help=f"swing held-out starts, the first of the {MAX_STARTS}"
    )
    parser.add_argument(
        "--rounds", type=int, default=None, help="swing optimiser rounds (transplant + gradient steps; not set: 6)"
    )
    parser.add_argument(
        "--iterations", type=int, default=None, help="line-searched gradient steps per round (not set: 10)"
    )
    parser.add_argument(
        "--hrv-max-steps", type=int, default=None, help="the HRV search's largest episode length (not set: 9)"
    )
    return parser


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuses a bad value by name before anything is imported or computed."""
    manifest_path = args.protocol / "manifest.json"
    if not args.protocol.is_dir():
        parser.error(
            f"--protocol {args.protocol}: no such directory (expected a protocol record, e.g. results/protocol)"
        )
    if not manifest_path.is_file():
        parser.error(f"--protocol {args.protocol}: no manifest.json there (not a protocol run or record)")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as error:
        parser.error(f"--protocol {args.protocol}: manifest.json is unreadable ({error})")
    missing = [task for task in TASKS if task not in manifest.get("tasks", [])]
    if missing:
        parser.error(
            f"--protocol {args.protocol}: the run has no {', '.join(missing)} (it has {manifest.get('tasks')})"
        )
    recorded = [int(s) for s in manifest.get("seeds", [])]
    if args.seeds is not None:
        unknown = sorted(set(args.seeds) - set(recorded))
        if unknown:
            parser.error(
                f"--seeds {' '.join(map(str, unknown))}: not in --protocol {args.protocol} (it has {recorded})"
            )
    if not 1 <= args.starts <= MAX_STARTS:
        parser.error(f"--starts {args.starts}: expected 1 to {MAX_STARTS}")
    for flag, value, low in (("--rounds", args.rounds, 0), ("--iterations", args.iterations, 0)):
        if value is not None and value < low:
            parser.error(f"{flag} {value}: expected an integer >= {low}")
    if args.hrv_max_steps is not None and not 1 <= args.hrv_max_steps <= 10:
        parser.error(f"--hrv-max-steps {args.hrv_max_steps}: expected 1 to 10 (the search grows as C(T + 14, 14))")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out {args.out}: exists and is not a directory")
    entries = sorted(entry.name for entry in args.out.iterdir()) if args.out.is_dir() else []
    if entries and not args.overwrite:
        parser.error(f"--out {args.out} is not empty: choose a new folder, or pass --overwrite to replace its files")
    if entries and not is_limits_run(args.out):
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        parser.error(
            f"--out {args.out} is not empty and holds no limits run (it has {shown}); choose a new or empty --out "
            "(--overwrite replaces only an earlier limits run's files)"
        )


def is_limits_run(out: Path) -> bool:
    """Whether ``out`` holds an earlier run of this script: its ``summary.json`` (written last)
    names this script as its command. Only then may --overwrite replace the files there, as
    scripts/sweep.py replaces only a sweep (``sweep.json``); a user's files are never replaced."""
    try:
        summary = json.loads((out / SUMMARY).read_text())
        command = summary["record"]["command"]
        return {"swing", "hrv", "files"} <= set(summary) and command[1] in LIMITS_COMMANDS
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False


def settings_from(args: argparse.Namespace):
    from studies.limits.study import LimitsSettings
    from studies.limits.swing_shooting import ShootingSettings

    shooting = {k: v for k, v in (("rounds", args.rounds), ("iterations", args.iterations)) if v is not None}
    extra = {} if args.hrv_max_steps is None else {"hrv_max_steps": args.hrv_max_steps}
    seeds = None if args.seeds is None else tuple(dict.fromkeys(args.seeds))
    return LimitsSettings(shooting=ShootingSettings(**shooting), seeds=seeds, starts=args.starts, **extra)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_arguments(parser, args)
    from purehr.run.store.files import atomic_write_text
    from purehr.run.store.machine import environment_description, load_average
    from studies.limits import record as limits_record
    from studies.limits import study as limits

    started, load_before = time.perf_counter(), load_average()
    settings = settings_from(args)
    swing = limits.swing_study(args.protocol, settings)
    hrv = limits.hrv_study(args.protocol, settings)
    limits_record.write_results(args.out, swing, hrv)
    record = dict(
        command=["python", "studies/scripts/limits.py", *(sys.argv[1:] if argv is None else argv)],
        machine=environment_description(),
        load_average_before=load_before,
        load_average_after=load_average(),
        wall_s=time.perf_counter() - started,  # the whole command, the figures and data files included
        protocol=str(args.protocol),
        settings=settings.to_dict(),
    )
    limits_record.write_summary(args.out, swing, hrv, record)
    atomic_write_text(args.out / "README.md", limits_record.readme_text(swing["summary"], hrv["summary"], record))
    print(limits_record.headline(swing["summary"], hrv["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
