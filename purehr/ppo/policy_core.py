"""What the algorithm asks of its networks, for a feed-forward or a recurrent policy.

``make_ppo`` is written once; the places where a policy with memory differs go through a
``PolicyCore``: the rollout's network pass (which also values the previous step's final
observations for the truncation bootstrap), the carry from step to step, the value that
bootstraps the rollout's last step, how the batch is cut into minibatches, and the policy
that acts in evaluations. ``FeedForwardCore`` does exactly what ``make_ppo`` did before
recurrent policies existed (its carry is ``()``: same program, same checkpoints);
``purehr.ppo.recurrent.RecurrentCore`` is the GRU's (docs/recurrent.md).

Shapes: E = ``num_envs``, T = ``num_steps``, B = E * T, M = minibatch size, K = minibatches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purehr.envs.spaces import flatten_observation
from purehr.ppo.distributions import make_distribution
from purehr.ppo.loss import Batch
from purehr.ppo.networks import ActorCritic
from purehr.ppo.shuffle import random_permutation


class StepOutputs(NamedTuple):
    """One rollout step's network outputs for E environments."""

    actor_output: jax.Array  # [E, policy outputs]
    log_std: jax.Array | None
    value: jax.Array  # [E]: V(this step's observation)
    previous_final_value: jax.Array  # [E]: V(the previous step's final observation)
    memory: Any  # what the update needs to recompute this step (() without memory)
    hidden: Any  # the memory after this step's observation (() without memory)


@dataclass(frozen=True)
class FeedForwardCore:
    """The MLP actor-critic: no carry; minibatches are random transitions."""

    network: ActorCritic
    num_envs: int
    num_steps: int
    num_minibatches: int

    def init_params(self, key: jax.Array, observation_size: int):
        return self.network.init(key, jnp.zeros((observation_size,), jnp.float32))

    def initial_carry(self) -> Any:
        return ()

    def step(self, params, carry, observation: jax.Array, previous_final: jax.Array) -> StepOutputs:
        """Actor on [E, obs]; the critic on this step's and the previous step's final
        observations in one call (2E rows): the same rows as a pass over all T x E final
        observations after the rollout, but no [T, E, obs] array to keep (on CartPole's small
        batches 0-2% faster, within the noise of the measurement)."""
        actor_output, log_std = self.network.apply(params, observation, method=ActorCritic.policy)
        values = self.network.apply(params, jnp.concatenate([observation, previous_final]), method=ActorCritic.value)
        return StepOutputs(actor_output, log_std, values[: self.num_envs], values[self.num_envs :], (), ())

    def carry_after(self, carry, outputs: StepOutputs, done: jax.Array) -> Any:
        return ()

    def final_value(self, params, carry, final_observation: jax.Array) -> jax.Array:
        """V of the rollout's last final observations [E]."""
        return self.network.apply(params, final_observation, method=ActorCritic.value)

    def batch(self, batch: Batch, memory, rollout_start_carry) -> Batch:
        """[T, E, ...] -> [B, ...]: transitions are independent of each other."""
        return jax.tree.map(lambda x: x.reshape((self.num_envs * self.num_steps,) + x.shape[2:]), batch)

    def minibatches(self, key: jax.Array, batch: Batch) -> Batch:
        """[B, ...] -> [K, M, ...] over a fresh permutation (random_permutation:
        jax.random.permutation's guarantee at a fraction of its cost on a CPU)."""
        size = self.num_envs * self.num_steps
        permutation = random_permutation(key, size)
        return jax.tree.map(
            lambda x: x[permutation].reshape((self.num_minibatches, size // self.num_minibatches) + x.shape[1:]),
            batch,
        )

    def apply(self, params, observation):
        """(actor output, log std, value) of a minibatch's observations, for the loss."""
        return self.network.apply(params, observation)

    def policy(self, params, action_space, deterministic: bool):
        """``policy(observation, t, key) -> env action`` for one unbatched observation."""

        def act(observation, t, key):
            actor_output, log_std, _ = self.network.apply(params, flatten_observation(observation))
            distribution = make_distribution(action_space, actor_output, log_std)
            action = distribution.mode() if deterministic else distribution.sample(key)
            return distribution.to_env_action(action)

        return act
