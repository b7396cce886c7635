"""The memory check before compiling reads any algorithm's state: every leaf ``init`` builds (a
replay buffer counts in full), the algorithm's own working set where it offers one (PPO's), a
gradient copy of the network and one batch of transitions where it does not."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from purehr.algorithms.registry import make_algorithm
from purehr.envs.spaces import flat_dim
from purehr.run.host.estimate import TrainingMemory
from purehr.tasks import get_task

SEEDS = 3


@dataclasses.dataclass(frozen=True)
class StandInConfig:
    batch_size: int = 64
    actor_hidden: tuple[int, ...] = (32,)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class StandIn:
    """An algorithm without ``working_set_bytes`` whose state is a dict (no ``params`` field):
    a 5 x 32 float32 network and, with ``buffer``, 10^5 stored float32 values."""

    buffer: int = 0

    def init(self, key, hparams=None):
        state = {"actor": {"w": jnp.zeros((5, 32)), "b": jnp.zeros(32)}, "key": key}
        if self.buffer:
            state["replay"] = jnp.zeros((self.buffer,), jnp.float32)
        return state

    def network_params(self, state):
        return state["actor"]


def test_every_leaf_of_the_state_counts_and_the_fallback_working_set_is_the_gradients_and_a_batch():
    config, observation_size = StandInConfig(), 5
    plain = TrainingMemory.of("task", StandIn(), config, observation_size, SEEDS)
    with_buffer = TrainingMemory.of("task", StandIn(buffer=100_000), config, observation_size, SEEDS)
    network = (5 * 32 + 32) * 4
    assert plain.parameters == network * SEEDS
    assert plain.state == (network + 2 * 4) * SEEDS  # the key's two uint32 too
    assert with_buffer.state - plain.state == 400_000 * SEEDS  # the buffer, every byte, every seed
    assert plain.activations == with_buffer.activations == (network + 64 * (5 + 8) * 4) * SEEDS
    assert plain.network == "actor_hidden=(32,)"
    assert "Expected smaller layers (actor_hidden)" in plain.refusal(1, "test")


def test_ppo_offers_its_working_set_gradients_rollout_and_minibatch_activations():
    task = get_task("hrv")
    env = task.make_env()
    config = task.default_config.replace(
        num_envs=4, num_steps=16, minibatch_size=32, actor_hidden=(8,), critic_hidden=(4,)
    )
    ppo = make_algorithm(config, env, env.default_params)
    observation_size = flat_dim(env.observation_space(env.default_params))
    memory = TrainingMemory.of("hrv", ppo, config, observation_size, SEEDS)
    state = jax.eval_shape(ppo.init, jax.random.PRNGKey(0))
    params = sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(state.params))
    rollout = 4 * 16 * (observation_size + 8) * 4
    minibatch = 2 * 32 * (8 + 4) * 4
    assert memory.activations == (params + rollout + minibatch) * SEEDS
    assert memory.state > 3 * params * SEEDS  # Adam's two moments beside the parameters, and the environments
