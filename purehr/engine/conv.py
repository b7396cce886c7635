"""A convolution computed as one matmul over its patches, so that it is fast on a CPU.

Measured (benchmarks/README.md, "PQN on MinAtar: the convolution's kernel gradient"): in PQN's
MinAtar program, XLA's CPU backend lays out the kernel gradient of flax's ``nn.Conv`` (a 3 x 3
convolution vmapped over seeds: a grouped convolution whose window is the whole 8 x 8 output)
in a form its Eigen convolution does not take, and runs it as a generic loop: 75 ms per
gradient step for 5 seeds x 128 observations, 77% of an update, in purejaxql's program as in
purehr's. ``Conv`` gathers the 3 x 3 patches of the input (shifted slices, concatenated) and
multiplies them by the kernel: the forward pass and both gradients are matmuls, slices and a
concatenation, which the CPU backend runs as such (one update 4.4x faster). The same
arithmetic on an accelerator; not measured there, where cuDNN's convolutions are fast too.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


def patches(images: jax.Array, window: Sequence[int]) -> jax.Array:
    """[N, H, W, C] -> [N, H - kh + 1, W - kw + 1, kh * kw * C]: every VALID, stride-1 window,
    its features ordered (row, column, channel) as a flax kernel [kh, kw, C, O] is."""
    rows, columns = images.shape[1] - window[0] + 1, images.shape[2] - window[1] + 1
    shifted = [images[:, i : i + rows, j : j + columns, :] for i in range(window[0]) for j in range(window[1])]
    return jnp.concatenate(shifted, axis=-1)


class Conv(nn.Module):
    """``flax.linen.Conv`` with stride 1 and VALID padding (float32, with a bias), as a matmul
    over ``patches``: the same parameter names, shapes and initial values as flax's; the same
    sums, in another order (float32 rounding apart)."""

    features: int
    kernel_size: tuple[int, int]
    kernel_init: nn.initializers.Initializer = nn.initializers.lecun_normal()
    bias_init: nn.initializers.Initializer = nn.initializers.zeros

    @nn.compact
    def __call__(self, images: jax.Array) -> jax.Array:
        """[N, H, W, C] -> [N, H - kh + 1, W - kw + 1, features]."""
        shape = (*self.kernel_size, images.shape[-1], self.features)
        kernel = self.param("kernel", self.kernel_init, shape, jnp.float32)
        bias = self.param("bias", self.bias_init, (self.features,), jnp.float32)
        return patches(images, self.kernel_size) @ kernel.reshape(-1, self.features) + bias
