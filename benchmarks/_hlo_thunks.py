"""Thunks per update of a compiled training program: what the CPU runs one after another, read
from the optimised HLO (``compiled.as_text()``).

Every instruction of a computation the CPU executes is one thunk (a fusion, a custom call, a
copy, a sort, ...), except the bookkeeping ones (``NOT_RUN``); a ``while`` is its body and
condition times its known trip count; a ``conditional`` its larger branch; a ``call`` its
callee. Fused computations are inside their fusion's one thunk. The count of a program at n
updates and at 2n updates differ by n updates' thunks, so ``per_update`` needs no knowledge
of how each library nests its loops.

    python benchmarks/_hlo_thunks.py                # rejax's SAC and purehr's on rejax's Pendulum config
    python benchmarks/_hlo_thunks.py --purehr-only  # purehr's alone (a change to purehr's SAC)
"""

from __future__ import annotations

import re

NOT_RUN = {"parameter", "get-tuple-element", "tuple", "constant", "bitcast", "after-all", "opt-barrier"}
_HEADER = re.compile(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = (?:\([^)]*\)|\S+) ([a-z][\w\-]*)\(")


def computations(hlo: str) -> dict[str, list[str]]:
    """Computation name -> its instruction lines; the entry is also under ``"ENTRY"``."""
    found: dict[str, list[str]] = {}
    current = None
    for line in hlo.splitlines():
        header = _HEADER.match(line)
        if header and not line.startswith(" "):
            current = header.group(1)
            found[current] = []
            if line.startswith("ENTRY"):
                found["ENTRY"] = found[current]
        elif line.startswith("}"):
            current = None
        elif current is not None and " = " in line:
            found[current].append(line)
    return found


def _kind(line: str) -> str:
    match = _INSTRUCTION.match(line)
    op = match.group(1) if match else ""
    if op == "fusion":
        kind = re.search(r"kind=(\w+)", line)
        return f"fusion:{kind.group(1) if kind else '?'}"
    return op


def _called(line: str, key: str) -> str:
    return re.search(key + r"=%?([\w.\-]+)", line).group(1)


def _trips(line: str) -> int:
    trips = re.search(r'"known_trip_count":\{"n":"(\d+)"', line)
    return int(trips.group(1)) if trips else 1


def kinds(hlo: str, name: str = "ENTRY", table: dict | None = None) -> dict[str, int]:
    """Thunks by kind (``fusion:kLoop``, ``fusion:kCustom`` (the matmuls), ``dot``, ``copy``,
    ``while``, ...) that one run of computation ``name`` executes, loops times their trips."""
    table = computations(hlo) if table is None else table
    counts: dict[str, int] = {}

    def walk(computation: str, times: int) -> None:
        for line in table[computation]:
            kind = _kind(line)
            if kind in NOT_RUN:
                continue
            if kind == "while":
                walk(_called(line, "body"), times * _trips(line))
                walk(_called(line, "condition"), times * _trips(line))
            elif kind == "conditional":
                branches = re.findall(r"%?([\w.\-]+)", re.search(r"branch_computations=\{([^}]*)\}", line).group(1))
                walk(max(branches, key=lambda b: sum(kinds(hlo, b, table).values())), times)
            elif kind == "call":
                walk(_called(line, "to_apply"), times)
                continue
            counts[kind] = counts.get(kind, 0) + times

    walk(name, 1)
    return counts


def thunks(hlo: str) -> int:
    """The thunks one run of the entry computation executes (loops unrolled by trip count)."""
    return sum(kinds(hlo).values())


def update_body(hlo: str) -> dict[str, int]:
    """``kinds`` of the body of the longest-running ``while`` (the scan over updates): one update."""
    table = computations(hlo)
    loops = [line for lines in table.values() for line in lines if _kind(line) == "while"]
    longest = max(loops, key=_trips)
    return kinds(hlo, _called(longest, "body"), table)


def per_update(compile_at, updates: int) -> dict:
    """``compile_at(n)``: the compiled program of n updates. Thunks of n and 2n updates, and per
    update their difference / n."""
    small, large = (compile_at(n).as_text() for n in (updates, 2 * updates))
    counts = [thunks(small), thunks(large)]
    body = update_body(large)
    return {
        "updates": [updates, 2 * updates],
        "thunks": counts,
        "per_update": (counts[1] - counts[0]) / updates,
        "update_body_by_kind": dict(sorted(body.items(), key=lambda item: -item[1])),
    }


def main() -> None:
    import json
    import os
    import sys

    os.environ.setdefault("PJRT_NPROC", "1")
    sys.path.insert(0, os.path.dirname(__file__))
    import jax
    from _rejax_offpolicy_peer import SAC_CONFIGS, rejax_sac_as_purehr

    from purehr.algorithms.trainer import make_train
    from purehr.engine.seeds import keys_for_seeds
    from purehr.envs.gymnax_adapter import GymnaxEnv

    settings = SAC_CONFIGS["Pendulum-v1"]
    keys = jax.random.split(jax.random.PRNGKey(0), 5)

    def rejax_at(n):
        import rejax

        algo = rejax.SAC.create(**{**settings, "total_timesteps": 512 + n, "eval_freq": 512 + n})
        algo = algo.replace(eval_callback=lambda a, ts, rng: jax.numpy.zeros(()), skip_initial_evaluation=True)
        return jax.jit(jax.vmap(lambda key: algo.train(key)[0])).lower(keys).compile()

    def purehr_at(n):
        config = rejax_sac_as_purehr(settings).replace(total_timesteps=512 + n)
        return make_train(config, GymnaxEnv("Pendulum-v1")).jitted.lower(keys_for_seeds(range(5)), None).compile()

    if "--purehr-only" in sys.argv[1:]:
        print(json.dumps({"purehr": per_update(purehr_at, 512)}))
    else:
        print(json.dumps({"rejax-sac": per_update(rejax_at, 512), "purehr": per_update(purehr_at, 512)}))


if __name__ == "__main__":
    main()
