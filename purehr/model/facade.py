"""The seed API: ``train(env, algorithm="sac", timesteps=..., **config_fields)``, the general entry
point, returns a model of any registered algorithm; ``train_hr_ppo(HRWritingEnv(hrv_dim=8),
timesteps=50_000)`` is its PPO form with Stable-Baselines-shaped argument names.

A thin, Stable-Baselines-shaped layer over ``make_train``: keyword names follow SB3
(``batch_size`` is the minibatch size, ``clip_range``), the work is one jitted scan. Any
environment trains: one a task built (``get_task("gymnax:CartPole-v1").make_env()``) gets that
task's defaults and held-out evaluation, and saves and loads by the task's name; any other
``Environment`` gets the defaults for its action space and the generic held-out evaluation
(``purehr.envs.rollout``). The files a model saves to are ``purehr.model.saved``'s.
"""

from __future__ import annotations

import datetime
import sys
import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import jax
import numpy as np

from purehr.algorithms.base import Algorithm, AlgorithmConfig
from purehr.algorithms.registry import DEFAULT_ALGORITHM, algorithm_of, default_config, get_algorithm, make_algorithm
from purehr.algorithms.trainer import TrainResult, make_train
from purehr.engine.acting import Actor
from purehr.engine.seeds import keys_for_seeds
from purehr.envs import spaces
from purehr.envs.base import Environment, check_env_params
from purehr.envs.curriculum import Curriculum
from purehr.envs.rollout import defines_success, heldout_evaluation
from purehr.model.saved import ModelContents, read_model, write_model
from purehr.protocol_settings import MAX_HELDOUT_EPISODES
from purehr.run.dashboards import run_identity
from purehr.run.host.estimate import network_text
from purehr.run.host.progress import Progress, TaskPlan
from purehr.run.store.machine import environment_description
from purehr.run.store.run_dir import environment_advice
from purehr.tasks import curriculum_schedule, task_of_env
from purehr.tasks.environment_task import default_config_for
from purehr.tasks.registry import resolved_task_of_class
from purehr.tracking import Tracking, TrackingSettings, start_tracking
from purehr.tracking.claims import Owner
from purehr.tracking.naming import run_label
from purehr.types import Evaluation


class Model:
    """A trained policy of any registered algorithm with its environment, config and training
    metrics (``PPOModel``, the name it had when PPO was the only one, is this class). Its
    algorithm is its config's (``purehr.algorithms.registry.algorithm_of``)."""

    def __init__(
        self, env: Environment, env_params, config: AlgorithmConfig, params, metrics: dict[str, np.ndarray], seed: int
    ):
        self.env = env
        self.env_params = env_params
        self.config = config
        self.params = params
        self.metrics = metrics
        self.seed = seed
        self.curriculum = None  # the Curriculum trained with (train_hr_ppo sets it)
        self._algorithm: Algorithm = make_algorithm(config, env, env_params)
        self._act = Actor(self._algorithm)

    def predict(self, observation, deterministic: bool = True, key: jax.Array | None = None, state=None):
        """Action for one observation, or for a batch (a leading axis on every leaf). An
        observation of the wrong shape or with missing keys is refused, naming the leaf.

        A recurrent model (``policy="gru"``) returns ``(action, state)``: pass the state back
        with the episode's next observation, ``state=None`` at an episode's start
        (``purehr.engine.acting``; docs/recurrent.md)."""
        return self._act(self.params, observation, key=key, deterministic=deterministic, state=state)

    def evaluate(self, num_episodes: int = 100, seed: int | None = None, **kwargs) -> dict[str, float]:
        """Held-out evaluation of the deterministic policy with the task's own protocol (an
        environment of no task: the generic one, ``purehr.envs.rollout.heldout_evaluation``:
        return mean/std/min, episode length, success where the environment defines it)."""
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
        evaluation = evaluation_of(self.env)
        options = dict(num_episodes=num_episodes, **kwargs)
        if seed is not None:
            options["seed"] = seed
        metrics = jax.jit(lambda p: evaluation(self.env, self.env_params, self._algorithm.policy(p), **options))(
            self.params
        )
        return {name: float(value) for name, value in metrics.items()}

    def save(self, path: str | Path, overwrite: bool = False) -> Path:
        """A directory of JSON and msgpack (no pickle), new or empty: a folder holding anything
        (a saved model, your files) is refused unless ``overwrite=True``, which replaces the
        model's files there and keeps every other file. An environment of no task saves too; it
        is then given back to ``load`` (``Model.load(path, env=...)``)."""
        contents = ModelContents(self.env, self.env_params, self.config, self.params, self.metrics, self.seed)
        return write_model(path, contents, overwrite)

    @property
    def algorithm(self) -> str:
        """The registered name of the algorithm that trained it (``"ppo"``)."""
        return self._algorithm.name

    @classmethod
    def load(cls, path: str | Path, env: Environment | None = None) -> Model:
        """A model written by ``save``, checked as a checkpoint is (``purehr.model.saved.read_model``:
        digests, model.json's fields, environment parameters, array shapes); anything wrong raises
        ``ValueError`` (a ``DamagedModelError`` for changed files) naming the file and the value.
        The algorithm is the one model.json records, rebuilt through the registry. ``env``: only
        for a model saved from an environment of no task, which load cannot rebuild (the same
        class and spaces, checked)."""
        return cls(*read_model(path, env))


