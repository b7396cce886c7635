"""PPO around a user's network (``PPOConfig.network``; ``purehr.engine.user_network``).

``TorsoActorCritic``: the feed-forward case, ``ActorCritic``'s methods (``policy``, ``value``)
over the user's torso, so ``FeedForwardCore`` drives it unchanged. The actor and the critic each
get their own copy of the torso (as the shipped MLPs are separate), then PPO's heads: a dense
policy head (gain 0.01) and a dense value head (gain 1), and a state-independent log std for a
continuous action. A ``whole_network`` gives (policy outputs, value) itself; PPO adds only the
log std.

``TorsoRecurrentCore``: a recurrent torso (one that declares ``initial_carry``), driven as
``RecurrentCore`` drives the GRU (the carry reset where an episode starts, the bootstrap with
the episode's memory, whole sequences per minibatch, truncated BPTT over the rollout), with
the carry any pytree and the whole torso step inside the scan over time.

Shapes: E = ``num_envs``, T = ``num_steps``, K = minibatches, F = the torso's features.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from purehr.algorithms.ppo.policy_core import FeedForwardCore, StepOutputs
from purehr.algorithms.ppo.recurrent import RecurrentCore, Sequences
from purehr.engine.distributions import make_distribution
from purehr.engine.networks import POLICY_GAIN, VALUE_GAIN, ObservationNormalizer, scaled_normal
from purehr.engine.user_network import StructuredInput, build_network, check_fits, is_recurrent, is_whole
from purehr.envs.policies import RecurrentPolicy
from purehr.envs.spaces import flat_dim, flatten_observation


class TorsoActorCritic(nn.Module):
    """flat observation [..., obs] -> (actor output [..., P], log std or None, value [...])."""

    actor: StructuredInput
    critic: StructuredInput | None  # None: ``actor`` is a whole network
    policy_output_size: int
    continuous: bool
    log_std_init: float = -0.5
    normalize_observations: bool = False

    def setup(self) -> None:
        if self.normalize_observations:
            self.normalizer = ObservationNormalizer()
        if self.critic is not None:
            self.policy_head = nn.Dense(self.policy_output_size, kernel_init=scaled_normal(POLICY_GAIN))
            self.value_head = nn.Dense(1, kernel_init=scaled_normal(VALUE_GAIN))
        if self.continuous:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.log_std_init), (self.policy_output_size,)
            )

    def __call__(self, observation: jax.Array):
        return (*self.policy(observation), self.value(observation))

    def policy(self, observation: jax.Array):
        log_std = self.log_std if self.continuous else None
        if self.critic is None:
            return self.actor(self._normalized(observation))[0], log_std
        return self.policy_head(self.actor(self._normalized(observation))), log_std

    def value(self, observation: jax.Array) -> jax.Array:
        if self.critic is None:
            return self.actor(self._normalized(observation))[1]
        return jnp.squeeze(self.value_head(self.critic(self._normalized(observation))), -1)

    def _normalized(self, observation: jax.Array) -> jax.Array:
        return self.normalizer(observation) if self.normalize_observations else observation


class RecurrentTorsoActorCritic(nn.Module):
    """A recurrent torso shared by the policy and value heads: ``memory(carry, flat) -> (carry,
    features)``, then ``policy(features)``, ``value(features)``."""

    torso: StructuredInput
    policy_output_size: int
    continuous: bool
    log_std_init: float = -0.5
    normalize_observations: bool = False

    def setup(self) -> None:
        if self.normalize_observations:
            self.normalizer = ObservationNormalizer()
        self.policy_head = nn.Dense(self.policy_output_size, kernel_init=scaled_normal(POLICY_GAIN))
        self.value_head = nn.Dense(1, kernel_init=scaled_normal(VALUE_GAIN))
        if self.continuous:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.log_std_init), (self.policy_output_size,)
            )

    def __call__(self, carry, observation: jax.Array):
        carry, features = self.memory(carry, observation)
        return carry, (*self.policy(features), self.value(features))

    def memory(self, carry, observation: jax.Array):
        if self.normalize_observations:
            observation = self.normalizer(observation)
        return self.torso(observation, carry)

    def policy(self, features: jax.Array):
        return self.policy_head(features), (self.log_std if self.continuous else None)

    def value(self, features: jax.Array) -> jax.Array:
        return jnp.squeeze(self.value_head(features), -1)


def reset_carry(start: jax.Array, carry, initial) -> Any:
    """``carry`` (leaves [..., *]) with ``initial`` (one environment's) where ``start`` [...] is set."""

    def reset(leaf, first):
        where = start.reshape(start.shape + (1,) * (leaf.ndim - start.ndim))
        return jnp.where(where, jnp.broadcast_to(first, leaf.shape), leaf)

    return jax.tree.map(reset, carry, initial)


@dataclass(frozen=True)
class TorsoRecurrentCore(RecurrentCore):
    """``RecurrentCore`` (``purehr.algorithms.ppo.recurrent``) for a user's recurrent torso: its
    ``network`` a ``RecurrentTorsoActorCritic``, its carry any pytree the torso declares. The
    rollout's carry after a step, the bootstrap's values, the environment-major batch and its
    minibatches are the GRU core's; the carry's shape, the step, the scan and the policy are its own."""

    def one_carry(self):
        """One environment's initial carry (the torso's declaration)."""
        return self.network.torso.initial_carry()

    def init_params(self, key: jax.Array, observation_size: int):
        return self.network.init(key, self.one_carry(), jnp.zeros((observation_size,), jnp.float32))

    def initial_carry(self):
        """(carry [E, ...], start [E] all set)."""
        carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (self.num_envs, *jnp.shape(x))), self.one_carry())
        return carry, jnp.ones((self.num_envs,), jnp.bool_)

    def step(self, params, carry, observation: jax.Array, previous_final: jax.Array) -> StepOutputs:
        """One torso call on 2E rows: this step (carry reset where it starts an episode) and the
        previous step's final observations (that episode's memory, for the bootstrap)."""
        hidden, start = carry
        both_carry = jax.tree.map(
            lambda a, b: jnp.concatenate([a, b]), reset_carry(start, hidden, self.one_carry()), hidden
        )
        both, features = self.network.apply(
            params, both_carry, jnp.concatenate([observation, previous_final]), method="memory"
        )
        n = self.num_envs
        actor_output, log_std = self.network.apply(params, features[:n], method="policy")
        values = self.network.apply(params, features, method="value")
        return StepOutputs(actor_output, log_std, values[:n], values[n:], start, jax.tree.map(lambda x: x[:n], both))

    def apply(self, params, sequences: Sequences):
        """(actor output [E', T, ...], log std, value [E', T]): the torso scanned over time from
        the stored carry with the stored resets."""
        initial = self.one_carry()

        def remember(carry, step):
            observation, start = step
            carry, features = self.network.apply(
                params, reset_carry(start, carry, initial), observation, method="memory"
            )
            return carry, features

        time_major = (jnp.swapaxes(sequences.observation, 0, 1), jnp.swapaxes(sequences.start, 0, 1))
        _, features = jax.lax.scan(remember, sequences.initial_hidden, time_major)  # [T, E', F]
        features = jnp.swapaxes(features, 0, 1)
        actor_output, log_std = self.network.apply(params, features, method="policy")
        return actor_output, log_std, self.network.apply(params, features, method="value")

    def policy(self, params, action_space, deterministic: bool, read_mask=None) -> RecurrentPolicy:
        """Each episode starts from the torso's initial carry, as in training."""

        def step(carry, observation, t, key):
            flat = flatten_observation(observation)
            carry, features = self.network.apply(params, carry, flat, method="memory")
            actor_output, log_std = self.network.apply(params, features, method="policy")
            action_mask = None if read_mask is None else read_mask(flat)
            distribution = make_distribution(action_space, actor_output, log_std, action_mask)
            action = distribution.mode() if deterministic else distribution.sample(key)
            return distribution.to_env_action(action), carry

        return RecurrentPolicy(self.one_carry(), step)


