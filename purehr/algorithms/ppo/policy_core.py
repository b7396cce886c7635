"""What the algorithm asks of its networks, for a feed-forward or a recurrent policy.

``make_ppo`` is written once; the places where a policy with memory differs go through a
``PolicyCore``: the rollout's network pass, the carry from step to step, GAE's next values
(where the truncation bootstrap is valued: after the rollout at the truncated steps, or, with
a memory, in each step's pass), how the batch is cut into minibatches, and the policy that
acts in evaluations. ``FeedForwardCore`` trains what ``make_ppo`` trained before recurrent
policies existed (its carry is ``()``: same checkpoints, the same bits);
``purehr.algorithms.ppo.recurrent.RecurrentCore`` is the GRU's (docs/recurrent.md).

Shapes: E = ``num_envs``, T = ``num_steps``, B = E * T, M = minibatch size, K = minibatches.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from purehr.algorithms.ppo.loss import Batch
from purehr.engine.bootstrap import values_where
from purehr.engine.distributions import make_distribution
from purehr.engine.networks import ActorCritic
from purehr.engine.shuffle import random_permutation
from purehr.envs.spaces import flatten_observation


class StepOutputs(NamedTuple):
    """One rollout step's network outputs for E environments."""

    actor_output: jax.Array  # [E, policy outputs]
    log_std: jax.Array | None
    value: jax.Array  # [E]: V(this step's observation)
    previous_final_value: Any  # [E]: V(the previous step's final observation); () where valued after the rollout
    memory: Any  # what the update needs to recompute this step (() without memory)
    hidden: Any  # the memory after this step's observation (() without memory)


@dataclass(frozen=True)
class FeedForwardCore:
    """The MLP actor-critic: no carry; minibatches are random transitions.

    The truncation bootstrap, V(final observation) where a time limit cut an episode, is
    valued after the rollout and only at those steps (``next_values``): everywhere else the
    final observation is the next step's observation, whose value the rollout already has.
    Measured against valuing every step's final observation in the rollout's critic call
    (2E rows per step): see docs/protocol.md, "Engine facts"."""

    network: ActorCritic
    num_envs: int
    num_steps: int
    num_minibatches: int
    records_final_observations = True
    """The rollout keeps each step's final observation for ``next_values``."""

    def init_params(self, key: jax.Array, observation_size: int):
        return self.network.init(key, jnp.zeros((observation_size,), jnp.float32))

    def initial_carry(self) -> Any:
        return ()

    def step(self, params, carry, observation: jax.Array, previous_final: jax.Array) -> StepOutputs:
        """Actor and critic on this step's observations [E, obs] (``previous_final`` unused:
        ``next_values`` values the truncated steps' final observations after the rollout)."""
        actor_output, log_std, value = self.network.apply(params, observation)
        return StepOutputs(actor_output, log_std, value, (), (), ())

    def carry_after(self, carry, outputs: StepOutputs, done: jax.Array) -> Any:
        return ()

    def next_values(self, params, carry, trajectory, observation: jax.Array, final_observation) -> jax.Array:
        """GAE's next values [T, E]: V(next step's observation) inside an episode (the
        rollout's own values; V(``observation``) [E, obs] after the last step), V(final
        observation) where a step was truncated, valued on those rows alone, E at a time: with
        a time limit of at least T steps an environment truncates at most once per rollout, so
        one pass of E rows at most, instead of one per step. A terminated step's next value is
        never read (GAE multiplies it by 0); it is left as V(the reset's observation)."""
        last_value = self.network.apply(params, observation, method=type(self.network).value)
        following = jnp.concatenate([trajectory.value[1:], last_value[None]])  # [T, E]
        truncated = jnp.logical_and(trajectory.done, jnp.logical_not(trajectory.terminated)).reshape(-1)
        finals = trajectory.final_observation.reshape((truncated.shape[0], -1))
        value = partial(self.network.apply, params, method=type(self.network).value)
        bootstrap = values_where(value, truncated, finals, self.num_envs).reshape(following.shape)
        return jnp.where(truncated.reshape(following.shape), bootstrap, following)

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

    def flat_observations(self, observation):
        """The flat observations [..., obs] of what ``apply`` takes (the action mask's source)."""
        return observation

    def policy(self, params, action_space, deterministic: bool, read_mask=None):
        """``policy(observation, t, key) -> env action`` for one unbatched observation;
        ``read_mask`` (flat observation -> legal actions) restricts it to the legal ones."""

        def act(observation, t, key):
            flat = flatten_observation(observation)
            actor_output, log_std, _ = self.network.apply(params, flat)
            action_mask = None if read_mask is None else read_mask(flat)
            distribution = make_distribution(action_space, actor_output, log_std, action_mask)
            action = distribution.mode() if deterministic else distribution.sample(key)
            return distribution.to_env_action(action)

        return act