PPOModel = Model


def evaluation_of(env: Environment) -> Evaluation:
    """The held-out evaluation of ``env``'s task, or the generic one for an environment of no task."""
    task = task_of_env(env)
    return heldout_evaluation if task is None else task.env_evaluation


def default_config_of(env: Environment, algorithm: str = DEFAULT_ALGORITHM) -> AlgorithmConfig:
    """``algorithm``'s defaults for ``env``. PPO: those of ``env``'s task (hrv: ``HRV_DEFAULTS``;
    gymnax:CartPole-v1: PureJaxRL's); for an environment built directly by a user's factory
    (``my_env.make_env()``, no task made it), those of the ``module:factory`` task resolved for
    its class, else its module's ``PPO_CONFIG``; else those for its action space
    (``purehr.tasks.environment_task``). Another algorithm: its task's defaults for it where the
    task records them (``Task.default_configs``), else the algorithm's own. Defaults not a
    task's are said in one line: silently, a user's tuned defaults would be lost without a word."""
    get_algorithm(algorithm)  # an unknown name, refused naming the known ones
    task = task_of_env(env) or resolved_task_of_class(env)
    base = getattr(env, "unwrapped", env)
    if algorithm != DEFAULT_ALGORITHM:
        recorded = getattr(task, "default_configs", None) or {}
        if algorithm in recorded:
            return recorded[algorithm]
        config = default_config(algorithm)
        _warn_defaults(
            base, f"the defaults of {algorithm}" + (f" (task {task.name} records none)" if task else ""), config
        )
        return config
    if task is not None:
        return task.default_config
    module_config = getattr(sys.modules.get(type(base).__module__), "PPO_CONFIG", None)
    if isinstance(module_config, get_algorithm(DEFAULT_ALGORITHM).config_class()):
        return module_config
    config = default_config_for(env)
    kind = "continuous" if isinstance(env.action_space(env.default_params), spaces.Box) else "discrete"
    _warn_defaults(
        base,
        f"the defaults for a {kind} action space, as its module {type(base).__module__} defines no PPO_CONFIG",
        config,
    )
    return config


def _warn_defaults(base: Any, which: str, config: AlgorithmConfig) -> None:
    """The one line that says which defaults an environment of no task trains with."""
    warnings.warn(
        f"{type(base).__name__} belongs to no task: training with {which} ({config.batch_size} environment steps "
        f"per update, {hyperparameter_text(config)}, {network_text(config)}); pass them by name, or build the "
        "environment through its task (get_task('module:factory').make_env(), register_task)",
        UserWarning,
        stacklevel=4,  # the caller of train_hr_ppo / train
    )


