"""How SAC's update is built for speed (purehr.algorithms.sac): its random numbers from one hash
call mapped as jax.random maps them, its twin critics one ensemble of two independently
initialised MLPs, and its warm-up updates skipping the gradient steps with a real branch under
the seed vmap, exact for seeds that disagree. Tiny networks: compiled in seconds."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.sac import draws
from purehr.algorithms.sac.algorithm import LEARNED_FIELDS, make_sac
from purehr.algorithms.sac.batch_cond import cond_any
from purehr.algorithms.sac.config import SACConfig
from purehr.algorithms.sac.networks import TwinCritic
from purehr.engine.networks import MLP, VALUE_GAIN
from purehr.engine.seeds import keys_for_seeds
from purehr.tasks import get_task


def test_draws_from_bits_equal_jax_randoms_and_cut_one_draw_in_order():
    key = jax.random.PRNGKey(7)
    bits = jax.random.bits(key, (500, 3), jnp.uint32)
    np.testing.assert_array_equal(draws.uniform(bits, -1.0, 1.0), jax.random.uniform(key, (500, 3), minval=-1.0))
    np.testing.assert_array_equal(draws.normal(bits), jax.random.normal(key, (500, 3)))
    parts = draws.split_bits(key, {"a": (2,), "b": (3, 4)})
    whole = np.asarray(jax.random.bits(key, (14,), jnp.uint32))
    np.testing.assert_array_equal(parts["a"], whole[:2])
    np.testing.assert_array_equal(parts["b"], whole[2:].reshape(3, 4))


def test_twin_critics_are_two_independently_initialised_mlps():
    critic = TwinCritic((16, 16), "relu")
    observation, action = jax.random.normal(jax.random.PRNGKey(1), (2, 5, 3))[:, :, :3], jnp.ones((5, 1))
    params = critic.init(jax.random.PRNGKey(0), observation[0], action)
    kernels = [leaf for leaf in jax.tree.leaves(params)]
    assert all(leaf.shape[0] == 2 for leaf in kernels)
    first_layer = params["params"]["twins"]["Dense_0"]["kernel"]
    assert not np.allclose(first_layer[0], first_layer[1])  # each member its own key
    q = critic.apply(params, observation[0], action)  # [5, 2]
    inputs = jnp.concatenate([observation[0], action], axis=-1)
    for i in range(2):
        member = {"params": jax.tree.map(lambda leaf: leaf[i], params["params"]["twins"])}
        reference = MLP((16, 16), "relu", 1, VALUE_GAIN).apply(member, inputs)[:, 0]
        np.testing.assert_allclose(q[:, i], reference, rtol=1e-6, atol=1e-6)


def test_cond_any_is_a_branch_under_vmap_taken_when_any_member_holds():
    def double(x):
        return 2 * x

    def negate(x):
        return -x

    batched = jax.vmap(lambda p, x: cond_any(p, double, negate, x))
    x = jnp.array([1.0, 2.0])
    np.testing.assert_array_equal(batched(jnp.array([False, False]), x), [-1.0, -2.0])
    np.testing.assert_array_equal(batched(jnp.array([False, True]), x), [2.0, 4.0])  # any member: all take it
    assert float(cond_any(jnp.bool_(False), double, negate, jnp.float32(3))) == -3.0
    primitives = {eqn.primitive.name for eqn in jax.make_jaxpr(batched)(jnp.array([False, True]), x).jaxpr.eqns}
    assert "cond" in primitives and "select_n" not in primitives


TINY = SACConfig(
    total_timesteps=64,
    num_envs=2,
    num_steps=2,
    gradient_steps=2,
    sample_size=4,
    buffer_size=64,
    learning_starts=8,  # two warm-up updates
    actor_hidden=(8,),
    critic_hidden=(8,),
)


@pytest.fixture(scope="module")
def tiny_sac():
    env = get_task("gymnax:Pendulum-v1").make_env()
    sac = make_sac(TINY, env)
    return sac, jax.jit(jax.vmap(sac.init))(keys_for_seeds([0, 1]))


def _gradient_branches(jaxpr) -> list:
    """The conds of ``jaxpr`` (any depth) one of whose branches holds a matmul and another none."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "cond":
            has_dot = ["dot_general" in str(branch) for branch in eqn.params["branches"]]
            if any(has_dot) and not all(has_dot):
                found.append(eqn)
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    found += _gradient_branches(inner)
    return found


def test_warmup_updates_skip_the_gradient_steps_with_a_branch_under_the_seed_vmap(tiny_sac):
    sac, state = tiny_sac
    # the predicate is each seed's update counter, yet the vmapped update branches on it
    assert _gradient_branches(jax.make_jaxpr(jax.vmap(sac.update))(state).jaxpr)


def test_a_seed_still_warming_up_keeps_its_learned_fields_beside_one_that_learns(tiny_sac):
    sac, state = tiny_sac
    assert TINY.warmup_updates == 2
    mixed = state.replace(update_index=jnp.array([TINY.warmup_updates, 0], jnp.int32))
    after, metrics = jax.jit(jax.vmap(sac.update))(mixed)
    for name in LEARNED_FIELDS:
        old, new = getattr(state, name), getattr(after, name)
        assert jax.tree.all(jax.tree.map(lambda o, n: np.array_equal(o[1], n[1]), old, new)), name  # seed 1: kept
    assert not np.array_equal(state.log_alpha[0], after.log_alpha[0])  # seed 0 learned
    assert np.isfinite(metrics["critic_loss"][0]) and np.isnan(metrics["critic_loss"][1])
