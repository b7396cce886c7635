"""A policy with memory's side of the algorithm (``PPOConfig.policy="gru"``, or a user's
recurrent torso; docs/recurrent.md): a ``purehr.engine.networks.RecurrentActorCritic``.

The carry flows like this:

- **rollout**: the carry is (hidden [E, *], start [E]); ``start`` says the observation about
  to be read begins an episode (every environment at ``init``; afterwards the previous step's
  ``done``, so auto-reset included). Each step reads the torso's initial carry where ``start``
  is set (the GRU's: zeros), so the memory is exactly reset where an episode starts. The
  step's ``start`` flags are stored in the trajectory, and the runner keeps the carry, so the
  next rollout (and a resumed run: it is in the checkpoint) continues every episode's memory.
- **bootstrap**: V(final observation) of a truncated episode reads the memory that episode
  had, not the reset one: the previous step's hidden state, in the same torso call as this
  step's 2E rows.
- **update**: every sequence is recomputed from the carry the rollout started from, with the
  stored resets, so the loss sees the gradients through the whole rollout of each
  environment (truncated back-propagation at the rollout's length T); minibatches are sets of
  whole environments' sequences ([K, E / K, T, ...]), never cut in time.

Shapes: E = ``num_envs``, T = ``num_steps``, W = the carry's shape (the GRU's ``recurrent_width``),
K = minibatches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purehr.algorithms.ppo.loss import Batch
from purehr.algorithms.ppo.policy_core import StepOutputs
from purehr.engine.distributions import make_distribution
from purehr.engine.networks import RecurrentActorCritic
from purehr.engine.shuffle import random_permutation
from purehr.envs.policies import RecurrentPolicy
from purehr.envs.spaces import flatten_observation


class Sequences(NamedTuple):
    """What the loss's network pass reads for a minibatch of environments."""

    initial_hidden: Any  # [E', W]: the carry the rollout started from
    observation: jax.Array  # [E', T, obs]
    start: jax.Array  # [E', T] bool: the observation begins an episode (memory reset)


def reset_carry(start: jax.Array, carry, initial) -> Any:
    """``carry`` (leaves [..., *]) with ``initial`` (one environment's) where ``start`` [...] is set."""

    def reset(leaf, first):
        where = start.reshape(start.shape + (1,) * (leaf.ndim - start.ndim))
        return jnp.where(where, jnp.broadcast_to(first, leaf.shape), leaf)

    return jax.tree.map(reset, carry, initial)


