"""The saved-model format: a folder of ``model.json`` (format tag, environment class, kwargs and
task name, the algorithm's registered name and its config, seed, a SHA-256 per file and one of
its own content), ``params.msgpack``,
``env_params.msgpack`` and ``metrics.npz``; no pickle. ``write_model`` writes one, ``read_model``
reads one back checked as a checkpoint is (docs/interfaces.md, "Saved models"). Environments are
found through the task registry: ``load`` rebuilds ``get_task(task).make_env(**kwargs)``, so a
registered, a suite's (``gymnax:CartPole-v1``) or a ``module:factory`` task saves and loads with
no change here; a model saved before the task was recorded is found by its class (swing, hrv).
An environment of no task (``purehr.train(my_env.make_env())``) saves too, recording its class,
module and spaces (``"task": null``): nothing says how it was built, so ``load`` takes it
(``Model.load(path, env=my_env.make_env())``), checked against that record."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import algorithm_of, get_algorithm, make_algorithm
from purehr.engine.user_network import describe, remember_recorded
from purehr.envs.base import Environment
from purehr.envs.spaces import Dict, Discrete, MultiDiscrete
from purehr.run.host.estimate import network_text
from purehr.run.store.files import (
    atomic_write_bytes,
    atomic_write_text,
    json_values,
    read_json_object,
    read_parsed,
    write_npz,
)
from purehr.run.store.record import config_from_record, recorded_env_kwargs, saved_algorithm, saved_model_task
from purehr.tasks import Task, task_of_env

MODEL_FORMAT = "purehr-ppo-model/1"
MODEL_FILES = ("params.msgpack", "env_params.msgpack", "metrics.npz")
"""The files of a saved model besides model.json, which records the SHA-256 of each
(``digests``); a model saved before digests existed loads with a warning."""
NO_TASK_FIELDS = ("module", "observation_space", "action_space")
"""model.json's ``env`` fields for an environment of no task (``"task": null``)."""
SELF_DIGEST = "model_json_sha256"
"""model.json's field holding the SHA-256 of its own content (``description_digest``): an edit
of the environment, config or seed is detected as an edit of a file is. A top-level field, so
an older purehr still reads a model saved by this one."""


class DamagedModelError(ValueError):
    """A saved model whose files changed since it was saved, or that contradict model.json."""


class ModelContents(NamedTuple):
    """What a saved model holds, in ``Model``'s constructor order (the algorithm: its config's)."""

    env: Environment
    env_params: Any
    config: AlgorithmConfig
    params: Any
    metrics: dict[str, np.ndarray]
    seed: int


def write_model(path: str | Path, contents: ModelContents, overwrite: bool = False) -> Path:
    """A directory of JSON and msgpack (no pickle), into a new or empty folder. A folder that
    holds anything (a saved model, a user's files) is refused unless ``overwrite``; then the
    model's four files are replaced and every other file there is left as it was. Each file is
    written whole before it is renamed into place, model.json last."""
    path = Path(path)
    task = task_of_env(contents.env)
    _check_destination(path, overwrite)
    path.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path / "params.msgpack", serialization.to_bytes(contents.params))
    atomic_write_bytes(path / "env_params.msgpack", serialization.to_bytes(contents.env_params))
    write_npz(path / "metrics.npz", contents.metrics)
    description = json_values(
        {
            "format": MODEL_FORMAT,
            "env": _env_record(contents.env, contents.env_params, task),
            "algorithm": algorithm_of(contents.config).name,
            "config": contents.config.to_dict(),
            "seed": contents.seed,
            "digests": {name: file_digest(path / name) for name in MODEL_FILES},
        }
        | ({"network": describe(contents.config.network, contents.params)} if contents.config.network else {})
    )
    description[SELF_DIGEST] = description_digest(description)
    atomic_write_text(path / "model.json", json.dumps(description, indent=2))
    return path


def _env_record(env: Environment, env_params: Any, task: Task | None) -> dict[str, Any]:
    """model.json's ``env``: the class, and the task ``load`` rebuilds it through with its
    keywords; for an environment of no task, its module and spaces, which ``load`` checks the
    environment it is given against."""
    if task is not None:
        return {"class": type(env).__name__, "kwargs": task.env_kwargs(env), "task": task.name}
    return {"class": type(env).__name__, "kwargs": {}, "task": None, **_env_identity(env, env_params)}


