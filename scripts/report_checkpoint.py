"""Choose the checkpoint each seed of a finished run reports, on validation episodes, after the
fact: what ``--report-candidates N`` does at the end of a run (docs/protocol.md, "The reported
checkpoint"), for a run trained without it (or to choose again among another number).

    python scripts/report_checkpoint.py --run-dir runs/main --candidates 10
    python scripts/report_checkpoint.py --run-dir runs/main --task swing --candidates 10 --validation-episodes 20

Writes each seed's ``reported.csv`` and the manifest's ``reported_checkpoints`` (replacing an
earlier choice, which it names), then prints the results table, which now holds the reported
checkpoints. Every checkpoint it reads is verified by its digest; the run's checkpoints and logs
are not touched. Run it on the machine (and ``XLA_FLAGS``) that trained the run to reproduce its
logged evaluations exactly.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from purehr.cli.arguments import HelpFormatter
from purehr.cli.cache_flags import add_compile_cache_flags, start_compile_cache


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=HelpFormatter)
    parser.add_argument("--run-dir", required=True, type=Path, help="a finished run's directory")
    parser.add_argument("--task", action="append", help="a task of the run (repeatable; default: every task)")
    parser.add_argument("--candidates", type=int, required=True, help="each seed's last N checkpoints (N >= 2)")
    parser.add_argument("--validation-episodes", type=int, default=20, help="validation episodes per candidate")
    add_compile_cache_flags(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    start_compile_cache(args, parser)
    if args.candidates < 2:
        parser.error(f"--candidates {args.candidates}: expected at least 2 (1 reports the last checkpoint)")

    from purehr.protocol_settings import ProtocolSettings
    from purehr.reports.results_table import results_table
    from purehr.run.choose_reported import report_checkpoints
    from purehr.run.compiled.task_setup import recorded_setup
    from purehr.run.store.run_dir import RunDirectory

    run = RunDirectory(args.run_dir)
    manifest = run.read_manifest()
    if manifest["status"] != "finished":
        parser.error(f"--run-dir {args.run_dir}: its run is {manifest['status']!r}; expected a finished one")
    tasks = args.task or list(manifest["tasks"])
    unknown = [task for task in tasks if task not in manifest["tasks"]]
    if unknown:
        parser.error(f"--task {unknown[0]!r}: not in the run (it has {manifest['tasks']})")
    try:  # a bad --validation-episodes is refused by the settings' own check
        ProtocolSettings(report_candidates=args.candidates, validation_episodes=args.validation_episodes)
    except ValueError as error:
        parser.error(str(error))
    setups = []
    for task in tasks:
        setup = recorded_setup(manifest, task)
        settings = {"report_candidates": args.candidates, "validation_episodes": args.validation_episodes}
        protocol = setup.protocol.replace(**settings)
        setups.append(dataclasses.replace(setup, protocol=protocol))
    lock = run.lock()
    try:
        reported = report_checkpoints(run, setups, manifest["seeds"])
        manifest = run.read_manifest()
        earlier = {task: entry for task, entry in (manifest.get("reported_checkpoints") or {}).items() if task in tasks}
        for task, entry in earlier.items():
            print(f"{task}: replaced the earlier choice ({entry['candidates']} candidates)", file=sys.stderr)
        manifest["reported_checkpoints"] = {**(manifest.get("reported_checkpoints") or {}), **reported}
        run.write_manifest(manifest)
    finally:
        lock.release()
    print(results_table(run.root))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
