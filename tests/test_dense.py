"""purehr's Dense (``purehr.engine.dense``): flax's parameters and forward pass, the same gradient
by another route, and the networks that use it keep their parameter trees."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.pqn.network import QNetwork
from purehr.algorithms.sac.networks import Actor, TwinCritic
from purehr.engine.dense import NARROW_OUTPUTS, Dense, narrow_weight_gradient

# flax's own gradient (one output, a wide layer) and the column reductions (2 to NARROW_OUTPUTS)
WIDTHS = (1, 2, NARROW_OUTPUTS, 3 * NARROW_OUTPUTS)


@pytest.mark.parametrize("width", (1, 2, NARROW_OUTPUTS))
def test_the_narrow_weight_gradient_is_the_inputs_transposed_times_the_output_gradient(width):
    rng = np.random.default_rng(width)
    inputs = rng.normal(size=(3, 5, 7)).astype(np.float32)  # leading axes are summed over
    output_gradient = rng.normal(size=(3, 5, width)).astype(np.float32)
    expected = inputs.reshape(-1, 7).astype(np.float64).T @ output_gradient.reshape(-1, width)
    got = np.asarray(jax.jit(narrow_weight_gradient)(inputs, output_gradient))
    assert got.shape == (7, width)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("width", WIDTHS)
def test_dense_has_flax_parameters_forward_bits_and_gradients(width):
    inputs = jax.random.normal(jax.random.PRNGKey(0), (4, 6, 16))
    ours, flax_dense = Dense(width), nn.Dense(width)
    params = ours.init(jax.random.PRNGKey(1), inputs)
    flax_params = flax_dense.init(jax.random.PRNGKey(1), inputs)
    assert jax.tree.structure(params) == jax.tree.structure(flax_params)
    for mine, theirs in zip(jax.tree.leaves(params), jax.tree.leaves(flax_params), strict=True):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_array_equal(ours.apply(params, inputs), flax_dense.apply(params, inputs))

    def loss(module, params, inputs):
        return jnp.sum(jnp.sin(module.apply(params, inputs)))

    # per seed under a vmap, as the trainers take it
    grads = jax.jit(jax.vmap(jax.grad(lambda p, x: loss(ours, p, x), argnums=(0, 1)), in_axes=(None, 0)))
    flax_grads = jax.jit(jax.vmap(jax.grad(lambda p, x: loss(flax_dense, p, x), argnums=(0, 1)), in_axes=(None, 0)))
    for mine, theirs in zip(
        jax.tree.leaves(grads(params, inputs)), jax.tree.leaves(flax_grads(params, inputs)), strict=True
    ):
        if 1 < width <= NARROW_OUTPUTS:  # the same sums in another order
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
        else:  # flax's own computation
            np.testing.assert_array_equal(mine, theirs)


def _layer_names(params) -> set[str]:
    return {str(path[-2].key) for path, _ in jax.tree_util.tree_leaves_with_path(params) if len(path) >= 2}


def test_the_networks_keep_flax_layer_names():
    """Checkpoints of PQN and SAC written before their layers were purehr's Dense still read."""
    observation = jnp.zeros((3,))
    q_params = QNetwork((8, 8), "relu", 2).init(jax.random.PRNGKey(0), observation)
    assert {"Dense_0", "Dense_1", "Dense_2", "LayerNorm_0", "LayerNorm_1"} == _layer_names(q_params)
    actor_params = Actor((8, 8), "swish", 1).init(jax.random.PRNGKey(0), observation)
    assert {"Dense_0", "Dense_1", "Dense_2"} == _layer_names(actor_params)
    critic_params = TwinCritic((8, 8), "swish").init(jax.random.PRNGKey(0), observation, jnp.zeros((1,)))
    assert {"Dense_0", "Dense_1", "Dense_2"} == _layer_names(critic_params)
    assert critic_params["params"]["twins"]["Dense_1"]["kernel"].shape == (2, 8, 8)
