"""The memory check before compiling reads any algorithm's state: every leaf ``init`` builds (a
replay buffer counts in full), the algorithm's own working set where it offers one (PPO's), a
gradient copy of the network and one batch of transitions where it does not."""

from __future__ import annotations

import dataclasses
import os

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


def test_the_advice_names_the_fields_of_the_entrys_own_algorithm():
    """Issue 63 W13: SAC's state is mostly its replay buffer (buffer_size), PQN's layers are
    ``hidden``; neither has ``actor_hidden`` to lower."""
    advice = {}
    for entry, algorithm, changes in (
        ("swing", "sac", dict(num_envs=2, buffer_size=1000, actor_hidden=(8,), critic_hidden=(8,))),
        ("hrv", "pqn", dict(num_envs=2, minibatch_size=64, hidden=(8,))),
    ):
        task = get_task(entry)
        env = task.make_env()
        config = task.config_for(algorithm).replace(**changes)
        built = make_algorithm(config, env, env.default_params)
        memory = TrainingMemory.of(entry, built, config, flat_dim(env.observation_space(env.default_params)), SEEDS)
        advice[algorithm] = memory.refusal(1, "test").partition("Expected ")[2]
    assert advice["sac"] == (
        "a smaller replay buffer (buffer_size=1000), smaller layers (actor_hidden, critic_hidden), "
        "fewer environments (num_envs) or fewer seeds"
    )
    assert advice["pqn"] == "smaller layers (hidden), fewer environments (num_envs) or fewer seeds"


def test_the_host_limit_is_the_least_of_the_ram_the_cgroup_and_the_rlimits(tmp_path, monkeypatch):
    """Issue 63 W14: a container (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) or a
    ``ulimit`` below the RAM is the limit the run meets; "max", v1's huge "none" and
    RLIM_INFINITY are no limit."""
    import resource

    from purehr.run.host import estimate

    ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    monkeypatch.setattr(estimate, "CGROUP_LIMIT_FILES", (str(v2), str(v1)))
    rlimits = {resource.RLIMIT_AS: resource.RLIM_INFINITY, resource.RLIMIT_DATA: resource.RLIM_INFINITY}
    monkeypatch.setattr(resource, "getrlimit", lambda which: (rlimits.get(which, resource.RLIM_INFINITY),) * 2)
    v2.write_text("max\n")
    v1.write_text("9223372036854771712\n")
    assert estimate.host_memory_limit() == (ram, "host RAM")
    v2.write_text(f"{ram // 4}\n")
    assert estimate.host_memory_limit() == (ram // 4, f"the cgroup memory limit ({v2})")
    v2.unlink()
    v1.write_text(f"{ram // 3}\n")
    assert estimate.host_memory_limit() == (ram // 3, f"the cgroup memory limit ({v1})")
    rlimits[resource.RLIMIT_DATA] = ram // 5
    assert estimate.host_memory_limit() == (ram // 5, "the process's RLIMIT_DATA (ulimit)")
    rlimits[resource.RLIMIT_AS] = ram // 6
    available, where = estimate.machine_memory()  # the suite's CPU backend reports no device memory
    assert available == ram // 6 and where.startswith("the process's RLIMIT_AS (ulimit): the cpu backend")


def test_resource_exhausted_is_one_line_with_the_estimate_and_the_ways_out(tmp_path, monkeypatch, capsys):
    """Issue 63 W14: past the check, XLA's RESOURCE_EXHAUSTED (here: allocating the initial
    states) ends the run with the run's estimate and what to lower, not a traceback; any other
    error passes unchanged."""
    import pytest
    from conftest import train_all_seeds_script

    from purehr.run import protocol
    from purehr.run.host.estimate import OutOfMemory, byte_count, explained_out_of_memory

    other = RuntimeError("INTERNAL: something else")
    assert explained_out_of_memory(other, lambda: []) is other
    exhausted = jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4096 bytes.")

    def allocating(setups, seeds):
        raise exhausted

    monkeypatch.setattr(protocol, "initial_runners", allocating)
    flags = ["--tasks", "hrv", "--seeds", "0", "1", "--steps", "256", "--num-envs", "4", "--num-steps", "16"]
    flags += ["--minibatch-size", "32", "--actor-hidden", "8", "--critic-hidden", "8", "--eval-episodes", "4"]
    with pytest.raises(SystemExit) as exited:
        train_all_seeds_script().main([*flags, "--no-render", "--no-progress", "--run-dir", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err
    line = next(line for line in err.splitlines() if line.startswith("error:"))
    assert line.startswith(
        "error: out of memory (RESOURCE_EXHAUSTED: Out of memory while trying to allocate 4096 bytes.): the run's "
        "training was estimated at "
    )
    assert "Expected smaller layers (actor_hidden, critic_hidden), fewer environments (num_envs) or fewer seeds" in line
    task = get_task("hrv")
    env = task.make_env()
    config = task.default_config.replace(num_envs=4, num_steps=16, minibatch_size=32, actor_hidden=(8,))
    config = config.replace(critic_hidden=(8,), total_timesteps=256)
    need = TrainingMemory.of(
        "hrv", make_algorithm(config, env, env.default_params), config, flat_dim(env.observation_space(None)), 2
    )
    assert f"estimated at {byte_count(need.total)} at least" in line
    assert issubclass(OutOfMemory, ValueError)
