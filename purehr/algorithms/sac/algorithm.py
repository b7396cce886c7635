"""The SAC algorithm as pure functions: ``make_sac`` builds the per-seed ``init`` and ``update``
closures (``purehr.algorithms.trainer.make_train`` scans ``vmap(update)`` over all updates inside
one jit, as it does PPO's).

Read top to bottom, ``make_sac`` is the whole algorithm: ``num_steps`` steps of ``num_envs``
environments (a scan with auto-reset; uniform random actions in the warm-up updates), their
insertion into the replay buffer held in the state, then ``gradient_steps`` gradient steps (a
scan): the twin critics towards the soft target, the actor against the updated critics, the
temperature towards the target entropy, and the target critics by Polyak averaging; none in
the warm-up updates (a real branch under the seed vmap: ``batch_cond``). An update's random
numbers come from one hash call (``draws``). Options: the rollout's normals an AR(1) process
(``action_noise_correlation``, ``exploration``), the critics' targets n-step (``n_step``).

Shapes: E = ``num_envs``, T = ``num_steps``, G = ``gradient_steps``, S = ``sample_size``,
O = flat observation size, A = action dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from purehr.algorithms.rollout_metrics import rollout_metrics
from purehr.algorithms.sac import draws as draws_from
from purehr.algorithms.sac import exploration
from purehr.algorithms.sac.batch_cond import cond_any
from purehr.algorithms.sac.buffer import ReplayBuffer, add, gather, init_buffer, sample_indices
from purehr.algorithms.sac.config import SACConfig, SACHyperparams
from purehr.algorithms.sac.loss import (
    Transition,
    actor_loss,
    critic_loss,
    sample_actions,
    soft_targets,
    temperature_loss,
)
from purehr.algorithms.sac.metrics import LOSS_STATISTICS, METRIC_NAMES
from purehr.algorithms.sac.n_step import n_step_transitions, window_rows
from purehr.algorithms.sac.networks import Actor, TwinCritic, env_distribution, polyak, unit_to_env
from purehr.engine.env_params import make_env_params_at
from purehr.engine.user_network import StructuredInput, build_network, check_fits, is_recurrent, is_whole
from purehr.envs.base import (
    Environment,
    all_finite_in_one_reduction,
    check_env_params,
    check_environment,
    varying_with,
)
from purehr.envs.spaces import Box, flat_dim, flatten_observation
from purehr.envs.wrappers import training_wrappers
from purehr.types import EnvParamsSchedule

LEARNED_FIELDS = (
    "actor_params",
    "critic_params",
    "target_critic_params",
    "log_alpha",
    "actor_opt_state",
    "critic_opt_state",
    "temperature_opt_state",
)
"""What SAC learns: a PBT member copies these from its parent. Not the replay buffer: off-policy
learning may use any policy's transitions, the member's own are consistent with the environments
it keeps, and the buffer is by far the largest part of the state (copying it at every exploit
would move buffer_size transitions per member for nothing the learning needs)."""


@struct.dataclass
class SACState:
    """Everything one seed needs to continue training bit-for-bit, the buffer included."""

    actor_params: Any
    critic_params: Any
    target_critic_params: Any
    log_alpha: jax.Array  # float32 []: the temperature is exp(log_alpha)
    actor_opt_state: Any
    critic_opt_state: Any
    temperature_opt_state: Any
    buffer: ReplayBuffer
    env_state: Any
    observation: Any
    key: jax.Array
    update_index: jax.Array  # int32 []
    hparams: SACHyperparams
    diverged_at: jax.Array  # int32 []: first update with non-finite losses or parameters, 0 if none
    exploration_noise: Any = ()  # [E, A] the rollout's AR(1) noise (``exploration``); () when white


class Step(NamedTuple):
    """What one environment step records for E environments ([T, E, ...] once stacked): the
    transition the buffer stores and what ``rollout_metrics`` reads."""

    transition: Transition
    reward: jax.Array
    episode_done: jax.Array
    episode_return: jax.Array
    episode_success: jax.Array
    nan_action: jax.Array
    invalid_action: jax.Array
    nonfinite_state: jax.Array
    diagnostics: dict[str, jax.Array]


@dataclass(frozen=True)
class SAC:
    """The per-seed pieces of SAC for one environment: a ``purehr.algorithms.base.Algorithm``."""

    config: SACConfig
    env: Environment
    env_params: Any
    actor: Actor
    critic: TwinCritic
    init: Callable[[jax.Array, SACHyperparams | None], SACState]
    update: Callable[[SACState], tuple[SACState, dict[str, jax.Array]]]
    env_params_at: Callable[[jax.Array, SACHyperparams], Any]

    name = "sac"
    metric_names = METRIC_NAMES
    recurrent = False
    population_fields = LEARNED_FIELDS

    @property
    def num_updates(self) -> int:
        return self.config.num_updates

    def network_params(self, state: SACState):
        return state.actor_params

    def diverged_at_update(self, state: SACState):
        return state.diverged_at

    def policy(self, network_params, deterministic: bool = True):
        """``policy(obs, t, key) -> env action`` for one unbatched observation: tanh of the mean
        mapped to the action bounds, or a sample with ``deterministic=False``."""
        space = self.env.action_space(self.env_params)
        low, high = _bounds(space)

        def act(observation, t, key):
            mean, log_std = self.actor.apply(network_params, flatten_observation(observation).astype(jnp.float32))
            distribution = env_distribution(mean, log_std, low, high)
            latent = distribution.mode() if deterministic else distribution.sample(key)
            return distribution.to_env_action(latent).reshape(space.shape)

        return act


def _bounds(space: Box) -> tuple[jax.Array, jax.Array]:
    """The Box's bounds, flat [A] float32."""
    shape = (flat_dim(space),)
    return tuple(
        jnp.broadcast_to(jnp.asarray(b, jnp.float32), space.shape).reshape(shape) for b in (space.low, space.high)
    )


