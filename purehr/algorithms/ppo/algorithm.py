"""The PPO algorithm as pure functions: ``make_ppo`` builds the per-seed ``init``,
``rollout`` and ``update`` closures (``purehr.algorithms.trainer.make_train`` scans ``vmap(update)``
over all updates inside one jit).

Read top to bottom, ``make_ppo`` is the whole algorithm: rollout (a scan over steps with
auto-reset), GAE (a reverse scan), then epochs (a scan) of minibatches (a scan over a
permutation). The scan over updates is ``purehr.engine.loop.run_updates``, which the multi-task
runner in ``purehr.run`` drives too with its checkpoint hooks; that is why the scan over
updates is outside and the vmap over seeds inside (see docs/protocol.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from purehr.algorithms.ppo.config import PPOConfig, PPOHyperparams
from purehr.algorithms.ppo.loss import Batch, ppo_loss
from purehr.algorithms.ppo.memory import working_set_bytes
from purehr.algorithms.ppo.metrics import GRADIENT_STATISTICS, LOSS_STATISTICS, METRIC_NAMES
from purehr.algorithms.ppo.policy_core import FeedForwardCore
from purehr.algorithms.ppo.recurrent import RecurrentCore
from purehr.algorithms.ppo.rewards import initial_return_statistics, training_rewards
from purehr.algorithms.ppo.torso import check_user_network, network_parts
from purehr.algorithms.rollout_metrics import rollout_metrics
from purehr.engine.distributions import (
    action_mask_reader,
    make_distribution,
    masked_logits,
    policy_output_size,
    sampling_noise,
)
from purehr.engine.env_params import make_env_params_at
from purehr.engine.gae import generalized_advantages
from purehr.engine.networks import ActorCritic, RecurrentActorCritic, update_observation_statistics
from purehr.engine.schedules import learning_rate_schedule
from purehr.envs.base import Environment, all_finite_in_one_reduction, check_env_params, check_environment, varying_with
from purehr.envs.spaces import Box, flat_dim, flatten_observation
from purehr.envs.wrappers import training_wrappers
from purehr.types import EnvParamsSchedule


@struct.dataclass
class RunnerState:
    """Everything one seed needs to continue training bit-for-bit."""

    params: Any
    opt_state: Any
    env_state: Any
    observation: Any
    key: jax.Array
    update_index: jax.Array
    hparams: PPOHyperparams
    policy_state: Any = ()
    """A recurrent policy's carry into the next rollout (``purehr.algorithms.ppo.recurrent``); ``()`` for
    the feed-forward one, which adds no leaf: its checkpoints keep their layout and digests."""
    return_statistics: Any = ()
    """The running statistics of the discounted return with ``normalize_returns``
    (``purehr.algorithms.ppo.rewards.ReturnStatistics``); ``()`` without: no leaf, as above."""


class Transition(NamedTuple):
    """What the rollout records at one step of every environment: [num_envs, ...] per step,
    [num_steps, num_envs, ...] once the rollout scan has stacked them."""

    observation: jax.Array  # flat observation the action was chosen from
    action: jax.Array  # as sampled (tanh-Gaussian: the latent, pre-squash sample)
    log_prob: jax.Array
    value: jax.Array
    reward: jax.Array  # float32
    terminated: jax.Array
    done: jax.Array  # terminated or truncated: the episode ended here
    previous_final_value: Any  # V(final observation of the *previous* step), or (): see the rollout
    episode_done: jax.Array  # episode statistics from the wrappers (metrics only)
    episode_return: jax.Array
    episode_success: jax.Array
    nan_action: jax.Array
    invalid_action: jax.Array
    nonfinite_state: jax.Array
    diagnostics: dict[str, jax.Array]  # the environment's own per-step diagnostics
    memory: Any = ()  # what a recurrent policy's update recomputes from (its resets); () without
    final_observation: Any = ()  # flat, before any auto-reset, where the core values it afterwards


class RolloutRandomness(NamedTuple):
    """Every random draw of one rollout, [num_steps, num_envs, ...]: the policy's sampling
    noise, the environments' step keys, and the reset each environment continues from if its
    episode ends at that step (``AutoResetWrapper.step_with_reset``)."""

    sampling_noise: jax.Array
    step_keys: jax.Array
    resets: tuple[Any, Any]  # (observation, state) of env.reset


class Rollout(NamedTuple):
    """One rollout of every environment: where it left them, what it recorded, GAE's next
    values [num_steps, num_envs] (V of what followed each step in the same episode), and the
    runner's key after the rollout's draws."""

    env_state: Any
    observation: Any
    trajectory: Transition
    next_values: jax.Array
    key: jax.Array
    policy_state: Any  # the policy's carry into the next rollout (() without memory)


@dataclass(frozen=True)
class PPO:
    """The per-seed pieces of PPO for one environment: a ``purehr.algorithms.base.Algorithm``."""

    config: PPOConfig
    env: Environment
    env_params: Any
    network: ActorCritic | RecurrentActorCritic
    core: PolicyCore
    init: Callable[[jax.Array, PPOHyperparams | None], RunnerState]
    update: Callable[[RunnerState], tuple[RunnerState, dict[str, jax.Array]]]
    rollout: Callable[[RunnerState], Rollout]
    """``rollout(runner)``: the update's rollout alone (the throughput benchmark times it)."""
    env_params_at: Callable[[jax.Array, PPOHyperparams], Any]
    """``env_params_at(update_index, hparams)``: the environment parameters that update trains
    on (PPO's discount written into them; the curriculum's stage, if any)."""

    name = "ppo"
    metric_names = METRIC_NAMES
    population_fields = ("params", "opt_state")  # observation statistics live in params

    @property
    def num_updates(self) -> int:
        return self.config.num_updates

    @property
    def recurrent(self) -> bool:
        return isinstance(self.core, RecurrentCore)

    def network_params(self, runner: RunnerState):
        return runner.params

    def working_set_bytes(self, state_shapes: RunnerState, observation_size: int) -> int:
        """What one seed's update holds beyond its state (``purehr.algorithms.ppo.memory``)."""
        return working_set_bytes(self.config, state_shapes, observation_size)

    def diverged_at_update(self, runner: RunnerState) -> jax.Array:
        """See ``diverged_at_update`` below: read from Adam's step count, no field of its own."""
        return diverged_at_update(runner, self.config)

    def policy(self, network_params, deterministic: bool = True):
        """A policy ``policy(obs, t, key) -> env action`` for one unbatched observation; for a
        recurrent config a ``purehr.envs.policies.RecurrentPolicy`` (it carries its memory).
        An observation's ``"action_mask"`` restricts it to the legal actions."""
        action_space = self.env.action_space(self.env_params)
        read_mask = action_mask_reader(self.env.observation_space(self.env_params), action_space)
        return self.core.policy(network_params, action_space, deterministic, read_mask)