def _env_identity(env: Environment, env_params: Any) -> dict[str, str]:
    """What tells an environment of no task from another: its class's module and its spaces."""
    base = getattr(env, "unwrapped", env)
    return {
        "module": type(base).__module__,
        "observation_space": space_text(env.observation_space(env_params)),
        "action_space": space_text(env.action_space(env_params)),
    }


def space_text(space: Any) -> str:
    """A space in words, equal for equal spaces: its kind, shape and dtype (``Box(shape=(4,),
    dtype=float32)``, ``Discrete(2)``), a ``Dict``'s by key."""
    if isinstance(space, Dict):
        return "Dict(" + ", ".join(f"{name}: {space_text(value)}" for name, value in space.spaces.items()) + ")"
    if isinstance(space, Discrete):
        return f"Discrete({int(space.n)})"
    if isinstance(space, MultiDiscrete):
        return f"MultiDiscrete({[int(n) for n in space.nvec]})"
    dtype = getattr(space, "dtype", None)
    shape = tuple(int(n) for n in getattr(space, "shape", ()))
    return f"{type(space).__name__}(shape={shape}" + ("" if dtype is None else f", dtype={np.dtype(dtype).name}") + ")"


def _check_destination(path: Path, overwrite: bool) -> None:
    """``FileExistsError`` for a file, or a folder holding anything, unless ``overwrite``."""
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite={overwrite!r}: expected True or False")
    if path.exists() and not path.is_dir():
        raise FileExistsError(f"{path} is a file; expected a new or empty folder for the saved model")
    found = sorted(entry.name for entry in path.iterdir()) if path.is_dir() else []
    if not found or overwrite:
        return
    if "model.json" in found:
        raise FileExistsError(
            f"{path} already holds a saved model; pass overwrite=True to replace it, or choose a new path"
        )
    shown = found if len(found) <= 5 else [*found[:5], f"... ({len(found)} entries)"]
    raise FileExistsError(
        f"{path} holds {shown}, which is not a saved model; save into a new or empty folder "
        f"(overwrite=True replaces {['model.json', *MODEL_FILES]} there and keeps the rest)"
    )


def description_digest(description: dict[str, Any]) -> str:
    """SHA-256 of model.json's content without its own digest field: its JSON with sorted keys
    and no spaces, so a file written out again in another layout keeps its digest."""
    content = {name: value for name, value in description.items() if name != SELF_DIGEST}
    canonical = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def read_model(path: str | Path, env: Environment | None = None) -> ModelContents:
    """A model written by ``write_model``, checked as a checkpoint is: every file against the
    SHA-256 that model.json recorded, model.json's fields, the environment parameters
    through the environment's own validation, and every saved array's shape against the
    network that model.json describes. Anything wrong raises ``ValueError`` (a
    ``DamagedModelError`` for changed files) naming the file and the value. ``env``: the
    environment of a model saved from one of no task (its class and spaces checked), which
    nothing else can rebuild; a model of a task is rebuilt through it and takes none."""
    path = Path(path)
    description = _read_description(path)
    _check_file_digests(path, description)
    where = path / "model.json"
    recorded = description["env"]
    if recorded.get("task", "") is None:
        env, env_kwargs = _given_env(recorded, env, where), {}
    else:
        if env is not None:
            raise ValueError(
                f"env={type(env).__name__}(...): {where} was saved from task {recorded.get('task')!r}, which load "
                "rebuilds; env= is only for a model saved from an environment of no task. Call load(path)"
            )
        task = saved_model_task(recorded, where)
        env_kwargs = recorded_env_kwargs(task, dict(recorded["kwargs"]))
        env = _make_env(task, recorded["class"], env_kwargs, where)
    remember_recorded(description.get("network"))  # a relative network file found from any directory
    name = saved_algorithm(description)
    try:
        entry = get_algorithm(name)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None
    try:
        config = config_from_record(name, description["config"])
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: config is not a valid {entry.config_class().__name__}: {error}") from None
    env_params = _load_tree(
        path / "env_params.msgpack",
        env.default_params,
        f"the {type(env).__name__} parameters of {where} ({_describe_kwargs(env_kwargs)})",
    )
    env_params = _validated_env_params(env, env_kwargs, env_params, path / "env_params.msgpack")
    if recorded.get("task", "") is None:
        _check_env_identity(recorded, env, env_params, where)
    algorithm = make_algorithm(config, env, env_params)
    template = algorithm.network_params(algorithm.init(jax.random.PRNGKey(0)))
    params = _load_tree(
        path / "params.msgpack",
        template,
        f"the network of {where} ({name}: {network_text(config)}, {_describe_kwargs(env_kwargs)})",
    )
    try:
        with np.load(path / "metrics.npz", allow_pickle=False) as data:
            metrics = {name: data[name] for name in data.files}
    except (OSError, ValueError) as error:
        raise DamagedModelError(f"{path / 'metrics.npz'} cannot be read: {error}") from None
    return ModelContents(env, env_params, config, params, metrics, description["seed"])


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read_description(path: Path) -> dict[str, Any]:
    where = path / "model.json"
    description = read_json_object(
        where,
        missing=lambda: FileNotFoundError(f"{path} holds no saved model (expected {where})"),
        not_json=lambda error: DamagedModelError(f"{where} is not JSON ({error})"),
        not_object=lambda value: ValueError(f"{where} holds a {type(value).__name__}; expected a JSON object"),
    )
    _check_self_digest(where, description)
    if description.get("format") != MODEL_FORMAT:
        raise ValueError(f"{where} has format {description.get('format')!r}; expected {MODEL_FORMAT!r}")
    env = description.get("env")
    if (
        not isinstance(env, dict)
        or not isinstance(env.get("class"), str)
        or not isinstance(env.get("kwargs"), dict)
        or not isinstance(env.get("task", ""), str | None)
        or (env.get("task", "") is None and not all(isinstance(env.get(name), str) for name in NO_TASK_FIELDS))
    ):
        raise ValueError(
            f'{where}: env is {env!r}; expected {{"class": name, "kwargs": {{...}}, "task": name}}, or for an '
            f"environment of no task a null task and {list(NO_TASK_FIELDS)}"
        )
    if not isinstance(description.get("config"), dict):
        raise ValueError(
            f"{where}: config is {description.get('config')!r}; expected a JSON object of its algorithm's config fields"
        )
    seed = description.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"{where}: seed is {seed!r}; expected a non-negative integer")
    digests = description.get("digests")
    if digests is not None and (
        not isinstance(digests, dict)
        or set(digests) != set(MODEL_FILES)
        or not all(isinstance(v, str) for v in digests.values())
    ):
        raise ValueError(f"{where}: digests is {digests!r}; expected a SHA-256 for each of {list(MODEL_FILES)}")
    return description


