"""Shared by the tests: JAX's persistent compilation cache, the tiny protocol configuration
several files train with, and a synthetic run directory written with the recorder's columns.

The cache directory is set here, before anything imports JAX, so every compilation of the
session (and of every subprocess it starts, which inherits the environment) is written to
and read from one directory: a program compiled again (a fresh ``jit`` of the same train
function, a script in a subprocess) is loaded instead of compiled. Programs with host
callbacks (checkpoints, progress) are never cached by JAX: those are shared in-process
(``run/program.py``'s program cache, the session fixture below)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

# one copy of this module per process: studies/tests/conftest.py re-exports it under this name
sys.modules.setdefault("purehr_test_suite", sys.modules[__name__])

_OWN_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:  # a given directory (e.g. one CI keeps between runs) is used as it is
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="purehr-jax-cache-")
# the default (1 s) skips most programs of these tiny configurations; 0.2 s keeps the
# per-op eager compilations (milliseconds each) out of the cache
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0.2")
# XLA's CPU backend at optimisation level 1, and its fusions emitted the older way
# (--xla_cpu_use_fusion_emitters=false): the suite's programs are tiny, so compiling is most of
# their cost; both compile faster and run as fast. The training programs compile at level 0
# (PUREHR_XLA_TRAINING_LEVEL): about half their compile again, for a slower run that only a test
# training long pays (``at_level_1``). Each rounds otherwise than the default, so every
# bit-identity the suite checks is between runs made under the same settings (a subprocess
# inherits them). Measured: benchmarks/README.md, "The test suite's compilations".
# PUREHR_TEST_XLA_DEFAULT=1 tests under XLA's and purehr's defaults instead.
SUITE_XLA_FLAGS = "--xla_backend_optimization_level=1 --xla_cpu_use_fusion_emitters=false"
SUITE_TRAINING_LEVEL = "0"
if os.environ.get("PUREHR_TEST_XLA_DEFAULT") != "1":
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {SUITE_XLA_FLAGS}".strip()
    os.environ.setdefault("PUREHR_XLA_TRAINING_LEVEL", SUITE_TRAINING_LEVEL)
# the baselines a run evaluates are cached by their definition (purehr.run.baselines); the
# tests keep theirs in a fresh folder, never in the user's ~/.cache/purehr
if "PUREHR_CACHE_DIR" not in os.environ:
    os.environ["PUREHR_CACHE_DIR"] = tempfile.mkdtemp(prefix="purehr-cache-")

from purehr.run.compiled.compile_cache import use_compile_cache  # noqa: E402

# the session keeps its programs as the scripts it starts do (purehr's entries, checked by key):
# a program compiled here and in a subprocess is compiled once
use_compile_cache()
from purehr.run.store.columns import checkpoint_columns, update_columns  # noqa: E402  (after the cache setting)
from purehr.run.store.files import read_csv, write_csv  # noqa: E402
from purehr.tasks import HRV_DEFAULTS, get_task  # noqa: E402

# hrv in miniature for the curriculum and task-setup tests: 10 updates of 16 envs x 8 steps.
HRV_TINY = HRV_DEFAULTS.replace(
    num_envs=16,
    num_steps=8,
    minibatch_size=64,
    num_epochs=1,
    actor_hidden=(16,),
    critic_hidden=(16,),
    total_timesteps=16 * 8 * 10,
)

# The protocol in miniature (tests/test_run.py, test_resume_multitask.py, test_progress.py):
# batch 4 x 128 = 512, checkpoint targets every 3,000 steps, 16,384 steps = 32 updates; a
# constant learning rate, so a run can be extended bit-identically. A suite's task trains beside
# the built-in two, so every protocol test (kill and resume, restore, corruption, the end-of-run
# report) covers an environment nobody here wrote.
PROTOCOL_TASKS = ["swing", "hrv", "gymnax:CartPole-v1"]
PROTOCOL_SEEDS = [0, 1]
PROTOCOL_SMALL = dict(
    total_timesteps=16384,
    num_envs=4,
    num_steps=128,
    minibatch_size=128,
    num_epochs=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    checkpoint_interval=3000,
    eval_episodes=4,
    full_eval_interval=2,
    quick_eval_episodes=2,
    anneal_lr=False,
)
PROTOCOL_CLI = [
    "--tasks",
    *PROTOCOL_TASKS,
    "--steps",
    "16384",
    "--num-envs",
    "4",
    "--num-steps",
    "128",
    "--minibatch-size",
    "128",
    "--num-epochs",
    "2",
    "--actor-hidden",
    "16",
    "--critic-hidden",
    "16",
    "--checkpoint-interval",
    "3000",
    "--eval-episodes",
    "4",
    "--full-eval-interval",
    "2",
    "--quick-eval-episodes",
    "2",
    "--anneal-lr",
    "false",
]
"""PROTOCOL_SMALL as scripts/train_all_seeds.py flags."""


def protocol_configs() -> dict:
    """Each protocol task's default config with PROTOCOL_SMALL applied."""
    return {task: get_task(task).default_config.replace(**PROTOCOL_SMALL) for task in PROTOCOL_TASKS}


