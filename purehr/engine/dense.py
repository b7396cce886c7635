"""A Dense layer whose weight gradient is fast on a CPU when it has only a few outputs.

Measured (benchmarks/README.md, "Where PQN's and SAC's updates spend their time"): XLA's CPU
backend sends a layer's forward matmul and its input gradient to its fast (YNNPACK) kernels,
but the weight gradient ``x^T g`` contracts the rows of both operands, a form those kernels do
not take; as a generic dot it costs as much for 2 outputs as for 256 (0.25 ms on 5 seeds x 128
rows x 256 inputs, against 0.02 ms as one reduction per output column). A Q head over two
actions (PQN on CartPole) or a Gaussian head of one action (SAC on Pendulum) spends 5% of an
update there. ``Dense`` is ``flax.linen.Dense`` (the same parameters, initial values and
forward bits); with 2 to ``NARROW_OUTPUTS`` outputs its weight gradient is the column-wise
reductions (the same sum in another order: float32 rounding apart), otherwise flax's own.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

NARROW_OUTPUTS = 8
"""Up to this many outputs (and more than one) the weight gradient is one reduction per output
column; from about 16 the dot is as fast (benchmarks/README.md). One output is a reduction in
XLA already."""


def narrow_weight_gradient(inputs: jax.Array, output_gradient: jax.Array) -> jax.Array:
    """``inputs^T output_gradient`` [I, O] summed over every leading axis of ``inputs`` [..., I]
    and ``output_gradient`` [..., O], as one reduction over the rows per output column."""
    rows = inputs.reshape(-1, inputs.shape[-1])
    gradient = output_gradient.reshape(-1, output_gradient.shape[-1])
    return jnp.stack([jnp.sum(rows * gradient[:, [column]], axis=0) for column in range(gradient.shape[-1])], axis=-1)


@jax.custom_vjp
def narrow_matmul(inputs: jax.Array, kernel: jax.Array) -> jax.Array:
    """``inputs @ kernel`` ([..., I] x [I, O] -> [..., O]) whose kernel gradient is
    ``narrow_weight_gradient``; the input's gradient is the usual ``g @ kernel^T``."""
    return inputs @ kernel


def _forward(inputs, kernel):
    return inputs @ kernel, (inputs, kernel)


def _backward(saved, output_gradient):
    inputs, kernel = saved
    return output_gradient @ kernel.T, narrow_weight_gradient(inputs, output_gradient).astype(kernel.dtype)


narrow_matmul.defvjp(_forward, _backward)


class Dense(nn.Module):
    """``flax.linen.Dense`` (float32, with a bias), through ``narrow_matmul`` when it has 2 to
    ``NARROW_OUTPUTS`` outputs: the same parameter names, shapes, initial values and forward
    bits as flax's, and for those widths a faster backward pass."""

    features: int
    kernel_init: nn.initializers.Initializer = nn.initializers.lecun_normal()
    bias_init: nn.initializers.Initializer = nn.initializers.zeros

    @nn.compact
    def __call__(self, inputs: jax.Array) -> jax.Array:
        kernel = self.param("kernel", self.kernel_init, (jnp.shape(inputs)[-1], self.features), jnp.float32)
        bias = self.param("bias", self.bias_init, (self.features,), jnp.float32)
        narrow = 1 < self.features <= NARROW_OUTPUTS
        return (narrow_matmul(inputs, kernel) if narrow else inputs @ kernel) + bias
