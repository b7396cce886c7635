"""The seed API: ``train_hr_ppo(HRWritingEnv(hrv_dim=8), timesteps=5000)`` returns a model.

A thin, Stable-Baselines-shaped layer over ``make_train``: keyword names follow SB3
(``batch_size`` is the minibatch size, ``clip_range``), the work is one jitted scan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import serialization

from purehr.envs.base import Environment
from purehr.envs.spaces import flat_dim, flatten_observation
from purehr.ppo.config import HRV_DEFAULTS, PPOConfig
from purehr.ppo.train import PPO, diverged_at_update, keys_for_seeds, make_ppo, make_train

MODEL_FORMAT = "purehr-ppo-model/1"


class PPOModel:
    """A trained policy with its environment, config and training metrics."""

    def __init__(self, env: Environment, env_params, config: PPOConfig, params,
                 metrics: dict[str, np.ndarray], seed: int):
        self.env = env
        self.env_params = env_params
        self.config = config
        self.params = params
        self.metrics = metrics
        self.seed = seed
        self.curriculum = None          # the Curriculum trained with (train_hr_ppo sets it)
        self._ppo: PPO = make_ppo(config, env, env_params)
        self._act = jax.jit(lambda p, obs, key, deterministic: self._ppo.policy(p, deterministic)(obs, 0, key),
                            static_argnums=3)

    def predict(self, observation, deterministic: bool = True, key: jax.Array | None = None) -> np.ndarray:
        """Action for one observation, or for a batch (a leading axis on every leaf)."""
        key = jax.random.PRNGKey(0) if key is None else key
        size = int(np.prod(np.shape(flatten_observation(jax.tree.map(jnp.asarray, observation)))))
        if size == flat_dim(self.env.observation_space(self.env_params)):
            return np.asarray(self._act(self.params, observation, key, deterministic))
        batch = jax.tree.leaves(observation)[0].shape[0]
        keys = jax.random.split(key, batch)
        return np.asarray(jax.vmap(self._act, in_axes=(None, 0, 0, None))(
            self.params, observation, keys, deterministic))

    def evaluate(self, num_episodes: int = 100, seed: int | None = None, **kwargs) -> dict[str, float]:
        """Held-out evaluation of the deterministic policy with the task's own protocol."""
        evaluation = _task_module(self.env).heldout_evaluation
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
        }
        (path / "model.json").write_text(json.dumps(description, indent=2))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "PPOModel":
        path = Path(path)
        try:
            description = json.loads((path / "model.json").read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} holds no saved model (expected {path / 'model.json'})") from None
        if description.get("format") != MODEL_FORMAT:
            raise ValueError(f"{path / 'model.json'} has format {description.get('format')!r}; expected {MODEL_FORMAT!r}")
        env_kwargs = dict(description["env"]["kwargs"])
        if description["env"]["class"] == "HRWritingEnv":
            env_kwargs.setdefault("gap_features", False)    # saved before the observation had them
        env = _make_env(description["env"]["class"], env_kwargs)
        config = PPOConfig.from_dict(description["config"])
        env_params = serialization.from_bytes(env.default_params, (path / "env_params.msgpack").read_bytes())
        template = make_ppo(config, env, env_params).init(jax.random.PRNGKey(0)).params
        params = serialization.from_bytes(template, (path / "params.msgpack").read_bytes())
        with np.load(path / "metrics.npz", allow_pickle=False) as data:
            metrics = {name: data[name] for name in data.files}
        return cls(env, env_params, config, params, metrics, description["seed"])


def _task_module(env: Environment):
    from purehr.envs import hrv
    if isinstance(env, hrv.HRWritingEnv):
        return hrv
    from purehr.envs import swing
    if isinstance(env, swing.SwingEnv):
        return swing
    raise TypeError(f"{type(env).__name__} has no held-out protocol; use purehr.envs.rollout.run_episodes")


def _env_kwargs(env: Environment) -> dict[str, Any]:
    return {name: getattr(env, name) for name in ("hrv_dim", "similarity", "reward_form", "gap_features")
            if hasattr(env, name)}


def _make_env(class_name: str, kwargs: dict[str, Any]) -> Environment:
    from purehr.envs import hrv, swing
    classes = {"HRWritingEnv": hrv.HRWritingEnv, "SwingEnv": swing.SwingEnv}
    if class_name not in classes:
        raise ValueError(f"saved model names environment class {class_name!r}; expected one of {sorted(classes)}")
    return classes[class_name](**kwargs)


def train_hr_ppo(env: Environment, timesteps: int = HRV_DEFAULTS.total_timesteps, *,
                 learning_rate: float = HRV_DEFAULTS.learning_rate,
                 batch_size: int = HRV_DEFAULTS.minibatch_size, gamma: float = HRV_DEFAULTS.gamma,
                 clip_range: float = HRV_DEFAULTS.clip_range, ent_coef: float = HRV_DEFAULTS.ent_coef,
                 vf_coef: float = HRV_DEFAULTS.vf_coef, seed: int = 0,
                 callback: Callable[[dict[str, float]], Any] | None = None,
                 env_params=None, curriculum=None, **config_overrides) -> PPOModel:
    """Train PPO with the HRV defaults of docs/protocol.md. ``callback(metrics)`` runs on the host
    after every update; returning ``False`` ends training there, keeping the state reached.
    ``curriculum`` (a ``purehr.curriculum.Curriculum``, e.g. ``Curriculum()`` for the stages
    of docs/hrv_task.md) changes difficulty and precision inside the scan; the returned model's
    ``env_params`` are then the final stage's (what ``model.evaluate`` uses).
    Other ``PPOConfig`` fields can be passed by name (e.g. ``num_envs``)."""
    if not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r}: expected a non-negative integer")
    config = HRV_DEFAULTS.replace(
        total_timesteps=timesteps, learning_rate=learning_rate, minibatch_size=batch_size, gamma=gamma,
        clip_range=clip_range, ent_coef=ent_coef, vf_coef=vf_coef, **config_overrides)
    env_params = env.default_params if env_params is None else env_params

    seed_callback = None
    if callback is not None:
        def seed_callback(metrics):
            return callback({name: value[0].item() for name, value in metrics.items()})

    schedule = None
    if curriculum is not None:
        from purehr.curriculum import Curriculum
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum={curriculum!r}: expected a purehr.curriculum.Curriculum or None")
        curriculum.check_params(env_params)
        schedule = curriculum.schedule(config.num_updates)
    train = make_train(config, env, env_params, callback=seed_callback, env_params_schedule=schedule)
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
            "again with a smaller learning rate or other settings", model, first_diverged)
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