def train_all_seeds_script():
    """``scripts/train_all_seeds.py`` as a module (its ``main``, ``build_parser``), imported as a
    user's ``python scripts/train_all_seeds.py`` would find it, once per worker."""
    scripts = str(Path(__file__).resolve().parents[1] / "scripts")
    sys.path.insert(0, scripts)
    try:
        import train_all_seeds as script
    finally:
        sys.path.remove(scripts)
    return script


@contextlib.contextmanager
def at_level_1():
    """Training programs compiled inside at XLA level 1, as the rest of the suite's programs: for
    a test whose training run, not its compile, is most of its cost (a learning test), or that
    compares two different training programs bit for bit (level 0 keeps fewer of the identities
    that optimised programs share). A subprocess started inside inherits it."""
    if os.environ.get("PUREHR_XLA_TRAINING_LEVEL") != SUITE_TRAINING_LEVEL:
        yield  # a level the person running the suite chose
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PUREHR_XLA_TRAINING_LEVEL", "1")
        yield


def ctrl_c_from_a_callback(recorder, timeout_s: float = 120.0) -> None:
    """A terminal's Ctrl-C sent from inside the recorder's ``on_update``: SIGINT to this process,
    then wait until the main thread has heard it (``recorder.stop_requested``). The program waits
    for its callback, so it stops at the very next update; without the wait, a loaded machine
    ran a small run's remaining updates before the main thread was scheduled to hear the signal
    (CI, stop 54: "DID NOT RAISE RunInterrupted")."""
    os.kill(os.getpid(), signal.SIGINT)
    deadline = time.monotonic() + timeout_s
    while not recorder.stop_requested and time.monotonic() < deadline:
        time.sleep(0.01)


COMPILE_REPORT = os.environ.get("PUREHR_TEST_COMPILE_REPORT")
"""A file to which every XLA compilation of this process is appended as one line, ``pid test
module fingerprint source cpu_s wall_s`` (tab-separated; ``source``: ``compiled``, or ``loaded``
from JAX's persistent cache). ``test``: the node id whose setup, call or
teardown compiled it (a module fixture's programs count against the first test using it);
``fingerprint``: of the program's text without locations, so one program compiled twice in a
process shows one fingerprint twice; ``cpu_s``: the process's CPU seconds meanwhile (robust to a
shared machine's load, unlike ``wall_s``).
Subprocesses (killed-run children, scripts) are not counted. Off unless set: how the suite's
compilations are counted per file (see benchmarks/README.md, "The test suite's compilations")."""
_CURRENT_TEST = ["(collection)"]