def user_policy_core(config, observation_space, action_space, shared: dict, sizes):
    """The core of a ``PPOConfig.network``: ``FeedForwardCore`` over a ``TorsoActorCritic``, or a
    ``TorsoRecurrentCore``; ``shared`` the heads' settings, ``sizes`` (E, T, K). Checked against
    the spaces (shapes only) before anything compiles."""
    torso = build_network(config.network, observation_space, action_space)
    size = flat_dim(observation_space)
    outputs = shared["policy_output_size"]
    if is_recurrent(torso):
        if config.num_envs % config.num_minibatches:
            raise ValueError(
                f"PPOConfig.minibatch_size={config.minibatch_size} with the recurrent network {config.network!r}: "
                f"a minibatch is whole sequences, so the {config.num_minibatches} minibatches must divide "
                f"num_envs={config.num_envs}"
            )
        core = TorsoRecurrentCore(
            RecurrentTorsoActorCritic(StructuredInput(torso, observation_space), **shared), *sizes
        )
        expected = "a recurrent torso (carry, observation [N, ...]) -> (carry, features [N, F])"

        def check(params):
            rows = jnp.zeros((config.num_envs, size), jnp.float32)
            outputs_of = jax.eval_shape(core.step, params, core.initial_carry(), rows, rows)
            if outputs_of.actor_output.shape != (config.num_envs, outputs):
                raise ValueError(
                    f"policy outputs {outputs_of.actor_output.shape}; expected ({config.num_envs}, {outputs})"
                )
    else:
        if is_whole(torso):
            network = TorsoActorCritic(StructuredInput(torso, observation_space), None, **shared)
            expected = f"a whole network observation [N, ...] -> (policy outputs [N, {outputs}], value [N])"
        else:
            actor, critic = (StructuredInput(torso.clone(), observation_space) for _ in range(2))
            network = TorsoActorCritic(actor, critic, **shared)
            expected = "a torso observation [N, ...] -> features [N, F]"
        core = FeedForwardCore(network, *sizes)

        def check(params):
            batch = jnp.zeros((3, size), jnp.float32)
            actor_output, _, value = jax.eval_shape(network.apply, params, batch)
            if actor_output.shape != (3, outputs) or value.shape != (3,):
                raise ValueError(
                    f"for 3 observations it gave policy outputs {actor_output.shape} and values {value.shape}; "
                    f"expected ({3}, {outputs}) and (3,)"
                )

    check_fits(
        config.network,
        lambda: core.init_params(jax.random.PRNGKey(0), size),
        observation_space,
        action_space,
        expected,
        check,
    )
    return core