def hyperparameter_text(config: AlgorithmConfig) -> str:
    """``learning_rate=0.0003, ...``: ``config``'s learning rates (all its continuous
    hyperparameters where none is named so), for a message about any algorithm."""
    names = algorithm_of(config).hyperparameter_names()
    rates = [name for name in names if "learning_rate" in name or name.endswith("lr")] or list(names)
    return ", ".join(f"{name}={getattr(config, name):g}" for name in rates)


def train_hr_ppo(
    env: Environment,
    timesteps: int | None = None,
    *,
    learning_rate: float | None = None,
    batch_size: int | None = None,
    gamma: float | None = None,
    clip_range: float | None = None,
    ent_coef: float | None = None,
    vf_coef: float | None = None,
    seed: int = 0,
    callback: Callable[[dict[str, float]], Any] | None = None,
    progress: bool | None = None,
    env_params=None,
    curriculum=None,
    log=None,
    log_dir: str | Path | None = None,
    **config_overrides,
) -> Model:
    """Train PPO on ``env`` with its task's defaults (an argument left None takes the task's
    value: the HRV defaults of docs/protocol.md for an ``HRWritingEnv``; an environment of no
    task, those for its action space). ``callback(metrics)`` runs on the host
    after every update; returning ``False`` ends training there, keeping the state reached.
    ``progress`` shows the protocol's progress bar on stderr once compilation is done (default:
    when stderr is a terminal). ``curriculum`` (a ``purehr.envs.hrv.Curriculum``, e.g.
    ``Curriculum()`` for the stages of docs/hrv_task.md) changes difficulty and precision inside
    the scan; the returned model's ``env_params`` are then the final stage's (what
    ``model.evaluate`` uses). Other ``PPOConfig`` fields can be passed by name (e.g.
    ``num_envs``). A budget in which no episode ended warns (its returns are all NaN).
    ``log`` (``"tensorboard"``, ``"wandb"``, a list, or a ``purehr.tracking.TrackingSettings``)
    logs every update there as it trains, into ``log_dir`` (default
    ``runs/<environment>-<UTC time>``; TensorBoard's run ``<environment>/seed_<k>``, W&B offline)."""
    _check_call(env, seed, progress)
    config = _seed_api_config(
        default_config_of(env),
        timesteps,
        learning_rate,
        batch_size,
        gamma,
        clip_range,
        ent_coef,
        vf_coef,
        config_overrides,
    )
    return _train_seed(env, config, seed, callback, progress, env_params, curriculum, log, log_dir)


def train(
    env: Environment,
    algorithm: str = DEFAULT_ALGORITHM,
    timesteps: int | None = None,
    *,
    seed: int = 0,
    callback: Callable[[dict[str, float]], Any] | None = None,
    progress: bool | None = None,
    env_params=None,
    curriculum=None,
    log=None,
    log_dir: str | Path | None = None,
    **config_fields,
) -> Model:
    """Train any registered algorithm (``"ppo"``, ``purehr.algorithms.registry.ALGORITHMS``) on
    ``env`` from its defaults for ``env`` (``default_config_of``) with ``config_fields`` over them,
    each under its config's own name (``learning_rate``, ``num_envs``, ``minibatch_size``);
    ``timesteps`` is ``total_timesteps``. Everything else as ``train_hr_ppo``: one seed, one
    jitted scan, the same callback, progress, curriculum and dashboards; the model predicts,
    evaluates, saves and loads whatever its algorithm."""
    _check_call(env, seed, progress)
    if "total_timesteps" in config_fields:
        raise TypeError("train got total_timesteps=...; pass timesteps= (its name in this API) instead")
    given = dict(config_fields, **({} if timesteps is None else {"total_timesteps": timesteps}))
    config = default_config_of(env, algorithm).replace(**given)
    return _train_seed(env, config, seed, callback, progress, env_params, curriculum, log, log_dir)


def _check_call(env: Any, seed: Any, progress: Any) -> None:
    _refuse_non_environment(env)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed={seed!r}: expected a non-negative integer")
    if progress is not None and not isinstance(progress, bool):
        raise TypeError(f"progress={progress!r}: expected True, False or None (None: when stderr is a terminal)")