PolicyCore = FeedForwardCore | RecurrentCore


def make_policy_core(config: PPOConfig, action_space, observation_space=None) -> PolicyCore:
    """The network of ``config.policy`` ("mlp" or "gru"), or of ``config.network`` (a user's),
    from its parts (``purehr.algorithms.ppo.torso``), and how the algorithm uses it."""
    outputs = policy_output_size(action_space)
    parts = network_parts(config, observation_space, action_space, outputs)
    shared = dict(
        policy_output_size=outputs,
        continuous=isinstance(action_space, Box),
        log_std_init=config.log_std_init,
        normalize_observations=config.normalize_observations,
    )
    sizes = (config.num_envs, config.num_steps, config.num_minibatches)
    if "torso" in parts:
        core = RecurrentCore(RecurrentActorCritic(**parts, **shared), *sizes)
    else:
        core = FeedForwardCore(ActorCritic(**parts, **shared), *sizes)
    if config.network is not None:
        check_user_network(config, core, observation_space, action_space, outputs)
    return core


def make_ppo(
    config: PPOConfig, env: Environment, env_params=None, env_params_schedule: EnvParamsSchedule | None = None
) -> PPO:
    """The per-seed ``init`` and ``update`` of PPO on ``env``, unbatched: vmap them over seeds.

    Args:
      config: sizes, network and the defaults of the hyperparameters. Shapes below use
        E = ``num_envs``, T = ``num_steps``, B = ``batch_size`` = E * T, M = ``minibatch_size``.
      env: a functional environment (``purehr.envs.base.Environment``); it is wrapped with
        auto-reset and episode statistics here.
      env_params: its parameters (default ``env.default_params``); PPO's ``gamma`` is written
        into them when they have one (reward shaping stays policy-invariant).
      env_params_schedule: ``(env_params, fraction of training done) -> env_params`` for the
        update (a curriculum); evaluated from the update counter inside the scan.

    Returns:
      ``PPO`` with ``init(key [2] uint32, hparams=None) -> RunnerState`` and
      ``update(RunnerState) -> (RunnerState, metrics)``: one rollout of E environments x T
      steps, GAE, then ``num_epochs`` epochs of B / M minibatches; metrics are scalars.

    Raises ``TypeError`` before any tracing for an environment without what training needs
    (``purehr.envs.base.check_environment``) or parameters not of its params type.
    """
    check_environment(env)
    env_params = env.default_params if env_params is None else env_params
    check_env_params(env, env_params)
    action_space = env.action_space(env_params)
    observation_size = flat_dim(env.observation_space(env_params))
    core = make_policy_core(config, action_space, env.observation_space(env_params))
    network = core.network
    train_env = training_wrappers(env)
    num_envs, num_steps = config.num_envs, config.num_steps
    num_minibatches = config.num_minibatches
    num_updates = config.num_updates
    flatten_batch = jax.vmap(flatten_observation)
    # an observation's "action_mask" (None without one: the program of an unmasked environment)
    read_mask = action_mask_reader(env.observation_space(env_params), action_space)

    def distribution(actor_output, log_std, action_mask=None):
        return make_distribution(action_space, actor_output, log_std, action_mask)

    def legal_actions(flat_observation):
        return None if read_mask is None else read_mask(flat_observation)

    def masked_apply(params, inputs):
        """``core.apply`` with the illegal actions' logits masked (so the loss's ``distribution``
        needs no mask): its log-probs and entropy are those of the policy that acted."""
        actor_output, log_std, value = core.apply(params, inputs)
        return masked_logits(actor_output, read_mask(core.flat_observations(inputs))), log_std, value

    loss_apply = core.apply if read_mask is None else masked_apply

    def make_optimizer(hparams: PPOHyperparams) -> optax.GradientTransformation:
        # Built again at every update (same state layout) because the learning rate and the
        # gradient-norm limit are traced values of the runner, not Python constants.
        learning_rate = learning_rate_schedule(
            hparams.learning_rate, config.anneal_lr, num_minibatches * config.num_epochs, num_updates
        )
        clip = optax.clip if config.elementwise_grad_clip else optax.clip_by_global_norm
        return optax.chain(clip(hparams.max_grad_norm), optax.adam(learning_rate, eps=1e-5))

    env_params_at = make_env_params_at(env_params, env_params_schedule)

    def init(key: jax.Array, hparams: PPOHyperparams | None = None) -> RunnerState:
        hparams = config.hyperparams() if hparams is None else hparams
        key, network_key, reset_key = jax.random.split(key, 3)
        network_params = core.init_params(network_key, observation_size)
        first_params = env_params_at(jnp.int32(0), hparams)
        observation, env_state = jax.vmap(train_env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), first_params
        )
        return RunnerState(
            network_params,
            make_optimizer(hparams).init(network_params),
            env_state,
            observation,
            key,
            jnp.int32(0),
            hparams,
            core.initial_carry(),
            initial_return_statistics(config.normalize_returns, num_envs),
        )

    def rollout_randomness(key: jax.Array, step_params) -> RolloutRandomness:
        # Drawn before the step scan in three batched calls: each draw inside the scan would be
        # a loop of its own at every step on a CPU (threefry's rolled lowering), 5-6% of the
        # training time of small batches (docs/protocol.md, "Engine facts").
        noise_key, step_key, reset_key = jax.random.split(key, 3)
        per_step = (num_steps, num_envs)
        reset_every = jax.vmap(jax.vmap(env.reset, in_axes=(0, None)), in_axes=(0, None))
        return RolloutRandomness(
            sampling_noise(action_space, noise_key, per_step),
            jax.random.split(step_key, per_step),
            reset_every(jax.random.split(reset_key, per_step), step_params),
        )

    def rollout(runner: RunnerState) -> Rollout:
        step_params = env_params_at(runner.update_index, runner.hparams)
        key, rollout_key = jax.random.split(runner.key)

        # --- num_steps steps of num_envs environments, auto-reset inside ---
        # A truncated episode bootstraps from V(its final observation), the observation before
        # the auto-reset: the feed-forward core values the truncated steps' final observations
        # after the rollout, the recurrent one the previous step's in the same network call as
        # this step's, with the episode's memory (PolicyCore.step, .next_values).
        def env_step(carry, randomness: RolloutRandomness):
            env_state, observation, previous_final_observation, policy_carry = carry
            flat_observation = flatten_batch(observation)  # [E, obs]
            outputs = core.step(runner.params, policy_carry, flat_observation, previous_final_observation)
            policy = distribution(outputs.actor_output, outputs.log_std, legal_actions(flat_observation))
            action = policy.sample_from_noise(randomness.sampling_noise)
            next_observation, env_state, reward, terminated, truncated, info = jax.vmap(
                train_env.step_with_reset, in_axes=(0, 0, 0, 0, None)
            )(randomness.step_keys, env_state, policy.to_env_action(action), randomness.resets, step_params)
            transition = Transition(
                observation=flat_observation,
                action=action,
                log_prob=policy.log_prob(action),
                value=outputs.value,
                reward=reward.astype(jnp.float32),
                terminated=terminated,
                done=jnp.logical_or(terminated, truncated),
                previous_final_value=outputs.previous_final_value,
                episode_done=info["episode_done"],
                episode_return=info["episode_return"],
                episode_success=info["episode_success"],
                nan_action=info["nan_action"],
                invalid_action=info["invalid_action"],
                nonfinite_state=info["nonfinite_state"],
                diagnostics=train_env.diagnostics(info),
                memory=outputs.memory,
            )
            final_observation = flatten_batch(info["final_observation"])
            if core.records_final_observations:
                transition = transition._replace(final_observation=final_observation)
            done = transition.done
            next_carry = (env_state, next_observation, final_observation)
            return (*next_carry, core.carry_after(policy_carry, outputs, done)), transition

        first_observation = flatten_batch(runner.observation)  # its "previous final" value is unused
        (env_state, observation, last_final_observation, policy_carry), trajectory = jax.lax.scan(
            env_step,  # Transition of [T, E, ...]
            (runner.env_state, runner.observation, first_observation, runner.policy_state),
            rollout_randomness(rollout_key, step_params),
        )

        next_values = core.next_values(  # [T, E]
            runner.params, policy_carry, trajectory, flatten_batch(observation), last_final_observation
        )
        return Rollout(env_state, observation, trajectory, next_values, key, policy_carry)

    def update(runner: RunnerState) -> tuple[RunnerState, dict[str, jax.Array]]:
        hparams = runner.hparams
        optimizer = make_optimizer(hparams)
        env_state, observation, trajectory, next_values, key, policy_carry = rollout(runner)

        # --- the rewards trained on: scaled, normalised by the return's std (rewards.py) ---
        rewards, return_statistics = training_rewards(
            trajectory.reward, trajectory.done, runner.return_statistics, hparams.gamma, config.reward_scaling
        )

        # --- GAE: V(final observation) bootstraps truncations; terminations get 0 ---
        advantages, targets = generalized_advantages(
            rewards,
            trajectory.value,
            next_values,
            trajectory.terminated,
            trajectory.done,
            hparams.gamma,
            hparams.gae_lambda,
        )
        # normalised once over the whole batch (all steps and environments), not per minibatch
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        batch = Batch(trajectory.observation, trajectory.action, trajectory.log_prob, advantages, targets)
        batch = core.batch(batch, trajectory.memory, runner.policy_state)  # [B, ...]; GRU: [E, T, ...]

        # --- epochs x minibatches over a fresh permutation each epoch ---
        # (transitions, or whole environments' sequences for a memory: PolicyCore.minibatches)
        # The loss statistics are summed in the carry, not stacked per minibatch: the same
        # means, without a write per statistic and minibatch (measurable on small batches);
        # summed as one vector [statistics], one add per minibatch instead of one per statistic.
        def minibatch_step(carry, minibatch: Batch):
            params, opt_state, stat_sums = carry
            (_, stats), grads = jax.value_and_grad(ppo_loss, has_aux=True)(
                params, loss_apply, distribution, minibatch, hparams
            )
            updates, opt_state = optimizer.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
            stats = dict(stats, grad_norm=optax.global_norm(grads))
            return (params, opt_state, stat_sums + jnp.stack([stats[name] for name in statistics])), None

        def epoch(carry, _):
            params, opt_state, key, stat_sums = carry
            key, permutation_key = jax.random.split(key)
            minibatches = core.minibatches(permutation_key, batch)  # [B / M, M, ...]
            (params, opt_state, stat_sums), _ = jax.lax.scan(
                minibatch_step, (params, opt_state, stat_sums), minibatches
            )
            return (params, opt_state, key, stat_sums), None

        statistics = LOSS_STATISTICS + GRADIENT_STATISTICS
        no_stats = varying_with(jnp.zeros((len(statistics),), jnp.float32), runner.update_index)  # seed-batched
        (params, opt_state, key, stat_sums), _ = jax.lax.scan(
            epoch, (runner.params, runner.opt_state, key, no_stats), None, config.num_epochs
        )
        stats = dict(zip(statistics, stat_sums / (config.num_epochs * num_minibatches)))
        params = update_observation_statistics(params, trajectory.observation)  # no-op unless normalising

        # --- divergence: a seed whose losses or parameters stop being finite is frozen ---
        # The optimiser state needs no check of its own: the summed statistics include every
        # minibatch's gradient norm, finite only when every gradient element and its square
        # are, and Adam's moments are running averages of those gradients (clipped) and their
        # squares.
        finite = all_finite_in_one_reduction((stats, params))  # one reduction, not one per leaf
        frozen = jnp.logical_or(diverged_at_update(runner, config) > 0, jnp.logical_not(finite))
        params, opt_state = jax.tree.map(
            lambda old, new: jnp.where(frozen, old, new), (runner.params, runner.opt_state), (params, opt_state)
        )

        metrics = dict(stats, explained_variance=explained_variance(trajectory.value, targets))
        metrics.update(rollout_metrics(trajectory))
        metrics["update"] = runner.update_index + 1
        next_runner = RunnerState(
            params,
            opt_state,
            env_state,
            observation,
            key,
            runner.update_index + 1,
            hparams,
            policy_carry,
            return_statistics,
        )
        metrics["diverged_at_update"] = diverged_at_update(next_runner, config)
        return next_runner, metrics

    return PPO(config, env, env_params, network, core, init, update, rollout, env_params_at)


