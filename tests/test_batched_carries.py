"""``varying_with``: a scan's first carry batched from the start, every value unchanged, and
nothing left of it in the compiled program (docs/protocol.md, "Compilation")."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.envs.base import varying_with
from purehr.envs.policies import as_recurrent, batched_from_the_start

TREE = {
    "nan": jnp.array([jnp.nan, -0.0, 1.5], jnp.float32),
    "count": jnp.int32(7),
    "done": jnp.array([True, False]),
    "key": jax.random.PRNGKey(3),
}


def test_every_leaf_keeps_its_bits_nan_and_negative_zero_included():
    like = (jnp.array([jnp.nan, 2.0]), jnp.int32(-1), jnp.bool_(False))
    out = jax.jit(varying_with)(TREE, like)
    for name, leaf in TREE.items():
        assert out[name].dtype == leaf.dtype
        np.testing.assert_array_equal(
            np.atleast_1d(out[name]).view(np.uint8), np.atleast_1d(leaf).view(np.uint8), err_msg=name
        )


def test_the_tree_is_batched_wherever_like_is():
    xs = jnp.arange(4.0)
    # a constant alone stays unbatched (out_axes=None accepts it) ...
    jax.vmap(lambda x: TREE, out_axes=None)(xs)
    # ... made to vary with the batched value, every leaf carries the batch axis
    batched = jax.vmap(lambda x: varying_with(TREE, x))(xs)
    assert all(leaf.shape[0] == 4 for leaf in jax.tree.leaves(batched))
    with pytest.raises(ValueError, match="out_axes"):
        jax.vmap(lambda x: varying_with(TREE, x), out_axes=None)(xs)


def test_xla_folds_the_dependence_away():
    """No comparison or select is left: the compiled program is the one without it."""
    text = jax.jit(varying_with).lower(TREE, (jnp.ones(3), jnp.int32(2))).compile().as_text()
    assert "compare" not in text and "select" not in text, text


def test_an_episode_carry_varies_with_the_policy_and_the_observation():
    """Batched over seeds through the policy's parameters, over episodes through the first
    observation, though it was built from neither; unchanged in value."""
    carry = (jnp.zeros(2), jnp.bool_(False))

    def for_seed(weight, observation):
        policy = as_recurrent(lambda obs, t, key: weight * obs)
        return batched_from_the_start(carry, policy, observation)

    weights, observations = jnp.arange(3.0), jnp.ones((5, 2))
    over_seeds = jax.vmap(for_seed, in_axes=(0, None))(weights, observations[0])
    over_episodes = jax.vmap(for_seed, in_axes=(None, 0))(weights[0], observations)
    assert [leaf.shape[0] for leaf in jax.tree.leaves(over_seeds)] == [3, 3]
    assert [leaf.shape[0] for leaf in jax.tree.leaves(over_episodes)] == [5, 5]
    np.testing.assert_array_equal(over_seeds[0], np.zeros((3, 2)))
    assert not np.any(over_episodes[1])