def _train_seed(
    env: Environment, config: AlgorithmConfig, seed: int, callback, progress, env_params, curriculum, log, log_dir
) -> Model:
    """One seed of ``config`` on ``env`` in one jitted call, as ``train_hr_ppo`` and ``train`` describe."""
    env_params = env.default_params if env_params is None else env_params
    check_env_params(env, env_params)
    if curriculum is not None:
        if not isinstance(curriculum, Curriculum):
            raise TypeError(f"curriculum={curriculum!r}: expected a purehr.envs.hrv.Curriculum or None")
        curriculum.check_params(env_params)
    if progress is None:
        progress = getattr(sys.stderr, "isatty", lambda: False)()
    tracking = _api_tracking(log, log_dir, env.name, seed, config, defines_success(env))
    bar = _progress_bar(env, config) if progress else None
    train = make_train(
        config,
        env,
        env_params,
        callback=_seed_callback(callback, bar, env.name, tracking, seed),
        env_params_schedule=curriculum_schedule(curriculum, config),
    )
    try:
        result = train(keys_for_seeds([seed]))
    finally:
        if bar is not None:
            bar.close()
        if tracking is not None:
            tracking.close()
    if curriculum is not None:
        env_params = curriculum.final_params(env_params)
    model = _trained_model(result, train.algorithm, env, env_params, config, seed, curriculum)
    _warn_if_no_episode_ended(model)
    return model


def _seed_api_config(
    defaults: AlgorithmConfig,
    timesteps,
    learning_rate,
    batch_size,
    gamma,
    clip_range,
    ent_coef,
    vf_coef,
    config_overrides,
) -> AlgorithmConfig:
    """``defaults`` with the seed API's arguments that are given (not None), under their
    ``PPOConfig`` names."""
    aliased = {"total_timesteps": "timesteps", "minibatch_size": "batch_size"}.items()
    for field, argument in aliased:  # the seed API names these two its own way
        if field in config_overrides:
            raise TypeError(f"train_hr_ppo got {field}=...; pass {argument}= (its name in this API) instead")
    given = {
        "total_timesteps": timesteps,
        "learning_rate": learning_rate,
        "minibatch_size": batch_size,
        "gamma": gamma,
        "clip_range": clip_range,
        "ent_coef": ent_coef,
        "vf_coef": vf_coef,
    }
    return defaults.replace(**{name: value for name, value in given.items() if value is not None}, **config_overrides)


def _progress_bar(env: Environment, config: AlgorithmConfig) -> Progress:
    """The protocol run's progress line for one seed of ``env`` (no checkpoints here)."""
    return Progress({env.name: TaskPlan.from_config(config, protocol=None)}, num_seeds=1)


def _api_tracking(log, log_dir, name: str, seed: int, config: AlgorithmConfig, success: bool = True) -> Tracking | None:
    """The seed API's dashboards (``log``), one run ``<name>/seed_<seed>`` in ``log_dir``
    (``success`` False: the environment defines none, so no success tag)."""
    settings = TrackingSettings.checked(log)
    if not settings.enabled:
        return None
    if log_dir is None:
        log_dir = Path("runs") / f"{name}-{datetime.datetime.now(datetime.UTC):%Y%m%d-%H%M%S}"
    settings = replace(settings, log_dir=str(log_dir)).with_run_ids([name], [seed]).with_owner()
    settings.check_writable(Path(log_dir))
    # the check and the claim one step: two calls with one log_dir never share a run folder
    settings.take_log_dir(Owner(settings.owner), [run_label(name, seed)], resumed=False, logged_here=False)
    identity = run_identity(environment_description())
    run = {"config": config.to_dict(), "identity": identity, "wandb_id": settings.run_id(name, seed)}
    run["defines_success"] = success
    return start_tracking(settings, Path(log_dir), name, {(name, seed): run})