def check_action_space(env: Environment, env_params) -> Box:
    """SAC's policy is a squashed Gaussian between finite bounds: any other space is refused by name."""
    space = env.action_space(env_params)
    if not isinstance(space, Box):
        raise ValueError(
            f"SAC needs a continuous (Box) action space; {getattr(env, 'name', type(env).__name__)} has {space!r} "
            "(use ppo, or pqn for discrete actions)"
        )
    if not (np.all(np.isfinite(np.asarray(space.low))) and np.all(np.isfinite(np.asarray(space.high)))):
        raise ValueError(f"SAC squashes actions into the bounds of {space!r}; expected finite low and high")
    return space


def sac_networks(config: SACConfig, observation_space, space: Box) -> tuple[Actor, TwinCritic]:
    """The actor and twin critics; with ``config.network`` each over its own copy of the user's
    torso (the config's MLPs as their heads), checked against the spaces before anything compiles."""
    action_size = flat_dim(space)
    if config.network is None:
        return Actor(config.actor_hidden, config.activation, action_size), TwinCritic(
            config.critic_hidden, config.activation
        )
    torso = build_network(config.network, observation_space, space)
    if is_recurrent(torso) or is_whole(torso):
        raise ValueError(
            f"SACConfig.network={config.network!r} is a "
            f"{'recurrent torso' if is_recurrent(torso) else 'whole network'}; "
            "SAC takes a feed-forward torso observation -> features (its actor and critic heads are its own)"
        )
    actor = Actor(
        config.actor_hidden, config.activation, action_size, StructuredInput(torso.clone(), observation_space)
    )
    critic = TwinCritic(config.critic_hidden, config.activation, StructuredInput(torso.clone(), observation_space))
    size = flat_dim(observation_space)
    observation, action = jnp.zeros((size,), jnp.float32), jnp.zeros((action_size,), jnp.float32)

    def init():
        return actor.init(jax.random.PRNGKey(0), observation), critic.init(jax.random.PRNGKey(1), observation, action)

    def check(params):
        mean, _ = jax.eval_shape(actor.apply, params[0], jnp.zeros((3, size), jnp.float32))
        q = jax.eval_shape(critic.apply, params[1], jnp.zeros((3, size), jnp.float32), jnp.zeros((3, action_size)))
        if mean.shape != (3, action_size) or q.shape != (3, 2):
            raise ValueError(
                f"for 3 observations: means {mean.shape}, Q {q.shape}; expected (3, {action_size}), (3, 2)"
            )

    expected = "a torso observation [N, ...] -> features [N, F]"
    check_fits(config.network, init, observation_space, space, expected, check)
    return actor, critic