def optimizer_steps(opt_state) -> jax.Array:
    """Adam's own int32 step count: every update applied adds ``epochs x minibatches``."""
    states = [
        s
        for s in jax.tree.leaves(opt_state, is_leaf=lambda x: isinstance(x, optax.ScaleByAdamState))
        if isinstance(s, optax.ScaleByAdamState)
    ]
    return states[0].count


def diverged_at_update(runner: RunnerState, config: PPOConfig) -> jax.Array:
    """The first update (1-based) whose losses or parameters were not finite; 0 for a healthy
    seed. A diverged seed keeps the parameters and optimiser state of its last finite update,
    so its optimiser has applied fewer steps than ``update_index`` updates would: that gap is
    the record of the divergence. It lives in the checkpointed state without a new field, so
    checkpoints of healthy runs keep their format and digests. One seed or a leading seed
    axis; traced or numpy."""
    steps_per_update = config.num_epochs * config.num_minibatches
    applied = optimizer_steps(runner.opt_state)
    healthy = applied == runner.update_index * steps_per_update
    return jnp.where(healthy, 0, applied // steps_per_update + 1).astype(jnp.int32)


def explained_variance(values: jax.Array, targets: jax.Array) -> jax.Array:
    """1 - Var[targets - values] / Var[targets] over the whole batch (CleanRL's); NaN where the
    targets do not vary (no variance to explain)."""
    variance = targets.var()
    return jnp.where(variance > 0, 1.0 - (targets - values).var() / jnp.where(variance > 0, variance, 1.0), jnp.nan)
