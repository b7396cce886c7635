"""Whether a checkpoint's host work holds the compiled program (issue 49): one small protocol
run three times in one process (compiled once), with ``--sleep`` seconds injected

  none      nothing injected (the reference)
  callback  into the checkpoint's io_callback itself (``RunRecorder.on_checkpoint``): the
            program waits for an ordered callback, so training time grows by about n x sleep
  writer    into the host work of each checkpoint (the Orbax saves, digests, rows and CSVs of
            ``RunRecorder._write_checkpoint``, in the writer's thread): it grows only where
            the writer's bounded backlog (``purehr.run.host.writer.PENDING_JOBS``) fills, that
            is where the host work of a checkpoint outlasts the training between two

python benchmarks/checkpoint_blocking.py --json benchmarks/results/checkpoint_blocking.json
python benchmarks/checkpoint_blocking.py --steps 40960 --interval 8192 --sleep 0.2   # small

Printed per variant: the training time (the manifest's wall time less compilation), the
checkpoints written, the seconds spent inside the checkpoint callbacks and in the writer, and
``checkpoint_gap_s``: the median time from the update row of a checkpoint's update to the next
update's row, less the median of the other updates' gaps (read from ``updates.csv``'s
``elapsed_s``; the evaluation and whatever held the program there). On a shared machine whose
load drifts between runs this is the steadier measure: it compares neighbouring updates."""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_averages, write_json  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402

VARIANTS = ("none", "callback", "writer")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--task", default="hrv", help="the task trained")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="seeds trained")
    parser.add_argument("--steps", type=positive_int, default=163_840, help="environment steps per seed")
    parser.add_argument("--interval", type=positive_int, default=20_480, help="--checkpoint-interval")
    parser.add_argument("--sleep", type=float, default=0.5, help="seconds injected per checkpoint event")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def _with_sleep(method, seconds: float):
    @functools.wraps(method)
    def slept(self, *args, **kwargs):
        time.sleep(seconds)
        return method(self, *args, **kwargs)

    return slept


def run_variant(variant: str, args, scratch: Path) -> dict:
    """One run with ``args.sleep`` injected where ``variant`` says; its times and counts."""
    from purehr.run.host.recorder import RunRecorder
    from purehr.run.protocol import train_all_seeds

    name = {"callback": "on_checkpoint", "writer": "_write_checkpoint"}.get(variant)
    original = getattr(RunRecorder, name) if name else None
    if name:
        setattr(RunRecorder, name, _with_sleep(original, args.sleep))
    try:
        run_dir = scratch / variant
        train_all_seeds(
            run_dir,
            tasks=[args.task],
            seeds=args.seeds,
            overrides={"total_timesteps": args.steps, "checkpoint_interval": args.interval},
            progress=False,
        )
    finally:
        if name:
            setattr(RunRecorder, name, original)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    timing = manifest.get("timing", manifest)
    seed_dir = run_dir / args.task / f"seed_{args.seeds[0]}"
    rows = (seed_dir / "checkpoints.csv").read_text().splitlines()
    return {
        "checkpoint_gap_s": checkpoint_gap(seed_dir),
        "variant": variant,
        "training_s": manifest["wall_time_s"] - manifest["compile_s"],
        "compile_s": manifest["compile_s"],
        "checkpoint_events": len(rows) - 1,
        "seconds_in_checkpoint_callbacks": _find(timing, "seconds_in_checkpoint_callbacks"),
        "seconds_writing_checkpoints": _find(timing, "seconds_writing_checkpoints_in_background"),
    }


def checkpoint_gap(seed_dir: Path) -> float:
    """Median gap after a checkpoint's update less the median gap after the other updates (s)."""
    import numpy as np

    with open(seed_dir / "updates.csv") as updates, open(seed_dir / "checkpoints.csv") as checkpoints:
        elapsed = {int(row["update"]): float(row["elapsed_s"]) for row in csv.DictReader(updates)}
        saved = {int(row["update"]) for row in csv.DictReader(checkpoints)}
    gaps = {u: elapsed[u + 1] - elapsed[u] for u in elapsed if u + 1 in elapsed}
    at = [gap for u, gap in gaps.items() if u in saved]
    between = [gap for u, gap in gaps.items() if u not in saved]
    return float(np.median(at) - np.median(between)) if at and between else float("nan")


def _find(record, key: str):
    """``key``'s value anywhere in the manifest (None: absent)."""
    if isinstance(record, dict):
        if key in record:
            return record[key]
        for value in record.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


def summarize(runs: list[dict], sleep: float) -> dict:
    """Each injected variant's extra training time over the reference, in units of
    ``checkpoint events x sleep`` (1: the program waited for every injected second; 0: none)."""
    reference = next(r for r in runs if r["variant"] == "none")
    summary = {}
    for run in runs:
        if run["variant"] != "none":
            extra = run["training_s"] - reference["training_s"]
            summary[run["variant"]] = {
                "extra_s": extra,
                "held_fraction": extra / (run["checkpoint_events"] * sleep),
                "gap_over_reference_s": run["checkpoint_gap_s"] - reference["checkpoint_gap_s"],
            }
    return summary


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="purehr-blocking-") as scratch:
        # the first run compiles; the reference is run again after it so it is warm like the others
        run_variant("none", args, Path(scratch) / "warmup")
        runs = []
        for variant in VARIANTS:
            runs.append(run_variant(variant, args, Path(scratch)))
            print(json.dumps(runs[-1]), flush=True)
    record = {"command": [sys.executable, *sys.argv], "runs": runs, "summary": summarize(runs, args.sleep)}
    record.update(load_averages(before))
    print(json.dumps(record["summary"]))
    write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