def _check_self_digest(where: Path, description: dict[str, Any]) -> None:
    """model.json against the SHA-256 of its content it recorded, before any of its values is
    used; one saved before that digest existed is read on (``_check_file_digests`` warns)."""
    recorded = description.get(SELF_DIGEST)
    if recorded is None:
        return
    if recorded != description_digest(description):
        raise DamagedModelError(
            f"{where} has changed since the model was saved (its content no longer matches the SHA-256 "
            f"recorded in its {SELF_DIGEST!r} field): it was edited or is damaged; save the model again "
            "from its source rather than editing model.json"
        )


def _check_file_digests(path: Path, description: dict[str, Any]) -> None:
    digests = description.get("digests")
    if digests is None:
        warnings.warn(
            f"{path} was saved without file digests (by an earlier purehr), so damage to its files "
            "cannot be detected; it is loaded with every other check. Save it again to add them.",
            stacklevel=4,  # the caller of PPOModel.load
        )
        return
    if SELF_DIGEST not in description:
        warnings.warn(
            f"{path} was saved without a digest of model.json itself (by an earlier purehr), so an edit "
            "of its environment, config or seed cannot be detected; its other files are checked against "
            "their digests. Save it again to add it.",
            stacklevel=4,
        )
    for name in MODEL_FILES:
        if not (path / name).is_file():
            raise DamagedModelError(f"{path / name} is missing; a saved model holds model.json and {list(MODEL_FILES)}")
        if file_digest(path / name) != digests[name]:
            raise DamagedModelError(
                f"{path / name} does not match the SHA-256 recorded in {path / 'model.json'} "
                "when the model was saved: the file changed or is damaged"
            )