@dataclass(frozen=True)
class RecurrentCore:
    network: RecurrentActorCritic
    num_envs: int
    num_steps: int
    num_minibatches: int
    records_final_observations = False
    """The bootstrap is valued in the rollout's torso call (``step``), with the episode's memory."""

    def one_carry(self):
        """One environment's initial carry (the torso's declaration)."""
        return self.network.initial_carry()

    def init_params(self, key: jax.Array, observation_size: int):
        return self.network.init(key, self.one_carry(), jnp.zeros((observation_size,), jnp.float32))

    def initial_carry(self):
        """(carry [E, W], start [E] all set): every environment begins an episode."""
        carry = jax.tree.map(lambda x: jnp.broadcast_to(x, (self.num_envs, *jnp.shape(x))), self.one_carry())
        return carry, jnp.ones((self.num_envs,), jnp.bool_)

    def step(self, params, carry, observation: jax.Array, previous_final: jax.Array) -> StepOutputs:
        """One torso call on 2E rows: this step (memory reset where it starts an episode) and the
        previous step's final observations (that episode's memory, for the bootstrap)."""
        hidden, start = carry
        both, features = self.network.apply(
            params,
            jax.tree.map(lambda a, b: jnp.concatenate([a, b]), reset_carry(start, hidden, self.one_carry()), hidden),
            jnp.concatenate([observation, previous_final]),
            method=RecurrentActorCritic.memory,
        )
        n = self.num_envs
        actor_output, log_std = self.network.apply(params, features[:n], method=RecurrentActorCritic.policy)
        values = self.network.apply(params, features, method=RecurrentActorCritic.value)
        return StepOutputs(actor_output, log_std, values[:n], values[n:], start, jax.tree.map(lambda x: x[:n], both))

    def carry_after(self, carry, outputs: StepOutputs, done: jax.Array):
        """The next observation starts an episode where this step's ended."""
        return outputs.hidden, done

    def next_values(self, params, carry, trajectory, observation, final_observation: jax.Array) -> jax.Array:
        """GAE's next values [T, E]: each step valued its predecessor's final observation
        with that episode's memory; the last step's from the memory the rollout ended with."""
        hidden, _ = carry
        _, features = self.network.apply(params, hidden, final_observation, method=RecurrentActorCritic.memory)
        last_value = self.network.apply(params, features, method=RecurrentActorCritic.value)
        return jnp.concatenate([trajectory.previous_final_value[1:], last_value[None]])

    def batch(self, batch: Batch, memory: jax.Array, rollout_start_carry) -> Batch:
        """[T, E, ...] -> environment-major [E, T, ...], the observation as ``Sequences``."""
        per_env = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), batch)
        initial_hidden, _ = rollout_start_carry
        sequences = Sequences(initial_hidden, per_env.observation, jnp.swapaxes(memory, 0, 1))
        return per_env._replace(observation=sequences)

    def minibatches(self, key: jax.Array, batch: Batch) -> Batch:
        """[E, ...] -> [K, E / K, ...]: a fresh permutation of the environments each epoch."""
        permutation = random_permutation(key, self.num_envs)
        per_minibatch = self.num_envs // self.num_minibatches
        return jax.tree.map(
            lambda x: x[permutation].reshape((self.num_minibatches, per_minibatch) + x.shape[1:]), batch
        )

    def apply(self, params, sequences: Sequences):
        """(actor output [E', T, ...], log std, value [E', T]): the torso scanned over time from
        the stored carry with the stored resets. What a torso can do for every step at once
        (the GRU's inputs) is one call before the loop, the heads one call after it."""
        inputs, context = self.network.apply(params, sequences.observation, method=RecurrentActorCritic.prepare)
        initial = self.one_carry()

        def remember(carry, step):
            step_inputs, start = step
            return self.network.apply(
                params, reset_carry(start, carry, initial), step_inputs, method=RecurrentActorCritic.advance
            )

        time_major = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), (inputs, sequences.start))
        _, outputs = jax.lax.scan(remember, sequences.initial_hidden, time_major)  # [T, E', ...]
        outputs = jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), outputs)
        features = self.network.apply(params, outputs, context, method=RecurrentActorCritic.finish)
        actor_output, log_std = self.network.apply(params, features, method=RecurrentActorCritic.policy)
        return actor_output, log_std, self.network.apply(params, features, method=RecurrentActorCritic.value)

    def flat_observations(self, sequences: Sequences):
        """The flat observations [E', T, obs] of what ``apply`` takes (the action mask's source)."""
        return sequences.observation

    def policy(self, params, action_space, deterministic: bool, read_mask=None) -> RecurrentPolicy:
        """A ``RecurrentPolicy``: each episode starts from the initial carry, as in training;
        ``read_mask`` (flat observation -> legal actions) restricts it to the legal ones."""

        def step(hidden, observation, t, key):
            flat = flatten_observation(observation)
            hidden, features = self.network.apply(params, hidden, flat, method=RecurrentActorCritic.memory)
            actor_output, log_std = self.network.apply(params, features, method=RecurrentActorCritic.policy)
            action_mask = None if read_mask is None else read_mask(flat)
            distribution = make_distribution(action_space, actor_output, log_std, action_mask)
            action = distribution.mode() if deterministic else distribution.sample(key)
            return distribution.to_env_action(action), hidden

        return RecurrentPolicy(self.one_carry(), step)
