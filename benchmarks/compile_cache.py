"""The persistent compilation cache on the seed API: each run a fresh process that calls
``train_hr_ppo(HRWritingEnv(hrv_dim=8), timesteps=5000)`` with the cache off, cold (an empty
folder) or warm (the folder the cold run filled), interleaved, ``--repeats`` rounds.

PJRT_NPROC=1 python benchmarks/compile_cache.py --json benchmarks/results/compile_cache.json

Recorded per run: the call's seconds, the whole process's, and what the cache answered
(``purehr.run.compiled.compile_cache.COUNTS``). docs/protocol.md, "Compilation", has the reading.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import load_averages, write_json

from purehr.cli.arguments import HelpFormatter, positive_int
from purehr.run.store.machine import environment_description

ROOT = Path(__file__).resolve().parents[1]

# one fresh process: the cache as argv[1] says ("off" or a folder), then the seed API's call
PROCESS = """
import json, sys, time
started = time.perf_counter()
import purehr
from purehr.run.compiled.compile_cache import COUNTS
purehr.use_compile_cache(None if sys.argv[1] == "off" else sys.argv[1])
from purehr import HRWritingEnv, train_hr_ppo
begun = time.perf_counter()
train_hr_ppo(HRWritingEnv(hrv_dim=8), timesteps=5000)
call = time.perf_counter() - begun
print(json.dumps({"call_s": call, "process_s": time.perf_counter() - started, **COUNTS.since((0, 0, 0.0))}))
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--repeats", type=positive_int, default=2, help="rounds of off, cold, warm")
    parser.add_argument("--json", type=Path, default=None, help="write the record here")
    return parser


def one_process(cache: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_COMPILATION_CACHE")}
    completed = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", PROCESS, cache], capture_output=True, text=True, env=env, cwd=ROOT
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the seed API's process failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    before = os.getloadavg()
    runs = []
    with tempfile.TemporaryDirectory(prefix="purehr-xla-") as scratch:
        for repeat in range(args.repeats):
            folder = str(Path(scratch) / f"round_{repeat}")
            for mode, cache in (("off", "off"), ("cold", folder), ("warm", folder)):
                runs.append({"mode": mode, "round": repeat, **one_process(cache)})
                print(json.dumps(runs[-1]), flush=True)
    medians = {
        mode: statistics.median(r["call_s"] for r in runs if r["mode"] == mode) for mode in ("off", "cold", "warm")
    }
    print(
        f"train_hr_ppo, median call: off {medians['off']:.2f} s, cold {medians['cold']:.2f} s, "
        f"warm {medians['warm']:.2f} s ({medians['off'] / medians['warm']:.2f}x)"
    )
    record = {
        "command": ["python", "benchmarks/compile_cache.py", *(sys.argv[1:] if argv is None else argv)],
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": environment_description(),
        "runs": runs,
        "median_call_s": medians,
        **load_averages(before),
    }
    write_json(args.json, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