def _load_tree(file: Path, template: Any, described: str) -> Any:
    """``file``'s msgpack restored onto ``template``, refused unless every array is there with
    the template's shape (flax would accept other shapes and fail later, inside the network)."""
    state = read_parsed(
        file,
        lambda found: serialization.msgpack_restore(found.read_bytes()),
        missing=lambda: DamagedModelError(f"{file} is missing"),
        # msgpack raises several kinds for damaged bytes
        unreadable=lambda error: DamagedModelError(f"{file} cannot be read: {type(error).__name__}: {error}"),
    )
    expected = serialization.to_state_dict(template)
    saved_leaves = dict(_flat_state(state))
    for name, leaf in _flat_state(expected):
        if name not in saved_leaves:
            raise ValueError(f"{file} lacks {name}, which {described} has")
        shape, want = np.shape(saved_leaves[name]), np.shape(leaf)
        if shape != want:
            raise ValueError(f"{file}: {name} has shape {shape}, but {described} gives {want}")
    extra = sorted(set(saved_leaves) - {name for name, _ in _flat_state(expected)})
    if extra:
        raise ValueError(f"{file} holds {extra}, which {described} does not have")
    restored = serialization.from_state_dict(template, state)
    return jax.tree.map(_like, restored, template)


def _like(leaf: Any, like: Any) -> Any:
    """``leaf`` (NumPy, as msgpack gives it) in the type of the template's leaf: a Python
    number stays one, an array becomes a ``jax.Array`` of the template's dtype."""
    if isinstance(like, (bool, int, float)):
        return type(like)(np.asarray(leaf).item())
    return jnp.asarray(leaf, dtype=jnp.asarray(like).dtype)


def _flat_state(state: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(state, Mapping):
        return [item for key, value in state.items() for item in _flat_state(value, f"{prefix}/{key}")]
    return [(prefix.lstrip("/") or "(root)", state)]


def _validated_env_params(env: Environment, env_kwargs: dict[str, Any], env_params: Any, file: Path) -> Any:
    """The loaded parameters put through the environment's constructor, which refuses what it
    would refuse from a user (``target_precision=nan``, ``step_size=-1``): the task's
    ``make_env`` takes the environment's kwargs and every field of its parameters by name (the
    fields override the kwargs). Parameters that are not a dataclass are kept as loaded, and so
    are those of a suite's or a user's task whose ``make_env`` takes no such fields (a
    ``TypeError``: gymnax's take only ``gymnax.make`` keywords); their shapes were checked."""
    task = task_of_env(env)
    if task is None or not dataclasses.is_dataclass(env_params):
        return env_params
    fields = {field.name: getattr(env_params, field.name) for field in dataclasses.fields(env_params)}
    try:
        return task.make_env(**{**env_kwargs, **fields}).default_params
    except TypeError as error:
        if task.source(env).get("suite") != "purehr":  # a suite's or a user's make_env need not take the fields
            return env_params
        raise ValueError(f"{file}: {error}") from None
    except ValueError as error:
        raise ValueError(f"{file}: {error}") from None


def _given_env(recorded: dict[str, Any], env: Environment | None, where: Path) -> Environment:
    """The environment a model of no task is loaded into: the caller's, of the class it was saved from."""
    saved = f"{recorded['module']}.{recorded['class']}"
    if env is None:
        raise ValueError(
            f"{where} was saved from a {saved} of no task, which load cannot rebuild (nothing recorded how it "
            f"was built): pass it, Model.load({str(where.parent)!r}, env=...) with the environment built as for "
            "training; or train through a task (get_task('module:factory').make_env(), register_task) to save one "
            "that loads alone"
        )
    if not isinstance(env, Environment):
        raise TypeError(f"env={env!r}: expected the {saved} environment the model was saved from")
    base = getattr(env, "unwrapped", env)
    if type(base).__name__ != recorded["class"]:
        raise ValueError(
            f"env={type(base).__module__}.{type(base).__name__}(...): {where} was saved from a {saved}; "
            "pass that environment"
        )
    return env


def _check_env_identity(recorded: dict[str, Any], env: Environment, env_params: Any, where: Path) -> None:
    """The given environment's spaces (with the saved parameters) against those recorded."""
    found = _env_identity(env, env_params)
    for name in ("observation_space", "action_space"):
        if found[name] != recorded[name]:
            raise ValueError(
                f"env={type(env).__name__}(...) has {name} {found[name]}, but {where} was saved from one with "
                f"{recorded[name]}: pass the environment built as it was for training"
            )


def _describe_kwargs(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in kwargs.items()) or "default environment"


def _make_env(task: Task, class_name: str, kwargs: dict[str, Any], where: Path | str = "saved model") -> Environment:
    try:
        env = task.make_env(**kwargs)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: env kwargs {kwargs} are refused by {class_name}: {error}") from None
    if type(env).__name__ != class_name:
        raise ValueError(
            f"{where} names environment class {class_name!r}, but task {task.name!r} builds a "
            f"{type(env).__name__}: the task changed since the model was saved"
        )
    return env
