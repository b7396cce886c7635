"""The seed API: ``train_hr_ppo(HRWritingEnv(hrv_dim=8), timesteps=5000)`` returns a model.

A thin, Stable-Baselines-shaped layer over ``make_train``: keyword names follow SB3
(``batch_size`` is the minibatch size, ``clip_range``), the work is one jitted scan.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from purehr.envs import hrv, swing
from purehr.envs.base import Environment
from purehr.envs.hrv.curriculum import Curriculum
from purehr.envs.spaces import Dict as DictSpace
from purehr.ppo.algorithm import PPO, diverged_at_update, make_ppo
from purehr.ppo.config import MAX_HELDOUT_EPISODES, PPOConfig
from purehr.ppo.trainer import keys_for_seeds, make_train
from purehr.tasks import HRV_DEFAULTS, TASKS, Task, curriculum_schedule, task_of_env, task_of_env_class

MODEL_FORMAT = "purehr-ppo-model/1"
MODEL_FILES = ("params.msgpack", "env_params.msgpack", "metrics.npz")
"""The files of a saved model besides model.json, which records the SHA-256 of each
(``digests``); a model saved before digests existed loads with a warning."""


class DamagedModelError(ValueError):
    """A saved model whose files changed since it was saved, or that contradict model.json."""


class PPOModel:
    """A trained policy with its environment, config and training metrics."""

    def __init__(
        self, env: Environment, env_params, config: PPOConfig, params, metrics: dict[str, np.ndarray], seed: int
    ):
        self.env = env
        self.env_params = env_params
        self.config = config
        self.params = params
        self.metrics = metrics
        self.seed = seed
        self.curriculum = None  # the Curriculum trained with (train_hr_ppo sets it)
        self._ppo: PPO = make_ppo(config, env, env_params)
        self._act = jax.jit(
            lambda p, obs, key, deterministic: self._ppo.policy(p, deterministic)(obs, 0, key), static_argnums=3
        )

    def predict(self, observation, deterministic: bool = True, key: jax.Array | None = None) -> np.ndarray:
        """Action for one observation, or for a batch (a leading axis on every leaf). An
        observation of the wrong shape or with missing keys is refused, naming the leaf."""
        key = jax.random.PRNGKey(0) if key is None else key
        batch = observation_batch(self.env.observation_space(self.env_params), observation)
        if batch is None:
            return np.asarray(self._act(self.params, observation, key, deterministic))
        keys = jax.random.split(key, batch)
        return np.asarray(
            jax.vmap(self._act, in_axes=(None, 0, 0, None))(self.params, observation, keys, deterministic)
        )

    def evaluate(self, num_episodes: int = 100, seed: int | None = None, **kwargs) -> dict[str, float]:
        """Held-out evaluation of the deterministic policy with the task's own protocol."""
        if (
            isinstance(num_episodes, bool)
            or not isinstance(num_episodes, (int, np.integer))
            or not 1 <= num_episodes <= MAX_HELDOUT_EPISODES
        ):
            raise ValueError(
                f"num_episodes={num_episodes!r}: expected an integer from 1 to {MAX_HELDOUT_EPISODES:,} "
                "(every episode is held on the device at once)"
            )
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise ValueError(f"seed={seed!r}: expected a non-negative integer or None (the task's held-out seed)")
        evaluation = _task_of(self.env).env_evaluation
        options = dict(num_episodes=num_episodes, **kwargs)
        if seed is not None:
            options["seed"] = seed
        metrics = jax.jit(lambda p: evaluation(self.env, self.env_params, self._ppo.policy(p), **options))(self.params)
        return {name: float(value) for name, value in metrics.items()}

    def save(self, path: str | Path) -> Path:
        """A directory of JSON and msgpack (no pickle); refuses to overwrite a saved model."""
        path = Path(path)
        if (path / "model.json").exists():
            raise FileExistsError(f"{path} already holds a saved model; choose a new path or delete it")
        path.mkdir(parents=True, exist_ok=True)
        (path / "params.msgpack").write_bytes(serialization.to_bytes(self.params))
        (path / "env_params.msgpack").write_bytes(serialization.to_bytes(self.env_params))
        np.savez(path / "metrics.npz", **self.metrics)
        description = {
            "format": MODEL_FORMAT,
            "env": {"class": type(self.env).__name__, "kwargs": _env_kwargs(self.env)},
            "config": self.config.to_dict(),
            "seed": self.seed,
            "digests": {name: file_digest(path / name) for name in MODEL_FILES},
        }
        (path / "model.json").write_text(json.dumps(description, indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path) -> PPOModel:
        """A model written by ``save``, checked as a checkpoint is: every file against the
        SHA-256 that model.json recorded, model.json's fields, the environment parameters
        through the environment's own validation, and every saved array's shape against the
        network that model.json describes. Anything wrong raises ``ValueError`` (a
        ``DamagedModelError`` for changed files) naming the file and the value."""
        path = Path(path)
        description = _read_description(path)
        _check_digests(path, description)
        where = path / "model.json"
        env_kwargs = dict(description["env"]["kwargs"])
        task = task_of_env_class(description["env"]["class"])
        if task is not None:
            env_kwargs = task.recorded_kwargs(env_kwargs)  # keywords newer than the saved model
        env = _make_env(description["env"]["class"], env_kwargs, where)
        try:
            config = PPOConfig.from_dict(description["config"])
        except (TypeError, ValueError) as error:
            raise ValueError(f"{where}: config is not a valid PPOConfig: {error}") from None
        env_params = _load_tree(
            path / "env_params.msgpack",
            env.default_params,
            f"the {type(env).__name__} parameters of {where} ({_describe_kwargs(env_kwargs)})",
        )
        env_params = _validated_env_params(env, env_kwargs, env_params, path / "env_params.msgpack")
        template = make_ppo(config, env, env_params).init(jax.random.PRNGKey(0)).params
        params = _load_tree(
            path / "params.msgpack",
            template,
            f"the network of {where} (actor_hidden={config.actor_hidden}, "
            f"critic_hidden={config.critic_hidden}, {_describe_kwargs(env_kwargs)})",
        )
        try:
            with np.load(path / "metrics.npz", allow_pickle=False) as data:
                metrics = {name: data[name] for name in data.files}
        except (OSError, ValueError) as error:
            raise DamagedModelError(f"{path / 'metrics.npz'} cannot be read: {error}") from None
        return cls(env, env_params, config, params, metrics, description["seed"])


def file_digest(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _read_description(path: Path) -> dict[str, Any]:
    where = path / "model.json"
    try:
        description = json.loads(where.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} holds no saved model (expected {where})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DamagedModelError(f"{where} is not JSON ({error})") from None
    if not isinstance(description, dict):
        raise ValueError(f"{where} holds a {type(description).__name__}; expected a JSON object")
    if description.get("format") != MODEL_FORMAT:
        raise ValueError(f"{where} has format {description.get('format')!r}; expected {MODEL_FORMAT!r}")
    env = description.get("env")
    if not isinstance(env, dict) or not isinstance(env.get("class"), str) or not isinstance(env.get("kwargs"), dict):
        raise ValueError(f'{where}: env is {env!r}; expected {{"class": name, "kwargs": {{...}}}}')
    if not isinstance(description.get("config"), dict):
        raise ValueError(
            f"{where}: config is {description.get('config')!r}; expected a JSON object of PPOConfig fields"
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


def _check_digests(path: Path, description: dict[str, Any]) -> None:
    digests = description.get("digests")
    if digests is None:
        warnings.warn(
            f"{path} was saved without file digests (by an earlier purehr), so damage to its files "
            "cannot be detected; it is loaded with every other check. Save it again to add them.",
            stacklevel=3,
        )
        return
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
    try:
        state = serialization.msgpack_restore(file.read_bytes())
    except FileNotFoundError:
        raise DamagedModelError(f"{file} is missing") from None
    except Exception as error:  # msgpack raises several kinds for damaged bytes
        raise DamagedModelError(f"{file} cannot be read: {type(error).__name__}: {error}") from None
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
    would refuse from a user (``target_precision=nan``, ``step_size=-1``)."""
    try:
        if isinstance(env, hrv.HRWritingEnv):
            fields = {name: getattr(env_params, name) for name in hrv.HRVParams.__dataclass_fields__}
            return type(env)(**env_kwargs, **fields).default_params
        if isinstance(env, swing.SwingEnv):
            return type(env)(env_params).default_params
    except (TypeError, ValueError) as error:
        raise ValueError(f"{file}: {error}") from None
    return env_params


def _describe_kwargs(kwargs: dict[str, Any]) -> str:
    return ", ".join(f"{name}={value!r}" for name, value in kwargs.items()) or "default environment"


def _task_of(env: Environment) -> Task:
    task = task_of_env(env)
    if task is None:
        raise TypeError(f"{type(env).__name__} has no held-out protocol; use purehr.envs.rollout.run_episodes")
    return task


def _env_kwargs(env: Environment) -> dict[str, Any]:
    task = task_of_env(env)
    return {} if task is None else task.env_kwargs(env)


def _make_env(class_name: str, kwargs: dict[str, Any], where: Path | str = "saved model") -> Environment:
    task = task_of_env_class(class_name)
    if task is None:
        raise ValueError(
            f"{where} names environment class {class_name!r}; expected one of "
            f"{sorted(task.env_class.__name__ for task in TASKS.values())}"
        )
    try:
        return task.make_env(**kwargs)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: env kwargs {kwargs} are refused by {class_name}: {error}") from None


def observation_batch(space: Any, observation: Any) -> int | None:
    """None for one observation of ``space``, N for a batch of N (a leading axis on every
    leaf); ``ValueError`` naming the leaf for anything else (a missing key, a wrong length)."""
    if isinstance(space, DictSpace):
        if not isinstance(observation, Mapping):
            raise ValueError(
                f"observation is a {type(observation).__name__}; expected a dict with keys {sorted(space.spaces)}"
            )
        missing = sorted(set(space.spaces) - set(observation))
        extra = sorted(set(observation) - set(space.spaces))
        if missing or extra:
            raise ValueError(
                f"observation has keys {sorted(observation)}: "
                + "; ".join(
                    part
                    for part in (f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else "")
                    if part
                )
                + f"; expected exactly {sorted(space.spaces)}"
            )
        leaves = {f"observation[{name!r}]": (sub.shape, observation[name]) for name, sub in space.spaces.items()}
    else:
        leaves = {"observation": (tuple(space.shape), observation)}
    batches = {}
    for label, (shape, value) in leaves.items():
        try:
            array = np.asarray(value)
        except Exception:  # e.g. a ragged list
            raise ValueError(f"{label} is not an array of numbers: {value!r}") from None
        if array.dtype.kind not in "biuf":
            raise ValueError(f"{label} has dtype {array.dtype}; expected numbers")
        if array.shape == tuple(shape):
            batches[label] = None
        elif array.ndim == len(shape) + 1 and array.shape[1:] == tuple(shape):
            batches[label] = array.shape[0]
        else:
            raise ValueError(
                f"{label} has shape {array.shape}; expected {tuple(shape)} (one observation) "
                f"or (N, {', '.join(map(str, shape))}) (a batch of N)"
            )
    if len(set(batches.values())) > 1:
        raise ValueError(
            f"observation leaves disagree on the batch: {batches} (None = a single observation); "
            "expected every leaf single, or every leaf with the same leading batch size"
        )
    return next(iter(batches.values()))


def train_hr_ppo(
    env: Environment,
    timesteps: int = HRV_DEFAULTS.total_timesteps,
    *,
    learning_rate: float = HRV_DEFAULTS.learning_rate,
    batch_size: int = HRV_DEFAULTS.minibatch_size,
    gamma: float = HRV_DEFAULTS.gamma,
    clip_range: float = HRV_DEFAULTS.clip_range,
    ent_coef: float = HRV_DEFAULTS.ent_coef,
    vf_coef: float = HRV_DEFAULTS.vf_coef,
    seed: int = 0,
    callback: Callable[[dict[str, float]], Any] | None = None,
    env_params=None,
    curriculum=None,
    **config_overrides,
) -> PPOModel:
    """Train PPO with the HRV defaults of docs/protocol.md. ``callback(metrics)`` runs on the host
    after every update; returning ``False`` ends training there, keeping the state reached.
    ``curriculum`` (a ``purehr.envs.hrv.Curriculum``, e.g. ``Curriculum()`` for the stages
    of docs/hrv_task.md) changes difficulty and precision inside the scan; the returned model's
    ``env_params`` are then the final stage's (what ``model.evaluate`` uses).
    Other ``PPOConfig`` fields can be passed by name (e.g. ``num_envs``)."""
    if not isinstance(env, Environment):
        shown = f"the class {env.__name__}" if isinstance(env, type) else f"the {type(env).__name__} {env!r}"
        hint = (
            f"an instance: {env.__name__}()"
            if isinstance(env, type) and issubclass(env, Environment)
            else "an Environment instance such as purehr.HRWritingEnv(hrv_dim=8)"
        )
        raise TypeError(f"env is {shown}; expected {hint}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r}: expected a non-negative integer")
    aliased = {"total_timesteps": "timesteps", "minibatch_size": "batch_size"}.items()
    for field, argument in aliased:  # the seed API names these two its own way
        if field in config_overrides:
            raise TypeError(f"train_hr_ppo got {field}=...; pass {argument}= (its name in this API) instead")
    config = HRV_DEFAULTS.replace(
        total_timesteps=timesteps,
        learning_rate=learning_rate,
        minibatch_size=batch_size,
        gamma=gamma,
        clip_range=clip_range,
        ent_coef=ent_coef,
        vf_coef=vf_coef,
        **config_overrides,
    )
    env_params = env.default_params if env_params is None else env_params

    seed_callback = None
    if callback is not None:

        def seed_callback(metrics):
            return callback({name: value[0].item() for name, value in metrics.items()})

    if curriculum is not None:
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum={curriculum!r}: expected a purehr.envs.hrv.Curriculum or None")
        curriculum.check_params(env_params)
    train = make_train(
        config, env, env_params, callback=seed_callback, env_params_schedule=curriculum_schedule(curriculum, config)
    )
    result = train(keys_for_seeds([seed]))
    if curriculum is not None:
        env_params = curriculum.final_params(env_params)
    params = jax.tree.map(lambda x: x[0], result.runner.params)
    metrics = {name: np.asarray(value[0]) for name, value in result.metrics.items()}
    completed = metrics["update"] > 0
    metrics = {name: value[completed] for name, value in metrics.items()}
    model = PPOModel(env, env_params, config, params, metrics, seed)
    model.curriculum = curriculum
    first_diverged = int(np.asarray(diverged_at_update(result.runner, config))[0])
    if first_diverged:
        raise TrainingDiverged(
            f"training diverged at update {first_diverged} ({first_diverged * config.batch_size:,} env steps): a "
            f"loss or parameter became NaN or infinite (learning_rate={config.learning_rate}); the parameters "
            f"stayed frozen at update {first_diverged - 1}. The frozen model is this error's .model; train "
            "again with a smaller learning rate or other settings",
            model,
            first_diverged,
        )
    return model


class TrainingDiverged(RuntimeError):
    """``train_hr_ppo`` ended with non-finite losses or parameters: not a trained model. The
    model frozen at the last finite update is kept in ``.model`` for inspection, and
    ``.update`` is the first update that diverged."""

    def __init__(self, message: str, model: PPOModel, update: int):
        super().__init__(message)
        self.model = model
        self.update = update


HRPPOModel = PPOModel
