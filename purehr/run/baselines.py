"""The reference points of every task: its baseline (structured controller, oracle) and its
floor policies (doing nothing, acting at random), evaluated on the held-out protocol PPO is
judged on, so a run's manifest says what its PPO policies must beat.

Evaluating them takes tens of seconds (a compilation per policy), while their numbers depend
only on their definition (``baseline_definition``: the task and its policies, the environment,
the held-out params and episode count, the code, the precision and the backend). So each
task's are kept by a digest of that definition: in this process, and in a small JSON file under
the user's cache directory (``PUREHR_CACHE_DIR``, else ``$XDG_CACHE_HOME/purehr``, else
``~/.cache/purehr``; ``PUREHR_CACHE_DIR=""`` keeps none). A changed definition is another key.

A kept file is trusted only whole: it names its key and carries a SHA-256 over its key,
definition and numbers (``entry_digest``), checked on read; a file edited by hand (the oracle's
success made 0.5), cut short or renamed to another key is evaluated again, and the user is
told, instead of its numbers reaching the manifest and the goal verdicts."""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import json
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from purehr.engine.compile_options import one_shot_compiler_options
from purehr.run.compiled.compile_cache import purehr_cache_root
from purehr.run.compiled.program import CtrlC
from purehr.run.compiled.train_all import TaskSetup
from purehr.run.store.checkpoints import tree_digest
from purehr.run.store.files import atomic_write_json, json_values
from purehr.run.store.run_dir import baseline_numbers
from purehr.tasks.factory import library_roots

CACHE_FORMAT = 2  # 2: each entry carries its digest (entries of format 1 are never read)
_EVALUATED: dict[str, dict[str, Any]] = {}  # key -> one task's baselines, this process


def evaluate_baselines(
    setups: list[TaskSetup], say: Callable[[str], None] | None = None, cache_dir: Path | None = None
) -> dict[str, Any]:
    """task -> {"name", "definition", "metrics", "floors": {floor name: metrics}}, every metric
    a float (the manifest's ``baselines``); those of a definition evaluated before are reused.
    ``say`` hears which are reused (default: nothing is said)."""
    say = say or (lambda message: None)
    folder = baseline_cache_dir() if cache_dir is None else cache_dir
    baselines = {}
    for setup in setups:
        definition = baseline_definition(setup)
        key = baseline_key(definition)
        found, problem = (_EVALUATED[key], None) if key in _EVALUATED else _read_cached(folder, key)
        if problem is not None:
            say(f"{setup.name}: {problem}; evaluated again")
        if found is None:
            found = _evaluate(setup)
            _write_cached(folder, key, definition, found)
        else:
            where = "" if folder is None else f", kept in {folder}"
            say(f"{setup.name}: reused, as evaluated before for the same definition{where}")
        _EVALUATED[key] = found
        baselines[setup.name] = copy.deepcopy(found)
    return baselines


def _evaluate(setup: TaskSetup) -> dict[str, Any]:
    def heldout(policy):
        lowered = jax.jit(  # run once per definition: compiled for compile time
            lambda: setup.task.heldout_evaluation(
                setup.env, setup.eval_env_params, policy, num_episodes=setup.protocol.eval_episodes
            ),
            compiler_options=one_shot_compiler_options(),
        ).lower()
        # traced here, compiled and run in a worker thread: Ctrl-C is heard at once, not when it ends
        metrics = CtrlC().run(lambda: jax.device_get(lowered.compile()()))
        return {k: float(v) for k, v in metrics.items()}

    baseline = setup.task.baseline  # None: a suite's or a user's task, floors only
    return {
        "name": None if baseline is None else baseline.name,
        "definition": None if baseline is None else baseline.definition,
        "metrics": None if baseline is None else heldout(checked_policy(setup, baseline)),
        "floors": {floor.name: heldout(checked_policy(setup, floor)) for floor in setup.task.floors},
    }


def checked_policy(setup: TaskSetup, baseline) -> Callable:
    """``baseline.make_policy(env, eval params)``, its policy traced once on the environment's
    observation (shapes only): a ``make_policy`` that raises, or a policy that fails or acts in
    another shape than the action space's, is a ``ValueError`` naming the task, the baseline and
    its module, and the shape expected (a user's ``BASELINES`` used to surface as a traceback)."""
    make_policy = baseline.make_policy
    where = (
        f"task {setup.name!r}: baseline {baseline.name!r} "
        f"({getattr(make_policy, '__module__', '?')}.{getattr(make_policy, '__qualname__', repr(make_policy))})"
    )
    try:
        policy = make_policy(setup.env, setup.eval_env_params)
    except Exception as error:
        raise ValueError(f"{where}: make_policy(env, env_params) raised {type(error).__name__}: {error}") from error
    space = setup.env.action_space(setup.eval_env_params)
    key = jax.random.PRNGKey(0)
    try:
        observation = jax.eval_shape(setup.env.reset, key, setup.eval_env_params)[0]
        action = jax.eval_shape(policy, observation, jax.numpy.int32(0), key)
    except Exception as error:
        raise ValueError(
            f"{where}: its policy(observation, t, key) failed on the environment's observation: "
            f"{type(error).__name__}: {error}; expected an action of shape {tuple(space.shape)} ({space!r})"
        ) from error
    if getattr(action, "shape", None) != tuple(space.shape):
        raise ValueError(
            f"{where}: its policy returns {action!r}; expected an action of shape {tuple(space.shape)} ({space!r})"
        )
    return policy


