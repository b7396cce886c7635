"""The PQN algorithm as pure functions: ``make_pqn`` builds the per-seed ``init`` and ``update``
(``purehr.algorithms.trainer.make_train`` scans ``vmap(update)`` over all updates in one jit).

Read top to bottom, ``make_pqn`` is the whole algorithm (Gallici et al., 2024): an
epsilon-greedy rollout of E environments x T steps with auto-reset (a scan), Q(lambda) returns
from the rollout's own Q values (a reverse scan), then epochs (a scan) of minibatches (a scan
over a permutation) regressing Q to them. No replay buffer, no target network: the LayerNorm
network (``network``) and the many parallel environments are what keep it stable.

Shapes: E = ``num_envs``, T = ``num_steps``, B = E * T, M = ``minibatch_size``, D action
branches of at most W choices (``network.Branches``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import struct

from purehr.algorithms.pqn.config import PQNConfig, PQNHyperparams
from purehr.algorithms.pqn.loss import Batch, q_loss
from purehr.algorithms.pqn.metrics import GRADIENT_STATISTICS, LOSS_STATISTICS, METRIC_NAMES
from purehr.algorithms.pqn.network import QMLP, Branches, QNetwork
from purehr.algorithms.pqn.returns import epsilon_at, q_lambda_returns
from purehr.algorithms.rollout_metrics import rollout_metrics
from purehr.engine.bootstrap import values_where
from purehr.engine.distributions import action_mask_reader
from purehr.engine.env_params import make_env_params_at
from purehr.engine.networks import update_observation_statistics
from purehr.engine.schedules import learning_rate_schedule
from purehr.engine.shuffle import random_permutation
from purehr.engine.user_network import StructuredInput, build_network, check_fits, is_recurrent, is_whole
from purehr.envs.base import Environment, all_finite, check_env_params, check_environment, varying_with
from purehr.envs.spaces import flat_dim, flatten_observation
from purehr.envs.wrappers import training_wrappers
from purehr.types import EnvParamsSchedule


@struct.dataclass
class PQNState:
    """Everything one seed needs to continue training bit-for-bit."""

    params: Any
    opt_state: Any
    env_state: Any
    observation: Any
    key: jax.Array
    update_index: jax.Array
    hparams: PQNHyperparams
    diverged_at: jax.Array
    """int32: the first update (1-based) whose loss or parameters were not finite, 0 while
    healthy; a diverged seed keeps the parameters and optimiser state it had before."""


class Transition(NamedTuple):
    """What the rollout records at one step of every environment, [T, E, ...] once stacked."""

    observation: jax.Array  # flat observation the action was chosen from
    action: jax.Array  # int32 [D]: each branch's choice
    value: jax.Array  # greedy value (mean over branches of max legal Q) of the observation
    reward: jax.Array  # float32, unscaled
    terminated: jax.Array
    done: jax.Array  # terminated or truncated
    final_observation: jax.Array  # flat, before any auto-reset
    episode_done: jax.Array  # episode statistics from the wrappers (metrics only)
    episode_return: jax.Array
    episode_success: jax.Array
    nan_action: jax.Array
    invalid_action: jax.Array
    nonfinite_state: jax.Array
    diagnostics: dict[str, jax.Array]


class RolloutRandomness(NamedTuple):
    """Every random draw of one rollout, [T, E, ...], drawn before the step scan in batched
    calls (as PPO's: a draw inside the scan is a loop of its own at every step on a CPU)."""

    explore: jax.Array  # uniform [T, E]: explore where below epsilon
    noise: jax.Array  # Gumbel [T, E, D, W]: the random legal choice of each branch
    step_keys: jax.Array
    resets: tuple[Any, Any]  # (observation, state) of env.reset, taken where an episode ends


@dataclass(frozen=True)
class PQN:
    """The per-seed pieces of PQN for one environment: a ``purehr.algorithms.base.Algorithm``."""

    config: PQNConfig
    env: Environment
    env_params: Any
    network: QNetwork
    branches: Branches
    init: Callable[[jax.Array, PQNHyperparams | None], PQNState]
    update: Callable[[PQNState], tuple[PQNState, dict[str, jax.Array]]]
    env_params_at: Callable[[jax.Array, PQNHyperparams], Any]
    """``env_params_at(update_index, hparams)``: the environment parameters that update trains on
    (PQN's discount written into them, for potential shaping; the curriculum's stage, if any)."""
    read_mask: Callable | None

    name = "pqn"
    metric_names = METRIC_NAMES
    recurrent = False
    population_fields = ("params", "opt_state", "diverged_at")
    """A member that copies its parent's network takes its health record too (PPO's lives in
    its optimiser's step count, which its copied ``opt_state`` carries)."""

    @property
    def num_updates(self) -> int:
        return self.config.num_updates

    def network_params(self, state: PQNState):
        return state.params

    def diverged_at_update(self, state: PQNState):
        return state.diverged_at

    def policy(self, network_params, deterministic: bool = True):
        """``policy(obs, t, key) -> env action`` for one unbatched observation: greedy over the
        legal actions, or with ``deterministic=False`` a random legal action with probability
        ``config.eval_epsilon``."""

        def act(observation, t, key):
            flat = flatten_observation(observation)
            mask = None if self.read_mask is None else self.read_mask(flat)
            view = self.branches.view(self.network.apply(network_params, flat), mask)
            action = self.branches.greedy(view)
            if not deterministic:
                explore_key, noise_key = jax.random.split(key)
                noise = jax.random.gumbel(noise_key, view.shape)
                random = self.branches.random(noise, self.branches.legal((), mask))
                action = jnp.where(jax.random.uniform(explore_key) < self.config.eval_epsilon, random, action)
            return self.branches.to_env_action(action)

        return act


def image_shape(observation_space, conv_channels: tuple[int, ...]) -> tuple[int, ...] | None:
    """The [height, width, channels] a convolutional torso reads the flat observation as;
    ``ValueError`` for an observation that is not one such array."""
    if not conv_channels:
        return None
    shape = tuple(getattr(observation_space, "shape", None) or ())
    if len(shape) != 3 or min(shape[:2]) < 3:
        raise ValueError(
            f"conv_channels={conv_channels}: expected an image observation of shape [height >= 3, width >= 3, "
            f"channels]; got {observation_space!r}"
        )
    return shape


def q_network(config: PQNConfig, observation_space, action_space, branches: Branches) -> QNetwork:
    """The Q network around the shipped ``QMLP`` of the config's fields or a user's module
    (``config.network``), a user's checked against the spaces (shapes only) before anything compiles."""
    if config.network is None:
        conv = image_shape(observation_space, config.conv_channels)
        torso = QMLP(config.hidden, config.activation, branches.size, config.layer_norm, config.conv_channels, conv)
    else:
        torso = build_network(config.network, observation_space, action_space)
    if is_recurrent(torso):
        raise ValueError(
            f"PQNConfig.network={config.network!r} is recurrent (it declares initial_carry); PQN's Q network is "
            "feed-forward: expected a torso observation -> features (a memory: ppo)"
        )
    whole = is_whole(torso)
    if config.network is not None:
        torso = StructuredInput(torso, observation_space)
    network = QNetwork(torso, branches.size, whole, config.normalize_observations, config.input_scale)
    if config.network is None:
        return network
    size = flat_dim(observation_space)

    def check(params):
        q = jax.eval_shape(network.apply, params, jnp.zeros((3, size), jnp.float32))
        if q.shape != (3, branches.size):
            raise ValueError(f"for 3 observations it gave Q values {q.shape}; expected (3, {branches.size})")

    expected = (
        f"a whole Q network observation [N, ...] -> Q [N, {branches.size}]"
        if whole
        else "a torso observation [N, ...] -> features [N, F]"
    )
    init = lambda: network.init(jax.random.PRNGKey(0), jnp.zeros((size,), jnp.float32))  # noqa: E731
    check_fits(config.network, init, observation_space, action_space, expected, check)
    return network


def make_pqn(
    config: PQNConfig, env: Environment, env_params=None, env_params_schedule: EnvParamsSchedule | None = None
) -> PQN:
    """The per-seed ``init`` and ``update`` of PQN on ``env``, unbatched: vmap them over seeds.

    Args:
      config: sizes, network and the defaults of the hyperparameters.
      env: a functional environment with a Discrete or MultiDiscrete action space; it is
        wrapped with auto-reset and episode statistics here (as PPO's).
      env_params: its parameters (default ``env.default_params``); PQN's ``gamma`` is written
        into them when they have one.
      env_params_schedule: ``(env_params, update index) -> env_params`` (a curriculum).

    Returns ``PQN``; ``update`` runs one rollout of E x T steps, the Q(lambda) returns, then
    ``num_epochs`` epochs of B / M minibatches. ``TypeError`` before any tracing for a
    continuous action space or an environment without what training needs.
    """
    check_environment(env)
    env_params = env.default_params if env_params is None else env_params
    check_env_params(env, env_params)
    action_space = env.action_space(env_params)
    branches = Branches.of(action_space)
    observation_space = env.observation_space(env_params)
    observation_size = flat_dim(observation_space)
    read_mask = action_mask_reader(observation_space, action_space)
    network = q_network(config, observation_space, action_space, branches)
    train_env = training_wrappers(env)
    num_envs, num_steps, num_updates = config.num_envs, config.num_steps, config.num_updates
    num_minibatches, batch_size = config.num_minibatches, config.batch_size
    flatten_batch = jax.vmap(flatten_observation)
    width = max(branches.nvec)

    def legal_mask(flat_observation):
        return None if read_mask is None else read_mask(flat_observation)

    def greedy_value(params, flat_observation):
        """[N]: the bootstrap value of flat observations [N, obs]."""
        return Branches.value(branches.view(network.apply(params, flat_observation), legal_mask(flat_observation)))

    def make_optimizer(hparams: PQNHyperparams) -> optax.GradientTransformation:
        # Built again at every update (same state layout): the learning rate and the clip are
        # traced values of the state. RAdam, as purejaxql's PQN.
        learning_rate = learning_rate_schedule(
            hparams.learning_rate, config.anneal_lr, num_minibatches * config.num_epochs, num_updates
        )
        return optax.chain(optax.clip_by_global_norm(hparams.max_grad_norm), optax.radam(learning_rate))

    env_params_at = make_env_params_at(env_params, env_params_schedule)

    def init(key: jax.Array, hparams: PQNHyperparams | None = None) -> PQNState:
        hparams = config.hyperparams() if hparams is None else hparams
        key, network_key, reset_key = jax.random.split(key, 3)
        params = network.init(network_key, jnp.zeros((observation_size,), jnp.float32))
        observation, env_state = jax.vmap(train_env.reset, in_axes=(0, None))(
            jax.random.split(reset_key, num_envs), env_params_at(jnp.int32(0), hparams)
        )
        opt_state = make_optimizer(hparams).init(params)
        return PQNState(params, opt_state, env_state, observation, key, jnp.int32(0), hparams, jnp.int32(0))

    def rollout_randomness(key: jax.Array, step_params) -> RolloutRandomness:
        explore_key, noise_key, step_key, reset_key = jax.random.split(key, 4)
        per_step = (num_steps, num_envs)
        reset_every = jax.vmap(jax.vmap(env.reset, in_axes=(0, None)), in_axes=(0, None))
        return RolloutRandomness(
            jax.random.uniform(explore_key, per_step),
            jax.random.gumbel(noise_key, (*per_step, len(branches.nvec), width)),
            jax.random.split(step_key, per_step),
            reset_every(jax.random.split(reset_key, per_step), step_params),
        )

    def rollout(state: PQNState, epsilon: jax.Array):
        """(env state, observation, Transition [T, E, ...], next values [T, E], key)."""
        step_params = env_params_at(state.update_index, state.hparams)
        key, rollout_key = jax.random.split(state.key)

        def env_step(carry, randomness: RolloutRandomness):
            env_state, observation = carry
            flat_observation = flatten_batch(observation)  # [E, obs]
            mask = legal_mask(flat_observation)
            view = branches.view(network.apply(state.params, flat_observation), mask)  # [E, D, W]
            random = branches.random(randomness.noise, branches.legal((num_envs,), mask))
            action = jnp.where((randomness.explore < epsilon)[:, None], random, branches.greedy(view))
            next_observation, env_state, reward, terminated, truncated, info = jax.vmap(
                train_env.step_with_reset, in_axes=(0, 0, 0, 0, None)
            )(randomness.step_keys, env_state, branches.to_env_action(action), randomness.resets, step_params)
            transition = Transition(
                observation=flat_observation,
                action=action,
                value=Branches.value(view),
                reward=reward.astype(jnp.float32),
                terminated=terminated,
                done=jnp.logical_or(terminated, truncated),
                final_observation=flatten_batch(info["final_observation"]),
                episode_done=info["episode_done"],
                episode_return=info["episode_return"],
                episode_success=info["episode_success"],
                nan_action=info["nan_action"],
                invalid_action=info["invalid_action"],
                nonfinite_state=info["nonfinite_state"],
                diagnostics=train_env.diagnostics(info),
            )
            return (env_state, next_observation), transition

        (env_state, observation), trajectory = jax.lax.scan(
            env_step, (state.env_state, state.observation), rollout_randomness(rollout_key, step_params)
        )
        return env_state, observation, trajectory, next_values(state.params, trajectory, observation), key

    def next_values(params, trajectory: Transition, observation) -> jax.Array:
        """[T, E]: the greedy value of what followed each step in its episode: the next step's
        observation (the rollout's own values; after the last step, ``observation``'s), or the
        final observation where a time limit truncated the step, valued on those rows alone, E
        at a time (``purehr.engine.bootstrap.values_where``, as PPO), not in a pass over all B
        rows (benchmarks/README.md, "Where PQN's and SAC's updates spend their time"). A
        terminated step's is never read (the return multiplies it by 0)."""
        following = jnp.concatenate([trajectory.value[1:], greedy_value(params, flatten_batch(observation))[None]])
        truncated = jnp.logical_and(trajectory.done, jnp.logical_not(trajectory.terminated))
        finals = trajectory.final_observation.reshape((batch_size, -1))
        value = lambda rows: greedy_value(params, rows)  # noqa: E731
        bootstrap = values_where(value, truncated.reshape(-1), finals, num_envs).reshape(following.shape)
        return jnp.where(truncated, bootstrap, following)

    def learn(state: PQNState, batch: Batch, key: jax.Array):
        """``num_epochs`` epochs of minibatches over a fresh permutation each; the loss
        statistics summed in the carry (PPO's way), returned as means."""
        optimizer = make_optimizer(state.hparams)
        loss_and_grad = jax.value_and_grad(q_loss, has_aux=True)

        def minibatch_step(carry, minibatch: Batch):
            params, opt_state, sums = carry
            (_, stats), grads = loss_and_grad(params, network.apply, branches, read_mask, minibatch)
            updates, opt_state = optimizer.update(grads, opt_state, params)
            stats = dict(stats, grad_norm=optax.global_norm(grads))
            return (optax.apply_updates(params, updates), opt_state, jax.tree.map(jnp.add, sums, stats)), None

        def epoch(carry, _):
            params, opt_state, key, sums = carry
            key, permutation_key = jax.random.split(key)
            permutation = random_permutation(permutation_key, batch_size)
            minibatches = jax.tree.map(
                lambda x: x[permutation].reshape((num_minibatches, config.minibatch_size) + x.shape[1:]), batch
            )
            (params, opt_state, sums), _ = jax.lax.scan(minibatch_step, (params, opt_state, sums), minibatches)
            return (params, opt_state, key, sums), None

        no_stats = {name: jnp.zeros((), jnp.float32) for name in LOSS_STATISTICS + GRADIENT_STATISTICS}
        no_stats = varying_with(no_stats, state.update_index)  # batched over seeds from the start
        (params, opt_state, _, sums), _ = jax.lax.scan(
            epoch, (state.params, state.opt_state, key, no_stats), None, config.num_epochs
        )
        return params, opt_state, {name: total / (config.num_epochs * num_minibatches) for name, total in sums.items()}

    def update(state: PQNState) -> tuple[PQNState, dict[str, jax.Array]]:
        hparams = state.hparams
        epsilon = epsilon_at(state.update_index, num_updates, hparams)
        env_state, observation, trajectory, following, key = rollout(state, epsilon)

        # --- Q(lambda) returns: max-Q bootstraps, V(final observation) on truncations ---
        returns = q_lambda_returns(
            trajectory.reward * hparams.reward_scaling,
            following,
            trajectory.terminated,
            trajectory.done,
            hparams.gamma,
            hparams.q_lambda,
        )
        flat = lambda x: x.reshape((batch_size,) + x.shape[2:])  # noqa: E731
        batch = Batch(flat(trajectory.observation), flat(trajectory.action), flat(returns))
        key, learn_key = jax.random.split(key)
        params, opt_state, stats = learn(state, batch, learn_key)
        params = update_observation_statistics(params, trajectory.observation)  # no-op unless normalising

        # --- divergence: a seed whose loss or parameters stop being finite is frozen ---
        finite = jnp.logical_and(all_finite(stats), all_finite(params))
        diverged_at = jnp.where(
            state.diverged_at > 0, state.diverged_at, jnp.where(finite, 0, state.update_index + 1)
        ).astype(jnp.int32)
        params, opt_state = jax.tree.map(
            lambda old, new: jnp.where(diverged_at > 0, old, new), (state.params, state.opt_state), (params, opt_state)
        )

        metrics = dict(stats, epsilon=epsilon)
        metrics.update(rollout_metrics(trajectory))
        metrics["update"] = state.update_index + 1
        metrics["diverged_at_update"] = diverged_at
        next_state = PQNState(
            params, opt_state, env_state, observation, key, state.update_index + 1, hparams, diverged_at
        )
        return next_state, metrics

    return PQN(config, env, env_params, network, branches, init, update, env_params_at, read_mask)