def make_sac(
    config: SACConfig, env: Environment, env_params=None, env_params_schedule: EnvParamsSchedule | None = None
) -> SAC:
    """The per-seed ``init`` and ``update`` of SAC on ``env``, unbatched: vmap them over seeds.

    ``env`` is wrapped with auto-reset and episode statistics here; ``env_params`` default to
    ``env.default_params`` (SAC's gamma written into them where they have one, for shaping);
    ``env_params_schedule(params, update_index)`` is a curriculum. ``ValueError`` for an action
    space that is not a bounded Box; ``TypeError`` for an environment training cannot use.
    """
    check_environment(env)
    env_params = env.default_params if env_params is None else env_params
    check_env_params(env, env_params)
    space = check_action_space(env, env_params)
    low, high = _bounds(space)
    action_size = flat_dim(space)
    observation_size = flat_dim(env.observation_space(env_params))
    actor, critic = sac_networks(config, env.observation_space(env_params), space)
    train_env = training_wrappers(env)
    num_envs, num_steps, gradient_steps = config.num_envs, config.num_steps, config.gradient_steps
    flatten_batch = jax.vmap(lambda o: flatten_observation(o).astype(jnp.float32))
    # Static: with white noise the state has no noise field, so its layout, its checkpoints and
    # the program are SAC's from before the option (checkpoints' stored form drops empty fields).
    correlation = config.action_noise_correlation
    correlated = correlation > 0

    def optimizers(hparams: SACHyperparams):
        # Built at every update (same state layout): the learning rates are traced values.
        return tuple(
            optax.adam(lr)
            for lr in (hparams.actor_learning_rate, hparams.critic_learning_rate, hparams.temperature_learning_rate)
        )

    env_params_at = make_env_params_at(env_params, env_params_schedule)
    per_step = (num_steps, num_envs)
    learn_shapes = {
        "rows": (gradient_steps, config.sample_size),
        "noise": (gradient_steps, 2, config.sample_size, action_size),
    }
    fold = math.prod(learn_shapes["rows"]) + math.prod(learn_shapes["noise"]) <= draws_from.FOLD_WORDS

    def update_shapes(key: jax.Array) -> dict[str, tuple[int, ...]]:
        """What an update draws before it learns, in words (``draws``): the next state's key and
        the environment steps' draws; then the gradient steps' draws where they are small
        (``draws.FOLD_WORDS``), else a key they draw from only where they run."""
        words = draws_from.key_words(key)
        learning = learn_shapes if fold else {"learn_key": words}
        return {
            "key": words,
            "step_keys": per_step + words,
            "reset_keys": per_step + words,
            "action_noise": per_step + (action_size,),
            "uniform_actions": per_step + (action_size,),
            **learning,
        }

    def init(key: jax.Array, hparams: SACHyperparams | None = None) -> SACState:
        hparams = config.hyperparams() if hparams is None else hparams
        key, actor_key, critic_key, reset_key = jax.random.split(key, 4)
        observation0 = jnp.zeros((observation_size,), jnp.float32)
        action0 = jnp.zeros((action_size,), jnp.float32)
        actor_params = actor.init(actor_key, observation0)
        critic_params = critic.init(critic_key, observation0, action0)
        log_alpha = jnp.log(jnp.float32(config.initial_temperature))
        actor_opt, critic_opt, temperature_opt = optimizers(hparams)
        example = Transition(observation0, action0, jnp.float32(0), jnp.bool_(False), observation0)
        noise = exploration.initial_noise(jax.random.fold_in(reset_key, 1), num_envs, action_size) if correlated else ()
        observation, env_state = jax.vmap(train_env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), env_params_at(jnp.int32(0), hparams)
        )
        return SACState(
            actor_params,
            critic_params,
            critic_params,
            log_alpha,
            actor_opt.init(actor_params),
            critic_opt.init(critic_params),
            temperature_opt.init(log_alpha),
            init_buffer(example, config.buffer_size),
            env_state,
            observation,
            key,
            jnp.int32(0),
            hparams,
            jnp.int32(0),
            noise,
        )

    def environment_steps(state: SACState, bits: dict[str, jax.Array], explore: jax.Array):
        """T steps of E environments: (env state, observation, Step of [T, E, ...], the
        exploration noise's state). The policy acts (sampled), or uniform random actions where
        ``explore``. Every draw is made before the scan in batched calls (PPO's rollout does
        the same; docs/protocol.md), from ``bits``, the update's one draw (``draws``); with
        ``action_noise_correlation`` the policy's normals are the AR(1) process driven by
        them (``exploration``), advanced in the warm-up too, so it is stationary when the
        policy starts acting."""
        step_params = env_params_at(state.update_index, state.hparams)
        reset_every = jax.vmap(jax.vmap(env.reset, in_axes=(0, None)), in_axes=(0, None))
        normals = draws_from.normal(bits["action_noise"])  # [T, E, A]
        noise_state = state.exploration_noise
        if correlated:
            noise_state, normals = exploration.ar1_sequence(noise_state, normals, correlation)
        draws = (
            normals,
            draws_from.uniform(bits["uniform_actions"], -1.0, 1.0),
            draws_from.as_keys(bits["step_keys"], state.key),
            reset_every(draws_from.as_keys(bits["reset_keys"], state.key), step_params),
        )

        def env_step(carry, draw):
            env_state, observation = carry
            noise, uniform, step_keys, resets = draw
            flat = flatten_batch(observation)  # [E, O]
            action, _ = sample_actions(actor.apply, state.actor_params, flat, noise)  # [E, A] unit box
            action = jnp.where(explore, uniform, action)
            env_action = unit_to_env(action, low, high).reshape((num_envs, *space.shape))
            next_observation, env_state, reward, terminated, _, info = jax.vmap(
                train_env.step_with_reset, in_axes=(0, 0, 0, 0, None)
            )(step_keys, env_state, env_action, resets, step_params)
            reward = reward.astype(jnp.float32)
            transition = Transition(flat, action, reward, terminated, flatten_batch(info["final_observation"]))
            record = Step(
                transition,
                reward,
                info["episode_done"],
                info["episode_return"],
                info["episode_success"],
                info["nan_action"],
                info["invalid_action"],
                info["nonfinite_state"],
                train_env.diagnostics(info),
            )
            return (env_state, next_observation), record

        (env_state, observation), steps = jax.lax.scan(env_step, (state.env_state, state.observation), draws)
        return env_state, observation, steps, noise_state

    def sampled_batch(buffer: ReplayBuffer, rows: jax.Array, gamma: jax.Array) -> tuple[Transition, jax.Array]:
        """The transitions at ``rows`` [S] and the discount of their bootstrap: gamma, or with
        ``n_step`` > 1 each row's n-step window summed (``n_step``) and gamma^m."""
        if config.n_step == 1:
            return gather(buffer, rows), gamma
        window = gather(buffer, window_rows(rows, config.n_step, num_envs, buffer.capacity))
        return n_step_transitions(window, gamma)

    def learn(operands):
        """G gradient steps on samples of the buffer, then the divergence freeze: (the learned
        fields, summed statistics). ``operands``: (learned fields, hyperparameters, buffer,
        the draws' bits or key, update index, learning, diverged_at): explicit, as ``cond_any``
        needs."""
        old, hparams, buffer, draw, update_index, learning, diverged_at = operands
        actor_opt, critic_opt, temperature_opt = optimizers(hparams)
        target_entropy = hparams.target_entropy_per_dimension * action_size
        bits = draw if fold else draws_from.split_bits(draw, learn_shapes)
        draws = (
            sample_indices(bits["rows"], buffer.size),  # [G, S]
            draws_from.normal(bits["noise"]),  # [G, 2, S, A]: the next actions' and the actor's
        )

        def gradient_step(carry, draw):
            learned, sums = carry
            actor_params, critic_params, target_params, log_alpha, actor_os, critic_os, temperature_os = learned
            rows, (next_noise, noise) = draw
            batch, discount = sampled_batch(buffer, rows, hparams.gamma)  # Transition of [S, ...]
            alpha = jnp.exp(log_alpha)
            next_action, next_log_prob = sample_actions(actor.apply, actor_params, batch.next_observation, next_noise)
            next_q = critic.apply(target_params, batch.next_observation, next_action)
            targets = soft_targets(batch.reward, batch.terminated, next_q, next_log_prob, alpha, discount)
            (c_loss, q_mean), grads = jax.value_and_grad(critic_loss, has_aux=True)(
                critic_params, critic.apply, batch, targets
            )
            updates, critic_os = critic_opt.update(grads, critic_os, critic_params)
            critic_params = optax.apply_updates(critic_params, updates)
            (a_loss, log_prob), grads = jax.value_and_grad(actor_loss, has_aux=True)(
                actor_params, actor.apply, critic.apply, critic_params, batch.observation, noise, alpha
            )
            updates, actor_os = actor_opt.update(grads, actor_os, actor_params)
            actor_params = optax.apply_updates(actor_params, updates)
            t_loss, grad = jax.value_and_grad(temperature_loss)(log_alpha, log_prob, target_entropy)
            updates, temperature_os = temperature_opt.update(grad, temperature_os, log_alpha)
            log_alpha = optax.apply_updates(log_alpha, updates)
            target_params = polyak(target_params, critic_params, hparams.tau)
            stats = dict(
                critic_loss=c_loss,
                actor_loss=a_loss,
                temperature_loss=t_loss,
                alpha=alpha,
                entropy=-jnp.mean(log_prob),
                q_mean=q_mean,
            )
            learned = (actor_params, critic_params, target_params, log_alpha, actor_os, critic_os, temperature_os)
            return (learned, jax.tree.map(jnp.add, sums, stats)), None

        no_stats = varying_with({name: jnp.zeros((), jnp.float32) for name in LOSS_STATISTICS}, update_index)
        (learned, sums), _ = jax.lax.scan(gradient_step, (old, no_stats), draws)
        stats = {name: total / gradient_steps for name, total in sums.items()}

        # --- divergence: a seed whose losses or parameters stop being finite is frozen ---
        newly_diverged = jnp.logical_and(learning, jnp.logical_not(all_finite_in_one_reduction((stats, learned))))
        keep_old = jnp.logical_or(jnp.logical_not(learning), jnp.logical_or(diverged_at > 0, newly_diverged))
        learned = jax.tree.map(lambda o, n: jnp.where(keep_old, o, n), old, learned)
        diverged_at = jnp.where(diverged_at > 0, diverged_at, jnp.where(newly_diverged, update_index + 1, 0))
        return learned, stats, diverged_at.astype(jnp.int32)

    def warm_up(operands):
        """A warm-up update's learning: none (the learned fields as they were, NaN statistics)."""
        old, _, _, _, update_index, _, diverged_at = operands
        nan = varying_with({name: jnp.full((), jnp.nan, jnp.float32) for name in LOSS_STATISTICS}, update_index)
        return old, nan, diverged_at

    def update(state: SACState) -> tuple[SACState, dict[str, jax.Array]]:
        bits = draws_from.split_bits(state.key, update_shapes(state.key))
        key = draws_from.as_keys(bits["key"], state.key)
        draw = {name: bits[name] for name in learn_shapes} if fold else draws_from.as_keys(bits["learn_key"], state.key)
        learning = state.update_index >= config.warmup_updates
        env_state, observation, steps, noise_state = environment_steps(state, bits, jnp.logical_not(learning))
        buffer = add(state.buffer, jax.tree.map(lambda x: x.reshape((-1, *x.shape[2:])), steps.transition))
        # No gradient step in the warm-up updates: a cond on the update counter, kept a branch
        # under the seed vmap by ``cond_any`` (the counter is the same for every seed of a loop;
        # ``learn`` keeps the old fields of any seed still warming up all the same).
        old = tuple(getattr(state, name) for name in LEARNED_FIELDS)
        operands = (old, state.hparams, buffer, draw, state.update_index, learning, state.diverged_at)
        learned, stats, diverged_at = cond_any(learning, learn, warm_up, operands)

        metrics = {name: jnp.where(learning, value, jnp.nan) for name, value in stats.items()}
        metrics.update(rollout_metrics(steps))
        metrics["update"] = state.update_index + 1
        metrics["diverged_at_update"] = diverged_at
        next_state = state.replace(
            **dict(zip(LEARNED_FIELDS, learned, strict=True)),
            buffer=buffer,
            env_state=env_state,
            observation=observation,
            key=key,
            update_index=state.update_index + 1,
            diverged_at=diverged_at,
            exploration_noise=noise_state,
        )
        return next_state, metrics

    return SAC(config, env, env_params, actor, critic, init, update, env_params_at)
