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
    python benchmarks/_hlo_thunks.py --ppo-purejaxrl PATH  # PPO beside PureJaxRL's ppo.py, by part

``--ppo-purejaxrl``: PureJaxRL's unmodified ``ppo.py`` (PATH as for ``peers.py --purejaxrl``)
and purehr's ``make_train`` on its CartPole-v1 config, 5 seeds vmapped, each program compiled
in a process of its own (jit caches a traced function's source locations: a second program
would inherit the first's). ``parts`` splits one update's thunks by what they do, read from
each instruction's stack frames (``frame_chains``): ``PPO_PARTS`` and ``PUREJAXRL_PARTS``.
"""

from __future__ import annotations

import functools
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


def heaviest_entry_loop(hlo: str) -> str:
    """The body of the entry computation's ``while`` whose one trip runs the most thunks."""
    table = computations(hlo)
    bodies = [_called(line, "body") for line in table["ENTRY"] if _kind(line) == "while"]
    return max(bodies, key=lambda body: sum(kinds(hlo, body, table).values()))


def frame_chains(hlo: str) -> dict[int, list[tuple[str, str, int]]]:
    """Stack frame id -> its (file, function, line) frames, innermost first: the optimised
    HLO's ``FileNames``/``FunctionNames``/``FileLocations``/``StackFrames`` tables, which an
    instruction names by ``stack_frame_id=N``. A frame's printed ``parent_frame_id`` is its
    parent's id + 1 (0: none)."""

    def table(name: str) -> str:
        found = re.search(r"^" + name + r"\n(.*?)(?:\n[A-Z]\w+\n|\Z)", hlo, re.M | re.S)
        return found.group(1) if found else ""

    files = dict(re.findall(r'^(\d+) "(.*)"$', table("FileNames"), re.M))
    functions = dict(re.findall(r'^(\d+) "(.*)"$', table("FunctionNames"), re.M))
    locations = {
        number: (files[file], functions[function], int(line))
        for number, file, function, line in re.findall(
            r"^(\d+) \{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", table("FileLocations"), re.M
        )
    }
    frames = {
        int(number): (locations[location], int(parent) - 1)
        for number, location, parent in re.findall(
            r"^(\d+) \{file_location_id=(\d+) parent_frame_id=(\d+)", table("StackFrames"), re.M
        )
    }
    chains: dict[int, list[tuple[str, str, int]]] = {}
    for number in frames:
        chain, at = [], number
        while at in frames and len(chain) < 64:
            location, parent = frames[at]
            chain.append(location)
            at = parent if parent != at else 0
        chains[number] = chain
    return chains


HASH_LOOP = re.compile(r'op_name="[^"]*(?:threefry|_uniform|_gumbel|_bits|random)[^"]*/while"')
"""A ``while`` of JAX's threefry hash: on the CPU its rounds are a rolled loop of 5 trips
(``jax._src.prng``, whatever the batch); a GPU runs them unrolled in one kernel."""


SCAN_BOOKKEEPING = re.compile(r'op_name="[^"]*(?:dynamic_(?:update_)?index_in_dim[^"]*|/while/body/add)"')
"""A scan's own work in its body (stacking its outputs, slicing its inputs, its counter): JAX
traces those helpers once and reuses the trace, so their frames name whichever scan traced them
first; they belong to their loop's part."""


def _part_of(line: str, chains: dict, rules: list[tuple[str, str]]) -> str | None:
    """The part of the first rule whose pattern matches ``file:function:line`` of a frame of
    ``line``'s chain, innermost frame first; None without a match (or without a frame)."""
    frame = re.search(r"stack_frame_id=(\d+)", line)
    for file, function, line in chains.get(int(frame.group(1)), []) if frame else []:
        where = f"{file.rsplit('/', 1)[-1]}:{function}:{line}"
        for pattern, part in rules:
            if re.search(pattern, where):
                return part
    return None


def parts(hlo: str, rules: list[tuple[str, str]], name: str | None = None) -> dict[str, int]:
    """Thunks of one run of ``name`` (default: the body of the longest ``while``, one update)
    by part: an instruction's own part by ``rules`` (``(regex on "file:function:line", part)``,
    innermost frame first), else (a copy: no frame; ``SCAN_BOOKKEEPING``) its loop's part, the
    commonest among the loop body's own instructions other than the ``while``'s call site (else
    the call site's), else ``"other"``. Every thunk of a
    threefry hash loop is "<the loop's own part>: hash loops"."""
    table, chains = computations(hlo), frame_chains(hlo)
    if name is None:
        loops = [line for lines in table.values() for line in lines if _kind(line) == "while"]
        name = _called(max(loops, key=_trips), "body")
    counts: dict[str, int] = {}

    def own_part(line: str) -> str | None:
        return None if SCAN_BOOKKEEPING.search(line) else _part_of(line, chains, rules)

    def commonest(computation: str, site: str | None) -> str | None:
        found = [own_part(line) for line in table[computation] if _kind(line) not in NOT_RUN]
        found = [part for part in found if part not in (None, site)]
        return max(set(found), key=found.count) if found else site

    def walk(computation: str, times: int, fallback: str | None, forced: str | None = None) -> None:
        for line in table[computation]:
            kind = _kind(line)
            if kind in NOT_RUN:
                continue
            own = forced or own_part(line) or fallback or "other"
            if kind == "while":
                body, trips = _called(line, "body"), _trips(line)
                hashing = forced or (f"{own}: hash loops" if HASH_LOOP.search(line) else None)
                inner = commonest(body, _part_of(line, chains, rules)) or fallback
                walk(body, times * trips, inner, hashing)
                walk(_called(line, "condition"), times * trips, inner, hashing)
                own = hashing or inner or own  # the while itself: its loop's
            elif kind == "conditional":
                branches = re.findall(r"%?([\w.\-]+)", re.search(r"branch_computations=\{([^}]*)\}", line).group(1))
                walk(max(branches, key=lambda b: sum(kinds(hlo, b, table).values())), times, fallback, forced)
            elif kind == "call":
                walk(_called(line, "to_apply"), times, fallback, forced)
                continue
            counts[own] = counts.get(own, 0) + times

    walk(name, 1, None)
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def _lines(source: str, first: str, last: str) -> str:
    """A regex of the line numbers of ``source`` from the line holding ``first`` to the one
    before the line holding ``last`` (the last line of the file without it)."""
    lines = source.splitlines()
    start = next(number for number, line in enumerate(lines, 1) if first in line)
    stop = next((number for number, line in enumerate(lines, 1) if number > start and last in line), len(lines) + 1)
    return "(" + "|".join(str(number) for number in range(start, stop)) + ")"


def ppo_parts() -> list[tuple[str, str]]:
    """purehr's PPO (``purehr/algorithms/ppo/algorithm.py``) by function, and the update's
    blocks by line (found by their first statements): ``parts``'s rules."""
    import inspect

    from purehr.algorithms.ppo import algorithm

    source = inspect.getsource(algorithm)
    update = r"algorithm\.py:make_ppo\.<locals>\.update(\.<locals>\.\S+)?:"
    statistics = _lines(source, "(config.num_epochs * num_minibatches)", "params = update_observation_statistics")
    divergence = _lines(source, "# --- divergence", "metrics = dict(stats")
    metrics = _lines(source, "metrics = dict(stats", "return next_runner, metrics")
    return [
        (r"rollout_metrics\.py:|algorithm\.py:explained_variance:", "metrics"),
        (update + statistics + "$", "metrics"),
        (update + metrics + "$", "metrics"),
        (r"algorithm\.py:(diverged_at_update|optimizer_steps):", "divergence check"),
        (update + divergence + "$", "divergence check"),
        (r"(bootstrap\.py:values_where|policy_core\.py:FeedForwardCore\.next_values)", "truncation bootstrap"),
        (r"gae\.py:", "GAE"),
        (r"rewards\.py:", "training rewards"),
        (r"algorithm\.py:.*minibatch_step:", "minibatch gradient step"),
        (r"algorithm\.py:.*\.epoch:", "epoch outside its minibatches (shuffle)"),
        (r"algorithm\.py:.*rollout_randomness:", "rollout's draws before its scan"),
        (r"algorithm\.py:.*env_step:", "rollout step"),
        (r"algorithm\.py:make_ppo\.<locals>\.rollout:", "rollout outside its scan"),
        (r"networks\.py:update_observation_statistics:", "observation statistics"),
        (r"algorithm\.py:make_ppo\.<locals>\.update:", "update: advantage normalisation, batch, optimiser"),
    ]


PUREJAXRL_PARTS = [
    (r"ppo\.py:.*_env_step", "rollout step"),
    (r"ppo\.py:.*(_get_advantages|_calculate_gae)", "GAE"),
    (r"ppo\.py:.*(_update_minbatch|_loss_fn)", "minibatch gradient step"),
    (r"ppo\.py:.*_update_epoch", "epoch outside its minibatches (shuffle)"),
    (r"ppo\.py:.*_update_step", "update: advantage normalisation, batch, optimiser"),
]
"""PureJaxRL's ``ppo.py`` by its nested functions."""


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


def ppo_program(library: str, folder: str, updates: int = 8) -> dict:
    """``per_update`` of PureJaxRL's ``ppo.py`` (``library`` "purejaxrl") or purehr's PPO
    ("purehr") on PureJaxRL's CartPole-v1 config, 5 seeds vmapped, and one update by part
    (``parts``). PureJaxRL's program keeps its train state only (``peers.py``'s; its metrics
    are then compiled away); purehr's returns its metrics as ``make_train`` does."""
    from pathlib import Path

    import jax
    from _purejaxrl_peer import PUREJAXRL_CONFIGS, load_purejaxrl, purejaxrl_as_purehr

    from purehr.algorithms.trainer import make_train
    from purehr.engine.seeds import keys_for_seeds
    from purehr.envs.gymnax_adapter import GymnaxEnv

    config = PUREJAXRL_CONFIGS["CartPole-v1"]
    batch = config["NUM_ENVS"] * config["NUM_STEPS"]
    if library == "purejaxrl":
        load_purejaxrl(Path(folder))
        import ppo

        keys = jax.random.split(jax.random.PRNGKey(0), 5)

        def compile_at(n):
            train = ppo.make_train(dict(config, TOTAL_TIMESTEPS=n * batch))
            return jax.jit(jax.vmap(lambda key: train(key)["runner_state"][0])).lower(keys).compile()

        rules = PUREJAXRL_PARTS
    else:

        def compile_at(n):
            settings = purejaxrl_as_purehr("CartPole-v1").replace(total_timesteps=n * batch)
            return make_train(settings, GymnaxEnv("CartPole-v1")).jitted.lower(keys_for_seeds(range(5)), None).compile()

        rules = ppo_parts()
    compile_at = functools.lru_cache(compile_at)  # the program of 2n updates serves twice
    counted = per_update(compile_at, updates)
    hlo = compile_at(2 * updates).as_text()
    body = heaviest_entry_loop(hlo)  # the scan over updates: its rollout and GAE loops have more trips
    counted["update_body_by_kind"] = dict(sorted(kinds(hlo, body).items(), key=lambda item: -item[1]))
    counted["update_body_by_part"] = parts(hlo, rules, body)
    return counted


def main() -> None:
    import json
    import os
    import subprocess
    import sys

    os.environ.setdefault("PJRT_NPROC", "1")
    sys.path.insert(0, os.path.dirname(__file__))
    arguments = sys.argv[1:]
    if "--ppo-program" in arguments:  # one library's program, in a process of its own
        library, folder = arguments[arguments.index("--ppo-program") + 1 :][:2]
        print(json.dumps(ppo_program(library, folder)))
        return
    if "--ppo-purejaxrl" in arguments:
        folder = arguments[arguments.index("--ppo-purejaxrl") + 1]
        counted = {
            library: json.loads(
                subprocess.run(
                    [sys.executable, __file__, "--ppo-program", library, folder],
                    check=True,
                    capture_output=True,
                    text=True,
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            for library in ("purejaxrl", "purehr")
        }
        print(json.dumps(counted, indent=1))
        return
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
