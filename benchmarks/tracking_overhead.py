"""What ``--log tensorboard wandb`` costs the protocol: the same run with and without the
dashboards, alternated (A B B A ...) in one session so that the machine's load falls on both.

python benchmarks/tracking_overhead.py --repeats 2 --json benchmarks/results/tracking_overhead.json
python benchmarks/tracking_overhead.py --steps 100000 --seeds 0 1     # quicker, smaller

Each run is a fresh ``scripts/train_all_seeds.py`` process (``--no-render``; the dashboards'
end-of-run table and figures are published all the same). Recorded per run: the wall time of
the process, and the manifest's training time (wall time less compilation), which is where
the logging happens, and the CPU time of the process (less sensitive than wall time to what
else the shared machine runs); the ratio is logged / plain of each, over the pairs."""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import load_averages, write_json  # noqa: E402

from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LOGGED = ["--log", "tensorboard", "wandb"]


def run_once(run_dir: Path, logged: bool, extra: list[str]) -> dict:
    command = [sys.executable, str(ROOT / "scripts" / "train_all_seeds.py"), "--run-dir", str(run_dir)]
    command += ["--no-render", "--no-progress", *extra, *(LOGGED if logged else [])]
    started, cpu_before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {
        "logged": logged,
        "process_wall_s": wall,
        "process_cpu_s": cpu,  # user + system of the trainer and the children it waited for (wandb's service)
        "training_s": manifest["wall_time_s"] - manifest["compile_s"],
        "compile_s": manifest["compile_s"],
    }


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--repeats", type=positive_int, default=2, help="pairs of runs (logged, plain), alternated")
    parser.add_argument(
        "--steps", type=positive_int, default=None, help="--steps of every run (default: the protocol's)"
    )
    parser.add_argument("--seeds", nargs="+", default=None, help="--seeds of every run (default: the protocol's)")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    extra = (["--steps", str(args.steps)] if args.steps else []) + (["--seeds", *args.seeds] if args.seeds else [])
    before = os.getloadavg()
    runs = []
    with tempfile.TemporaryDirectory(prefix="purehr-tracking-overhead-") as scratch:
        for repeat in range(args.repeats):
            order = (False, True) if repeat % 2 == 0 else (True, False)
            for logged in order:
                run = run_once(Path(scratch) / f"run_{len(runs)}", logged, extra)
                runs.append(run)
                print(json.dumps(run), flush=True)
    ratio = {}
    for measure in ("process_wall_s", "process_cpu_s", "training_s"):
        logged = sum(r[measure] for r in runs if r["logged"])
        plain = sum(r[measure] for r in runs if not r["logged"])
        ratio[measure] = logged / plain
    record = {"command": [sys.executable, *sys.argv], "runs": runs, "ratio_logged_over_plain": ratio}
    record.update(load_averages(before))
    print(json.dumps({"ratio_logged_over_plain": ratio, **load_averages(before)}))
    write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
