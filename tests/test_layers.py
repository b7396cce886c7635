"""purehr's layers: Dense (``purehr.engine.dense``), flax's parameters and forward pass, the same
gradient by another route, and the networks that use it keep their parameter trees; Conv
(``purehr.engine.conv``), flax's VALID convolution as a matmul over patches, with flax's
parameters and the same outputs and gradients to float32 rounding."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from purehr.algorithms.pqn.network import QMLP, QNetwork
from purehr.algorithms.sac.networks import Actor, TwinCritic
from purehr.engine.conv import Conv, patches
from purehr.engine.dense import NARROW_OUTPUTS, Dense, narrow_weight_gradient

# flax's own gradient (one output, a wide layer) and the column reductions (2 to NARROW_OUTPUTS)
WIDTHS = (1, 2, NARROW_OUTPUTS, 3 * NARROW_OUTPUTS)


def _gradients(module, params, inputs) -> list[jax.Array]:
    """The parameters' and the input's gradients of sum(sin(output)), per seed under a vmap over
    ``inputs``' first axis, as the trainers take them."""

    def loss(params, inputs):
        return jnp.sum(jnp.sin(module.apply(params, inputs)))

    return jax.tree.leaves(jax.jit(jax.vmap(jax.grad(loss, argnums=(0, 1)), in_axes=(None, 0)))(params, inputs))


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

    for mine, theirs in zip(_gradients(ours, params, inputs), _gradients(flax_dense, params, inputs), strict=True):
        if 1 < width <= NARROW_OUTPUTS:  # the same sums in another order
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5)
        else:  # flax's own computation
            np.testing.assert_array_equal(mine, theirs)


def _layer_names(params) -> set[str]:
    return {str(path[-2].key) for path, _ in jax.tree_util.tree_leaves_with_path(params) if len(path) >= 2}


def test_the_networks_keep_flax_layer_names():
    """Checkpoints of PQN and SAC written before their layers were purehr's Dense still read."""
    observation = jnp.zeros((3,))
    q_params = QNetwork(QMLP((8, 8), "relu", 2), 2, whole=True).init(jax.random.PRNGKey(0), observation)
    assert {"Dense_0", "Dense_1", "Dense_2", "LayerNorm_0", "LayerNorm_1"} == _layer_names(q_params)
    actor_params = Actor((8, 8), "swish", 1).init(jax.random.PRNGKey(0), observation)
    assert {"Dense_0", "Dense_1", "Dense_2"} == _layer_names(actor_params)
    critic_params = TwinCritic((8, 8), "swish").init(jax.random.PRNGKey(0), observation, jnp.zeros((1,)))
    assert {"Dense_0", "Dense_1", "Dense_2"} == _layer_names(critic_params)
    assert critic_params["params"]["twins"]["Dense_1"]["kernel"].shape == (2, 8, 8)


def test_patches_are_every_window_in_kernel_order():
    """A hand-built 1 x 3 x 4 x 2 image: window (i, j) of a 2 x 3 kernel lists rows i..i+1,
    columns j..j+2, each pixel's channels in turn."""
    image = np.arange(24, dtype=np.float32).reshape(1, 3, 4, 2)
    got = np.asarray(patches(jnp.asarray(image), (2, 3)))
    assert got.shape == (1, 2, 2, 2 * 3 * 2)
    for i in range(2):
        for j in range(2):
            np.testing.assert_array_equal(got[0, i, j], image[0, i : i + 2, j : j + 3, :].reshape(-1))


@pytest.mark.parametrize(("kernel_size", "features"), [((3, 3), 16), ((2, 3), 5)])
def test_conv_has_flax_parameters_outputs_and_gradients(kernel_size, features):
    images = jax.random.normal(jax.random.PRNGKey(0), (2, 6, 10, 7, 4))  # [seeds, N, H, W, C]
    ours, flax_conv = Conv(features, kernel_size), nn.Conv(features, kernel_size, padding="VALID")
    params = ours.init(jax.random.PRNGKey(1), images[0])
    flax_params = flax_conv.init(jax.random.PRNGKey(1), images[0])
    assert jax.tree.structure(params) == jax.tree.structure(flax_params)
    for mine, theirs in zip(jax.tree.leaves(params), jax.tree.leaves(flax_params), strict=True):
        np.testing.assert_array_equal(mine, theirs)
    np.testing.assert_allclose(ours.apply(params, images[0]), flax_conv.apply(params, images[0]), rtol=1e-5, atol=1e-5)
    # the kernel's, the bias's and the input's: the same sums in another order
    for mine, theirs in zip(_gradients(ours, params, images), _gradients(flax_conv, params, images), strict=True):
        np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-4)
