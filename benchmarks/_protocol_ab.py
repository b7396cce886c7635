"""What a flag costs the protocol: the same ``scripts/train_all_seeds.py`` run with and without
it, alternated (A B B A ...) in one session so that the machine's load falls on both. Each run
is a fresh process (``--no-render``); recorded per run: the process's wall and CPU time and the
manifest's compile and training time (wall time less compilation, so the baselines' evaluation
too where the persistent baseline cache misses), and the program's own time (``program_s``: the
last update row's ``elapsed_s``, from the program's start). Used by
tracking_overhead.py (``--log``) and pbt_cost.py (``--pbt``)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import load_averages, write_json

ROOT = Path(__file__).resolve().parents[1]
MEASURES = ("process_wall_s", "process_cpu_s", "training_s", "compile_s", "program_s")


def run_once(run_dir: Path, flags: list[str]) -> dict:
    command = [sys.executable, str(ROOT / "scripts" / "train_all_seeds.py"), "--run-dir", str(run_dir)]
    command += ["--no-render", "--no-progress", *flags]
    started, cpu_before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    return {
        "process_wall_s": wall,
        "process_cpu_s": cpu,  # user + system of the trainer and the children it waited for (wandb's service)
        "training_s": manifest["wall_time_s"] - manifest["compile_s"],
        "compile_s": manifest["compile_s"],
        "program_s": program_seconds(run_dir),
    }


def program_seconds(run_dir: Path) -> float:
    """The compiled program's run time: the largest last ``elapsed_s`` of any updates.csv (the
    recorder's clock starts when the program starts; compilation and baselines are outside)."""
    last = 0.0
    for path in run_dir.glob("*/seed_*/updates.csv"):
        lines = path.read_text().splitlines()
        if len(lines) > 1:
            header, final = lines[0].split(","), lines[-1].split(",")
            last = max(last, float(final[header.index("elapsed_s")]))
    return last


def alternate(with_flags: list[str], common: list[str], repeats: int) -> tuple[list[dict], dict[str, float]]:
    """``repeats`` pairs of runs, with (``with``: True) and without ``with_flags``, the order
    alternating; returns every run and the ratio with / without of each measure's sum."""
    runs = []
    with tempfile.TemporaryDirectory(prefix="purehr-protocol-ab-") as scratch:
        for repeat in range(repeats):
            for use in (False, True) if repeat % 2 == 0 else (True, False):
                flags = [*common, *(with_flags if use else [])]
                run = dict(run_once(Path(scratch) / f"run_{len(runs)}", flags), **{"with": use})
                runs.append(run)
                print(json.dumps(run), flush=True)
    ratio = {}
    for measure in MEASURES:
        ratio[measure] = sum(r[measure] for r in runs if r["with"]) / sum(r[measure] for r in runs if not r["with"])
    return runs, ratio


def measure_and_record(
    with_flags: list[str], common: list[str], repeats: int, ratio_name: str, json_path: Path | None, with_key: str
) -> None:
    """``alternate``, then the record every such benchmark writes: the command, every run (its
    with / without flag as ``with_key``), the ratios as ``ratio_name``, the load around it."""
    before = os.getloadavg()
    runs, ratio = alternate(with_flags, common, repeats)
    runs = [dict({k: v for k, v in run.items() if k != "with"}, **{with_key: run["with"]}) for run in runs]
    record = {"command": [sys.executable, *sys.argv], "runs": runs, ratio_name: ratio}
    record.update(load_averages(before))
    print(json.dumps({ratio_name: ratio, **load_averages(before)}))
    write_json(json_path, record)
