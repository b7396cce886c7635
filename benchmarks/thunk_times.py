"""Where a compiled training program's time goes on the CPU, measured per update: traced runs
(``jax.profiler.trace``), each XLA thunk's trace event matched to its instruction in the
optimised HLO and summed by kind (``fusion:kCustom``, ``dot``, ``custom-call``: matmuls and
library calls; ``fusion:kLoop``: elementwise work and reductions; ``copy``, ``sort``, ...) and
by instruction. ``_hlo_thunks.py`` counts thunks; this times them.

    nice python benchmarks/thunk_times.py --pair sac --json /tmp/sac_times.json     # rejax's SAC beside purehr's
    nice python benchmarks/thunk_times.py --pair pqn --purejaxql PATH --json /tmp/pqn_times.json
    nice python benchmarks/thunk_times.py --pair pqn --purejaxql PATH --env Asterix-MinAtar --budgets 2 4

One update's time is the difference of two budgets' traces divided by the updates between them,
so what runs once per call (and SAC's 256 warm-up updates, no gradient step in either library)
cancels: ``sac`` is ``peers_sac_cpu.py``'s pair (rejax's published Pendulum config, 300 and 400
steps per seed), ``pqn`` is ``peers.py``'s ``purejaxql:ENV`` pair (``--env``: CartPole-v1, 4 and
8 updates of 32 x 64 steps; Asterix-MinAtar, updates of 128 x 32 steps, ``--budgets 2 4``).
Both: 5 seeds vmapped, ``PJRT_NPROC=1``, best of ``--repeats`` traces per budget.
A trace keeps about 460,000 events, so the budgets are small (purejaxql runs ~67,000 thunks per
update); a container (``while``, ``conditional``, ``call``) is not counted, its thunks are.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import os
import re
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("PJRT_NPROC", "1")
sys.path.insert(0, os.path.dirname(__file__))

import jax  # noqa: E402
from _common import write_json  # noqa: E402
from _hlo_thunks import NOT_RUN, _kind, computations  # noqa: E402
from _purejaxql_peer import SCRIPTS  # noqa: E402

from purehr.algorithms.trainer import make_train  # noqa: E402
from purehr.cli.arguments import HelpFormatter, output_file, positive_int  # noqa: E402
from purehr.engine.seeds import keys_for_seeds  # noqa: E402
from purehr.envs.gymnax_adapter import GymnaxEnv  # noqa: E402

CONTAINERS = {"while", "conditional", "call"}
_NAMED = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (\S+) ")
_OP_NAME = re.compile(r'op_name="([^"]+)"')


def instructions(hlo: str) -> dict[str, tuple[str, str, str]]:
    """Instruction name -> (kind, result shape, op_name) for every thunk-running instruction."""
    found = {}
    for lines in computations(hlo).values():
        for line in lines:
            named, kind = _NAMED.match(line), _kind(line)
            if named and kind not in NOT_RUN and kind not in CONTAINERS:
                op_name = _OP_NAME.search(line)
                found[named.group(1)] = (kind, named.group(2), op_name.group(1) if op_name else "")
    return found


def traced_ms(call, hlo: str, repeats: int) -> dict[tuple[str, str, str], float]:
    """{(kind, shape, op_name): ms} of the fastest of ``repeats`` traced ``call()``s (the thunks'
    own durations summed; instruction names differ between programs, these keys do not)."""
    named = instructions(hlo)
    jax.block_until_ready(call())  # the first call, untraced
    best = None
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as folder:
            with jax.profiler.trace(folder, create_perfetto_trace=True):
                jax.block_until_ready(call())
            (path,) = glob.glob(os.path.join(folder, "**", "perfetto_trace.json.gz"), recursive=True)
            with gzip.open(path) as trace:
                events = json.load(trace)
        events = events["traceEvents"] if isinstance(events, dict) else events
        times: dict[tuple[str, str, str], float] = {}
        for event in events:
            key = named.get(event.get("name", ""))
            if key is not None and event.get("ph") == "X":
                times[key] = times.get(key, 0.0) + event.get("dur", 0.0) * 1e-3
        if best is None or sum(times.values()) < sum(best.values()):
            best = times
    return best


def per_update(program_at, budgets: tuple[int, int], updates_between: int, repeats: int) -> dict:
    """One update's ms by kind and by instruction: the difference of the two budgets' traces."""
    low, high = (traced_ms(*program_at(budget), repeats) for budget in budgets)
    difference = {key: (high.get(key, 0.0) - low.get(key, 0.0)) / updates_between for key in set(low) | set(high)}
    by_kind: dict[str, float] = {}
    for (kind, _, _), ms in difference.items():
        by_kind[kind] = by_kind.get(kind, 0.0) + ms
    heaviest = sorted(difference.items(), key=lambda item: -item[1])[:25]
    return {
        "ms_per_update": round(sum(difference.values()), 4),
        "ms_by_kind": {kind: round(ms, 4) for kind, ms in sorted(by_kind.items(), key=lambda item: -item[1])},
        "heaviest": [
            {"ms": round(ms, 4), "kind": kind, "shape": shape, "op": op[-120:]} for (kind, shape, op), ms in heaviest
        ],
    }


def sac_pair() -> dict:
    """{library: steps per seed -> (call, hlo)}: rejax's SAC and purehr's (``peers_sac_cpu.py``'s)."""
    from peers_sac_cpu import compiled_program

    def program_at(library):
        def at(steps):
            call, program, _ = compiled_program(library, steps, 5)
            return call, program.as_text()

        return at

    return {library: program_at(library) for library in ("rejax-sac", "purehr")}


def pqn_pair(folder: Path, name: str) -> dict:
    """{library: updates -> (call, hlo)}: purejaxql's PQN and purehr's (``peers.py``) on its
    config ``name``."""
    from _purejaxql_peer import PurejaxqlRun, compose_config, load_purejaxql, purejaxql_as_purehr

    load_purejaxql(folder)
    published = compose_config(folder, name)
    steps_per_update = published["NUM_ENVS"] * published["NUM_STEPS"]

    def purejaxql_at(updates):
        run = PurejaxqlRun(folder, name, 5, None, budget=steps_per_update * updates)
        return (lambda: run.compiled(run.keys)), run.compiled.as_text()

    def purehr_at(updates):
        config = purejaxql_as_purehr(compose_config(folder, name, steps_per_update * updates))
        keys = keys_for_seeds(range(5))
        program = make_train(config, GymnaxEnv(name)).jitted.lower(keys, None).compile()
        return (lambda: program(keys, None)), program.as_text()

    return {"purejaxql": purejaxql_at, "purehr": purehr_at}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    parser.add_argument("--pair", choices=("sac", "pqn"), default="sac", help="which two programs")
    parser.add_argument(
        "--purejaxql", type=Path, default=None, help="purejaxql's folder (--pair pqn; benchmarks/README.md)"
    )
    parser.add_argument(
        "--env",
        choices=tuple(SCRIPTS),
        default=None,
        help="purejaxql's config, --pair pqn only (default: CartPole-v1)",
    )
    parser.add_argument(
        "--budgets",
        type=positive_int,
        nargs=2,
        default=None,
        metavar=("LOW", "HIGH"),
        help="the two budgets traced: steps per seed (sac) or updates (pqn); default 300 400 (sac), 4 8 (pqn)",
    )
    parser.add_argument("--repeats", type=positive_int, default=2, help="traces per budget (the fastest counts)")
    parser.add_argument("--json", type=output_file, default=None, help="where to write the record (default: nowhere)")
    return parser


def main() -> None:
    args = build_parser().parse_args()
    if args.pair == "pqn" and args.purejaxql is None:
        raise SystemExit("--pair pqn needs --purejaxql PATH: the folder holding pqn_gymnax.py (benchmarks/README.md)")
    if args.pair == "sac" and args.env is not None:
        raise SystemExit(f"--env {args.env}: purejaxql's configs are for --pair pqn; --pair sac is rejax's Pendulum")
    budgets = tuple(args.budgets or ((300, 400) if args.pair == "sac" else (4, 8)))
    if budgets[1] <= budgets[0]:
        raise SystemExit(f"--budgets {budgets[0]} {budgets[1]}: expected LOW < HIGH")
    pair = sac_pair() if args.pair == "sac" else pqn_pair(args.purejaxql, args.env or "CartPole-v1")
    between = budgets[1] - budgets[0]
    record = {"command": " ".join(["python", *sys.argv]), "budgets": budgets, "updates_between": between}
    record["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
    for library, program_at in pair.items():
        record[library] = per_update(program_at, budgets, between, args.repeats)
    record["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    record["jax"] = jax.__version__
    print(json.dumps(record, indent=1))
    write_json(args.json, record)


if __name__ == "__main__":
    main()