def _seed_callback(
    callback: Callable | None, bar: Progress | None, task_name: str, tracking: Tracking | None = None, seed: int = 0
) -> Callable | None:
    """``make_train``'s host callback: the progress bar (started at the first update, once the
    program is compiled), the dashboards, then the user's callback with the one seed's metrics
    as floats."""
    if callback is None and bar is None and tracking is None:
        return None

    def on_update(metrics):
        if bar is not None:
            if bar.started is None:
                bar.start()
            bar.on_update(task_name, metrics)
        if tracking is not None:
            tracking.updates(task_name, [seed], metrics)
        if callback is not None:
            return callback({name: value[0].item() for name, value in metrics.items()})
        return None

    return on_update


def _warn_if_no_episode_ended(model: Model) -> None:
    """A ``UserWarning`` naming the numbers when the whole budget trained and no episode ended
    (every training return NaN): too few steps per environment for one episode."""
    config, returns = model.config, model.metrics["mean_episode_return"]
    if len(returns) != config.num_updates or not np.isnan(returns).all():
        return  # an episode ended, or the user's callback stopped training early
    steps_per_env = config.num_updates * config.num_steps
    try:
        longest = int(model.env.max_episode_steps(model.env_params))
    except NotImplementedError:
        longest = None
    lasts, enough = "", ""
    if longest:
        lasts = f"; an episode lasts up to {longest} steps"
        enough = f" (every environment ends one by timesteps={-(-longest // config.num_steps) * config.batch_size:,})"
    warnings.warn(
        f"no episode ended in {config.num_updates} updates of {config.num_envs} envs x {config.num_steps} steps "
        f"(timesteps={config.total_timesteps}, {steps_per_env} steps per environment{lasts}): "
        f"mean_episode_return and train_success_rate are NaN and the policy has hardly trained; give a larger "
        f"timesteps{enough}",
        UserWarning,
        stacklevel=4,  # the caller of train_hr_ppo / train
    )


def _refuse_non_environment(env: Any) -> None:
    """``TypeError`` unless ``env`` is an Environment instance (a class gets the hint to call it)."""
    if isinstance(env, Environment):
        return
    shown = f"the class {env.__name__}" if isinstance(env, type) else f"the {type(env).__name__} {env!r}"
    hint = (
        f"an instance: {env.__name__}()"
        if isinstance(env, type) and issubclass(env, Environment)
        else "an Environment instance such as purehr.HRWritingEnv(hrv_dim=8)"
    )
    raise TypeError(f"env is {shown}; expected {hint}")


def _trained_model(
    result: TrainResult,
    algorithm: Algorithm,
    env: Environment,
    env_params,
    config: AlgorithmConfig,
    seed: int,
    curriculum: Curriculum | None,
) -> Model:
    """The one seed's model out of a training result, the metrics of the updates it completed
    (a callback may have stopped it early); ``TrainingDiverged`` when it diverged."""
    params = jax.tree.map(lambda x: x[0], algorithm.network_params(result.runner))
    metrics = {name: np.asarray(value[0]) for name, value in result.metrics.items()}
    completed = metrics["update"] > 0
    metrics = {name: value[completed] for name, value in metrics.items()}
    model = Model(env, env_params, config, params, metrics, seed)
    model.curriculum = curriculum
    first_diverged = int(np.asarray(algorithm.diverged_at_update(result.runner))[0])
    if first_diverged:
        nonfinite = metrics.get("nonfinite_states", np.zeros_like(metrics["update"]))
        advice = environment_advice(int(nonfinite[metrics["update"] <= first_diverged].sum()))
        raise TrainingDiverged(
            f"training diverged at update {first_diverged} ({first_diverged * config.batch_size:,} env steps): a "
            f"loss or parameter became NaN or infinite ({hyperparameter_text(config)}); the parameters "
            f"stayed frozen at update {first_diverged - 1}. The frozen model is this error's .model; "
            + (f"{advice}, then train again" if advice else "train again")
            + " with a smaller learning rate or other settings",
            model,
            first_diverged,
        )
    return model


class TrainingDiverged(RuntimeError):
    """``train_hr_ppo`` ended with non-finite losses or parameters: not a trained model. The
    model frozen at the last finite update is kept in ``.model`` for inspection, and
    ``.update`` is the first update that diverged."""

    def __init__(self, message: str, model: Model, update: int):
        super().__init__(message)
        self.model = model
        self.update = update


HRPPOModel = Model