def baseline_definition(setup: TaskSetup) -> dict[str, Any]:
    """Everything a task's baseline numbers depend on. The held-out episodes' keys are fixed in
    the task's code, which ``source`` covers (any edit of purehr is a new definition)."""
    params = setup.eval_env_params
    return {
        "format": CACHE_FORMAT,
        "task": setup.name,
        "policies": [[b.name, b.flag, b.definition] for b in setup.task.baselines],
        "environment": f"{type(setup.env).__module__}.{type(setup.env).__qualname__}",
        "env_kwargs": json_values(setup.task.env_kwargs(setup.env)),
        "env_source": {**json_values(setup.task.source(setup.env)), "code": user_code_digest(setup)},
        "eval_params": {
            "fields": [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]],
            "digest": tree_digest(params),
        },
        "eval_episodes": setup.protocol.eval_episodes,
        "x64": bool(jax.config.jax_enable_x64),
        "backend": jax.default_backend(),
        "device_kind": jax.devices()[0].device_kind,
        "jax": jax.__version__,
        "source": purehr_source_digest(),
    }


def user_code_digest(setup: TaskSetup) -> str:
    """SHA-256 over every user source file the task's numbers depend on (paths and contents): the
    files of the environment class and of each class it derives from, of each baseline's
    ``make_policy``, and of the user modules those import, transitively (found through each
    module's globals: ``import helper`` and ``from helper import gain`` alike). purehr's own
    files are ``purehr_source_digest``'s; the standard library's and installed packages' are
    not a user's edit (their versions are recorded). A file that cannot be read counts by name."""
    base = getattr(setup.env, "unwrapped", setup.env)
    starts = [cls.__module__ for cls in type(base).__mro__]
    starts += [getattr(baseline.make_policy, "__module__", None) for baseline in setup.task.baselines]
    digest = hashlib.sha256()
    for path in sorted(_user_files(name for name in starts if name)):
        try:
            content = Path(path).read_bytes()
        except OSError:
            content = b"unread"
        digest.update(path.encode() + b"\0" + content + b"\0")
    return digest.hexdigest()


def _user_files(module_names) -> set[str]:
    """The source files of the user modules named and of the user modules they import, transitively."""
    files, seen, pending = set(), set(), list(module_names)
    while pending:
        name = pending.pop()
        module = sys.modules.get(name)
        if name in seen or module is None:
            continue
        seen.add(name)
        path = _user_source(module)
        if path is None:
            continue
        files.add(path)
        for value in list(vars(module).values()):
            try:  # an object whose attributes raise (a lazy proxy) imports nothing we can follow
                owner = value.__name__ if isinstance(value, types.ModuleType) else getattr(value, "__module__", None)
            except Exception:
                continue
            if isinstance(owner, str):
                pending.append(owner)
    return files


def _user_source(module: types.ModuleType) -> str | None:
    """``module``'s source file where it is a user's (not purehr's, the standard library's or an
    installed package's), else None."""
    try:
        path = inspect.getsourcefile(module)
    except TypeError:  # built in
        return None
    if not path:
        return None
    resolved = Path(path).resolve()
    if resolved.is_relative_to(_PUREHR_PACKAGE) or any(resolved.is_relative_to(root) for root in library_roots()):
        return None
    return str(resolved)


_PUREHR_PACKAGE = Path(__file__).resolve().parents[1]


def baseline_key(definition: dict[str, Any]) -> str:
    """The digest a definition is kept by (the same definition: the same key)."""
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()


@functools.lru_cache(maxsize=1)
def purehr_source_digest() -> str:
    """SHA-256 over purehr's Python files (paths and contents): the code that computes the numbers."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def baseline_cache_dir() -> Path | None:
    """Where evaluated baselines are kept between processes (None: nowhere)."""
    root = purehr_cache_root()
    return None if root is None else root / "baselines"


def entry_digest(key: str, definition: Any, baselines: Any) -> str:
    """SHA-256 over a kept entry's key, definition and numbers, as JSON: written with the entry,
    recomputed on read, so an entry whose numbers were edited is not trusted."""
    whole = json.dumps({"key": key, "definition": definition, "baselines": baselines}, sort_keys=True)
    return hashlib.sha256(whole.encode()).hexdigest()


def _read_cached(folder: Path | None, key: str) -> tuple[dict[str, Any] | None, str | None]:
    """The kept baselines of ``key`` (None: none kept, or not trusted) and, for a file that is
    there but not a whole entry of ``key`` with its digest, what is wrong with it."""
    if folder is None:
        return None, None
    path = folder / f"{key}.json"
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError) as error:
        return None, f"the kept baselines {path} cannot be read ({type(error).__name__}), damaged"
    try:
        baselines = record["baselines"]
        whole = (
            record["key"] == key
            and record["digest"] == entry_digest(key, record["definition"], baselines)
            and isinstance(baselines["floors"], dict)
            and (baselines["metrics"] is None or isinstance(baselines["metrics"], dict))
        )
    except (KeyError, TypeError):
        whole = False
    if not whole:
        return None, (
            f"the kept baselines {path} were edited or damaged (not a whole entry of this definition with the "
            "SHA-256 written with it), so their numbers are not used"
        )
    return baseline_numbers(baselines), None


def _write_cached(folder: Path | None, key: str, definition: dict[str, Any], baselines: dict[str, Any]) -> None:
    """Kept for the next process; a cache that cannot be written is only a slower next run."""
    if folder is None:
        return
    try:
        digest = entry_digest(key, json_values(definition), json_values(baselines))
        record = {"key": key, "digest": digest, "definition": definition, "baselines": baselines}
        atomic_write_json(folder / f"{key}.json", record)
    except OSError:
        pass