if COMPILE_REPORT:
    import hashlib

    import jax._src.compiler as _jax_compiler  # the one place every backend compilation passes
    import jax.monitoring

    _compile_or_get_cached = _jax_compiler.compile_or_get_cached
    _CACHE_HITS = [0]

    def _count_cache_hit(event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            _CACHE_HITS[0] += 1

    jax.monitoring.register_event_listener(_count_cache_hit)

    def _reported_compile(backend, computation, *args, **kwargs):
        """jax's own compile_or_get_cached, timed, with a fingerprint of the program's text
        (locations left out): two equal fingerprints in one process are one program compiled twice."""
        start, cpu, hits = time.monotonic(), time.process_time(), _CACHE_HITS[0]
        executable = _compile_or_get_cached(backend, computation, *args, **kwargs)
        seconds, cpu = time.monotonic() - start, time.process_time() - cpu
        source = "loaded" if _CACHE_HITS[0] > hits else "compiled"
        text = computation.operation.get_asm(enable_debug_info=False)
        name = computation.operation.attributes["sym_name"]
        fingerprint = hashlib.sha256(text.encode()).hexdigest()[:12]
        with open(COMPILE_REPORT, "a") as report:
            report.write(
                f"{os.getpid()}\t{_CURRENT_TEST[0]}\t{name}\t{fingerprint}\t{source}\t{cpu:.3f}\t{seconds:.3f}\n"
            )
        return executable

    _jax_compiler.compile_or_get_cached = _reported_compile


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _CURRENT_TEST[0] = item.nodeid
    return (yield)


def pytest_runtest_setup(item):
    """Every test starts with Python's own Ctrl-C handler, as a terminal's process has: a
    library or an earlier test in the same worker that left SIGINT ignored (or handled) would
    otherwise make the Ctrl-C tests finish their run instead of stopping it (seen once under
    xdist: "assert 0 == 130" in every Ctrl-C test of one worker)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def protocol_reference(tmp_path_factory, worker_id) -> dict[str, Any]:
    """One uninterrupted PROTOCOL_SMALL run of both tasks and seeds (not rendered), trained once
    per session: test_run.py and test_resume_multitask.py compare against it and copy it (never
    change it). ``messages``: what it printed (progress on); ``warnings``: what it warned.

    Under xdist, once for all workers (a session fixture is otherwise one per worker: with
    ``-n 2 --dist loadfile`` the files using it land on both, and it was trained twice): the
    first worker to ask trains it into the run's shared temporary folder under a file lock, the
    other waits and reads it back (``shared_once``)."""
    return shared_once(tmp_path_factory, worker_id, "protocol_reference", _train_protocol_reference)


def _train_protocol_reference(folder: Path) -> dict[str, Any]:
    from purehr.run.protocol import train_all_seeds

    messages = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stderr(messages):
        warnings.simplefilter("always")
        summary = train_all_seeds(
            folder / "reference",
            tasks=PROTOCOL_TASKS,
            seeds=PROTOCOL_SEEDS,
            configs=protocol_configs(),
            progress=True,
        )
    return {"summary": summary, "messages": messages.getvalue(), "warnings": [str(w.message) for w in caught]}


def shared_once(tmp_path_factory, worker_id: str, name: str, train) -> dict[str, Any]:
    """``train(folder)`` (-> ``{"summary": RunSummary, "messages": str, "warnings": [str]}``)
    run once per test session. Without xdist it is called in a fresh temporary folder. Under
    xdist (pytest-xdist's documented pattern for session fixtures) the first worker holding
    the lock trains in a folder under the workers' common temporary root and saves what the
    others need beside the run (``_save_shared``); the others read that (``_load_shared``).
    The run directory is shared by every worker: tests copy it before changing anything."""
    if worker_id == "master":
        return train(tmp_path_factory.mktemp(name))
    from filelock import FileLock

    folder = tmp_path_factory.getbasetemp().parent / name
    with FileLock(f"{folder}.lock"):
        if (folder / "shared.json").exists():
            return _load_shared(folder)
        folder.mkdir()
        result = train(folder)
        _save_shared(folder, result)
        return result


def _save_shared(folder: Path, result: dict[str, Any]) -> None:
    """The summary's numbers, the messages and warnings as JSON; each task's final runners (a
    leading seed axis) as their leaves in pytree order, in one .npz per task (no pickle)."""
    import jax
    import numpy as np

    summary = result["summary"]
    assert summary.tracking is None, "a shared run keeps no dashboards open"
    numbers = {
        field: getattr(summary, field)
        for field in (
            "wall_time_s",
            "compile_s",
            "resumed_from",
            "seconds_in_checkpoint_callbacks",
            "seconds_in_evaluation",
            "seconds_writing_checkpoints",
        )
    }
    tasks = list(summary.final_runners)
    for index, task in enumerate(tasks):
        leaves = [np.asarray(leaf) for leaf in jax.tree.leaves(summary.final_runners[task])]
        np.savez(folder / f"final_runners_{index}.npz", *leaves)
    record = {"run_dir": str(summary.run_dir), "summary": numbers, "tasks": tasks}
    record.update(messages=result["messages"], warnings=result["warnings"])
    (folder / "shared.json").write_text(json.dumps(record))  # last: its presence says "complete"


def _load_shared(folder: Path) -> dict[str, Any]:
    """``_save_shared``'s record as the result ``train`` returned: the final runners rebuilt in
    the structure of each task's recorded setup (``TaskSetup.abstract_state``), every leaf
    checked for its shape and dtype against the seed-stacked abstract state."""
    import jax
    import numpy as np

    from purehr.run.compiled.task_setup import recorded_setup
    from purehr.run.outcome import RunSummary
    from purehr.run.store.run_dir import RunDirectory

    record = json.loads((folder / "shared.json").read_text())
    run_dir = Path(record["run_dir"])
    manifest = RunDirectory(run_dir).read_manifest()
    seeds = len(manifest["seeds"])
    final_runners = {}
    for index, task in enumerate(record["tasks"]):
        abstract = recorded_setup(manifest, task).abstract_state()
        expected, treedef = jax.tree.flatten(abstract)
        with np.load(folder / f"final_runners_{index}.npz", allow_pickle=False) as saved:
            leaves = [saved[f"arr_{i}"] for i in range(len(saved.files))]
        assert len(leaves) == len(expected), (task, len(leaves), len(expected))
        for leaf, like in zip(leaves, expected):
            assert leaf.shape == (seeds, *like.shape) and leaf.dtype == like.dtype, (task, leaf.shape, like)
        final_runners[task] = jax.tree.unflatten(treedef, [jax.numpy.asarray(leaf) for leaf in leaves])
    summary = RunSummary(run_dir=run_dir, final_runners=final_runners, **record["summary"])
    return {"summary": summary, "messages": record["messages"], "warnings": record["warnings"]}


def write_synthetic_run(
    root: Path,
    manifest: dict,
    updates: dict[tuple[str, int], list[dict]],
    checkpoints: dict[tuple[str, int], list[dict]],
) -> Path:
    """A run directory as ``train_all_seeds`` lays it out, from hand-chosen values: manifest.json
    and, per (task, seed), updates.csv and checkpoints.csv with the recorder's own columns
    (``update_columns``: the fixed ones, then the task's diagnostics; ``checkpoint_columns``:
    steps, ``eval_*``, paths, ``state_digest``). A row's keys beyond the fixed columns name the
    diagnostics / evaluation metrics; a column a row does not give is 0 (paths and digests: empty)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "manifest.json").write_text(json.dumps(manifest))
    for (task, seed), rows in updates.items():
        columns = update_columns([key for row in rows for key in row])
        write_csv(root / task / f"seed_{seed}" / "updates.csv", columns, [_filled(row, columns) for row in rows])
    for (task, seed), rows in checkpoints.items():
        names = list(dict.fromkeys(key[len("eval_") :] for row in rows for key in row if key.startswith("eval_")))
        columns = checkpoint_columns(names)
        write_csv(root / task / f"seed_{seed}" / "checkpoints.csv", columns, [_filled(row, columns) for row in rows])
    return root


def _filled(row: dict, columns: list[str]) -> dict:
    unknown = set(row) - set(columns)
    assert not unknown, f"columns the recorder does not write: {sorted(unknown)}"
    empty = {"checkpoint_path", "showcase_path", "state_digest"}
    return {column: row.get(column, "" if column in empty else 0) for column in columns}


REFERENCE_GROUP = (
    "tests/test_algorithm_entries.py",
    "tests/test_any_task_reports.py",
    "tests/test_export.py",
    "tests/test_interrupt.py",
    "tests/test_protocol_matrix.py",
    "tests/test_resume_multitask.py",
    "tests/test_run.py",
)
"""The files that use ``protocol_reference`` (test_protocol_matrix.py through the PPO row's
``shared_reference``): under ``--dist loadfile`` they are one work unit, run by one worker one
after the other (``pytest_xdist_make_scheduler``). Why: the reference is trained once and,
more costly, its program (host callbacks: never in JAX's persistent cache) is compiled once;
the tests that resume or extend a copy of the reference reuse it from run/program.py's
in-process cache. Spread over two workers, the second compiled it again (and, before the
reference was shared, trained it again too). test_suite_scheduling.py checks the list."""


def reference_group_scope(nodeid: str) -> str:
    """The work unit of a test under ``--dist loadfile``: its file, or one unit for REFERENCE_GROUP."""
    path = nodeid.split("::", 1)[0]
    return "protocol_reference group" if path in REFERENCE_GROUP else path


FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
"""Each test file's seconds in a whole run (its tests' setup, call and teardown), as last measured:
``PUREHR_TEST_FILE_SECONDS=tests/file_seconds.json pytest -n 2 --dist loadfile`` writes them
(merged over the entries the run did not reach). The work units go out in this order, longest
first: handed out last, a long file kept one worker busy while the other had nothing left
(benchmarks/README.md, "The order the suite's files go out in")."""
_RECORD_SECONDS = os.environ.get("PUREHR_TEST_FILE_SECONDS")
_SECONDS_RUN: dict[str, float] = {}


def pytest_collection_modifyitems(config, items):
    longest_first(items, json.loads(FILE_SECONDS.read_text()))


def longest_first(items: list, seconds: dict[str, float]) -> None:
    """Sorts ``items`` (tests, by ``nodeid``) by their work unit's seconds (a file's; REFERENCE_GROUP's
    summed), longest first; a file ``seconds`` does not list counts as longer than all it lists
    (its cost unknown: first is never worse than last). Stable: a file's tests keep their order."""
    unknown = sum(seconds.values()) + 1.0
    cost: dict[str, float] = {}
    for path in dict.fromkeys(item.nodeid.split("::", 1)[0] for item in items):
        unit = reference_group_scope(path)
        cost[unit] = cost.get(unit, 0.0) + seconds.get(path, unknown)
    items.sort(key=lambda item: -cost[reference_group_scope(item.nodeid)])


def pytest_runtest_logreport(report):
    if _RECORD_SECONDS and "PYTEST_XDIST_WORKER" not in os.environ:  # one process counts: the controller
        path = report.nodeid.split("::", 1)[0]
        _SECONDS_RUN[path] = _SECONDS_RUN.get(path, 0.0) + report.duration


@pytest.hookimpl(optionalhook=True)  # a run without xdist (-p no:xdist) has no such hook
def pytest_xdist_make_scheduler(config, log):
    """xdist's ``loadfile`` scheduler with REFERENCE_GROUP as one work unit, handing the units out
    in the collection's order (``pytest_collection_modifyitems``: longest first) rather than
    xdist's default (most tests first, which left the long files with few tests for the end)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    config.option.loadscopereorder = False

    class ReferenceGroupScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return reference_group_scope(nodeid)

    return ReferenceGroupScheduling(config, log)


def pytest_sessionfinish(session, exitstatus):
    if _RECORD_SECONDS and _SECONDS_RUN:
        path = Path(_RECORD_SECONDS)
        recorded = json.loads(path.read_text()) if path.exists() else {}
        recorded.update({name: round(seconds, 1) for name, seconds in _SECONDS_RUN.items()})
        path.write_text(json.dumps(dict(sorted(recorded.items())), indent=1) + "\n")
    if _OWN_CACHE:  # the process that made the folder (under xdist: the controller, after every worker)
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)


class KilledProcess:
    """``command`` in a subprocess, SIGKILLed (the trainer itself) once ``watched`` (a
    checkpoints.csv) holds ``rows`` rows; it trains on the other core while the test trains its
    reference. ``wait()`` returns what the child printed, waiting up to ``wait_s``; ``rows`` then
    says how many rows it had when killed (0: never). ``start=False``: started by ``start()``
    (``started_at_the_compile``)."""

    def __init__(self, command: list[str], watched: Path, rows: int = 3, start: bool = True, wait_s: float = 600):
        self.command, self.watched, self.watched_rows, self.wait_s = command, watched, rows, wait_s
        self.child = None
        self.rows = 0
        if start:
            self.start()

    def start(self) -> None:
        self.child = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.watcher = threading.Thread(target=self._kill_at, args=(self.watched, self.watched_rows))
        self.watcher.start()

    def _kill_at(self, csv: Path, rows: int) -> None:
        while self.child.poll() is None:
            if csv.exists() and len(read_csv(csv)) >= rows:
                self.child.send_signal(signal.SIGKILL)
                self.rows = len(read_csv(csv))
                break
            time.sleep(0.01)
        self.child.wait()

    def wait(self) -> str:
        self.watcher.join(timeout=self.wait_s)
        return self.child.stdout.read().decode()

    @property
    def returncode(self) -> int | None:
        return self.child.returncode


class KilledRun(KilledProcess):
    """``scripts/train_all_seeds.py --run-dir run_dir *argv`` as a ``KilledProcess``, ``watched``
    relative to ``run_dir``."""

    def __init__(self, run_dir: Path, argv: list[str], watched: str, rows: int = 3, start: bool = True):
        script = Path(__file__).resolve().parents[1] / "scripts" / "train_all_seeds.py"
        command = [sys.executable, "-W", "ignore", str(script), "--run-dir", str(run_dir), *argv]
        super().__init__(command, run_dir / watched, rows, start)


@contextlib.contextmanager
def started_at_the_compile(start):
    """Calls ``start()`` (a killed child's) when the run in this block reaches its training
    program's compilation, or at the block's end if it never does. The child then finds the
    initial states' programs in JAX's persistent cache and the baselines in purehr's (both
    written by this process just before), and compiles only what no cache holds: the training
    program (host callbacks). Started at once instead, it compiled them all beside this process,
    on the core the other xdist worker needs (a killed-run fixture: ~10 CPU-s of ~55)."""
    import purehr.run.protocol as protocol

    original, started = protocol.compiled_program, []

    def compiling(*args, **kwargs):
        if not started:
            started.append(start())
        return original(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(protocol, "compiled_program", compiling)
        yield
    if not started:
        start()
