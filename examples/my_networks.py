"""Your own networks for purehr (docs/how-to/own_network.md): each factory takes the observation
and action spaces as the environment gives them (``purehr.envs.spaces``: a Box of any shape, a
Dict of them) and returns a flax module. Nothing under ``purehr/`` is edited; a run names one with
``--network examples/my_networks.py:cnn`` (or ``network = "..."`` in a config file, or
``purehr.train(env, "ppo", network="...")``).

- ``cnn``: a convolutional **torso** for an image observation [N, H, W, C] (a gymnax MinAtar
  game); PPO adds its policy and value heads (PQN its Q head, SAC its actor and critic MLPs).
  ``cnn_wide``: the same convolution, then two dense layers of 256.
- ``deepsets``: a **whole network** for examples/masked_game.py's set of cells: every cell's
  logit from that cell and the mean over all cells (permutation-equivariant), the value from
  the mean; PPO masks the closed cells and adds nothing else.
- ``lstm``: a **recurrent torso** (an LSTM): it declares ``initial_carry``, and PPO resets the
  carry to it where an episode starts, as it does the shipped GRU's.
- ``hrv_per_dimension``: a whole network for hrv that respects its structure: one shared
  network per HRV dimension reads (current, target, gap) of that dimension beside a summary of
  the others and gives that dimension's three nudge logits; the style and operation logits and
  the value read the pooled summary.
- ``hrv_attention``: the same split, with self-attention over nine tokens (the eight dimensions
  and one for everything else, which gives the style, operation and value).

Every torso gets a batch axis N first (a single observation is a batch of 1). Initialisers are
Gaussian, not orthogonal: an orthogonal init under purehr's vmap over seeds deadlocks XLA's CPU
thread pool (so the LSTM's recurrent kernel is ``lecun_normal`` here, not flax's default).
"""

from __future__ import annotations

from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp

from purehr.engine.conv import Conv  # flax's VALID convolution as a matmul: fast on a CPU

SMALL = nn.initializers.variance_scaling(0.01**2, "fan_in", "normal")
"""A policy output's initial scale (PPO's own heads use gain 0.01 too)."""


def _flat(observation) -> jax.Array:
    """Any observation [N, ...] (a dict's leaves in sorted-key order) as [N, features]."""
    leaves = jax.tree.leaves(observation)
    return jnp.concatenate([leaf.reshape((leaf.shape[0], -1)).astype(jnp.float32) for leaf in leaves], axis=-1)


# --- a CNN torso for images -----------------------------------------------------------------


class CNN(nn.Module):
    """[N, H, W, C] -> a 3 x 3 convolution of 16 channels, ReLU, flattened, a dense layer of 128:
    purejaxql's MinAtar torso."""

    channels: int = 16
    width: int = 128

    @nn.compact
    def __call__(self, image: jax.Array) -> jax.Array:
        x = nn.relu(Conv(self.channels, (3, 3))(image.astype(jnp.float32)))
        return nn.relu(nn.Dense(self.width)(x.reshape((x.shape[0], -1))))


def cnn(observation_space, action_space) -> CNN:
    if len(getattr(observation_space, "shape", ())) != 3:
        raise ValueError(f"cnn reads an image [height, width, channels]; got {observation_space!r}")
    return CNN()


class WideCNN(nn.Module):
    """[N, H, W, C] -> the same convolution, then two dense layers of 256 (the MLP's widths)."""

    channels: int = 16
    width: int = 256

    @nn.compact
    def __call__(self, image: jax.Array) -> jax.Array:
        x = nn.relu(Conv(self.channels, (3, 3))(image.astype(jnp.float32)))
        x = nn.relu(nn.Dense(self.width)(x.reshape((x.shape[0], -1))))
        return nn.relu(nn.Dense(self.width)(x))


def cnn_wide(observation_space, action_space) -> WideCNN:
    if len(getattr(observation_space, "shape", ())) != 3:
        raise ValueError(f"cnn_wide reads an image [height, width, channels]; got {observation_space!r}")
    return WideCNN()


# --- DeepSets over a masked set ----------------------------------------------------------------


class DeepSets(nn.Module):
    """{"prizes": [N, C], "action_mask": [N, C]} -> (one logit per cell [N, C], value [N])."""

    whole_network: ClassVar[bool] = True  # PPO adds no head: these are the policy and the value
    width: int = 32

    @nn.compact
    def __call__(self, observation):
        cells = jnp.stack([observation["prizes"], observation["action_mask"]], axis=-1)  # [N, C, 2]
        embedded = nn.relu(nn.Dense(self.width)(cells))
        pooled = embedded.mean(axis=-2)  # [N, W]: the same whatever the cells' order
        joined = jnp.concatenate([embedded, jnp.broadcast_to(pooled[:, None], embedded.shape)], axis=-1)
        hidden = nn.relu(nn.Dense(self.width)(joined))
        logits = nn.Dense(1, kernel_init=SMALL)(hidden)[..., 0]  # [N, C]
        value = nn.Dense(1)(nn.relu(nn.Dense(self.width)(pooled)))[..., 0]
        return logits, value


def deepsets(observation_space, action_space) -> DeepSets:
    return DeepSets()


# --- an LSTM: a recurrent torso ------------------------------------------------------------------


class LSTM(nn.Module):
    """(carry (c, h) [N, W] each, observation [N, ...]) -> (carry, h [N, W])."""

    width: int = 64

    def initial_carry(self):
        """One environment's carry at an episode's start (no parameters read)."""
        return jnp.zeros((self.width,), jnp.float32), jnp.zeros((self.width,), jnp.float32)

    @nn.compact
    def __call__(self, carry, observation):
        x = nn.relu(nn.Dense(self.width)(_flat(observation)))
        cell = nn.OptimizedLSTMCell(self.width, recurrent_kernel_init=nn.initializers.lecun_normal())
        carry, h = cell(carry, x)
        return carry, h


def lstm(observation_space, action_space) -> LSTM:
    return LSTM()


# --- hrv: one network per dimension ----------------------------------------------------------------


PER_DIMENSION = ("current_hrv", "target_hrv", "gap")


def _hrv_split(observation) -> tuple[jax.Array, jax.Array]:
    """hrv's dict observation -> (each dimension's current, target and gap if given [N, D, k],
    every other field flattened [N, R])."""
    dims = jnp.stack([observation[k] for k in PER_DIMENSION if k in observation], axis=-1)
    return dims, _flat({k: v for k, v in observation.items() if k not in PER_DIMENSION})


def _hrv_heads(name: str, action_space) -> dict:
    """The style and operation counts of hrv's MultiDiscrete(style, operation, 3 x D)."""
    nvec = tuple(int(n) for n in action_space.nvec)
    if len(nvec) < 3 or set(nvec[2:]) != {3}:
        raise ValueError(f"{name} reads hrv's MultiDiscrete(style, operation, 3 x D); got {nvec}")
    return dict(styles=nvec[0], operations=nvec[1])


class HRVPerDimension(nn.Module):
    """hrv's observation -> (logits [N, styles + operations + 3 x D], value [N]), the nudge
    logits of dimension d from a network shared by every dimension (permutation-equivariant over
    the D dimensions), the style, operation and value from the pooled dimensions and the rest."""

    whole_network: ClassVar[bool] = True
    styles: int = 5
    operations: int = 3
    width: int = 64

    @nn.compact
    def __call__(self, observation):
        dims, rest = _hrv_split(observation)
        context = nn.relu(nn.Dense(self.width)(rest))  # [N, W]
        embedded = nn.relu(nn.Dense(self.width)(dims))  # [N, D, W]
        pooled = jnp.concatenate([embedded.mean(axis=-2), embedded.max(axis=-2), context], axis=-1)
        summary = nn.relu(nn.Dense(self.width)(pooled))  # [N, W]
        joined = jnp.concatenate([embedded, jnp.broadcast_to(summary[:, None], embedded.shape)], axis=-1)
        hidden = nn.relu(nn.Dense(self.width)(nn.relu(nn.Dense(self.width)(joined))))
        nudges = nn.Dense(3, kernel_init=SMALL)(hidden)  # [N, D, 3]
        heads = nn.relu(nn.Dense(self.width)(summary))
        choices = nn.Dense(self.styles + self.operations, kernel_init=SMALL)(heads)
        critic = nn.relu(nn.Dense(2 * self.width)(jnp.concatenate([pooled, dims.reshape((dims.shape[0], -1))], -1)))
        value = nn.Dense(1)(nn.relu(nn.Dense(self.width)(critic)))[..., 0]
        return jnp.concatenate([choices, nudges.reshape((nudges.shape[0], -1))], axis=-1), value


def hrv_per_dimension(observation_space, action_space) -> HRVPerDimension:
    return HRVPerDimension(**_hrv_heads("hrv_per_dimension", action_space))


class HRVAttention(nn.Module):
    """hrv's observation -> (logits [N, styles + operations + 3 x D], value [N]): D dimension
    tokens (current, target, gap of each) and one context token, two blocks of self-attention
    over the D + 1 tokens; each dimension token gives its nudge logits, the context token the
    style, operation and value."""

    whole_network: ClassVar[bool] = True
    styles: int = 5
    operations: int = 3
    width: int = 64
    blocks: int = 2

    @nn.compact
    def __call__(self, observation):
        dims, rest = _hrv_split(observation)
        tokens = jnp.concatenate([nn.Dense(self.width)(rest)[:, None], nn.Dense(self.width)(dims)], axis=1)
        tokens = tokens + self.param("position", nn.initializers.normal(0.02), tokens.shape[1:])
        for _ in range(self.blocks):
            attended = nn.MultiHeadDotProductAttention(num_heads=4, qkv_features=self.width)(nn.LayerNorm()(tokens))
            tokens = tokens + attended
            tokens = tokens + nn.Dense(self.width)(nn.relu(nn.Dense(2 * self.width)(nn.LayerNorm()(tokens))))
        tokens = nn.LayerNorm()(tokens)
        context, dimensions = tokens[:, 0], tokens[:, 1:]
        nudges = nn.Dense(3, kernel_init=SMALL)(nn.relu(nn.Dense(self.width)(dimensions)))  # [N, D, 3]
        choices = nn.Dense(self.styles + self.operations, kernel_init=SMALL)(nn.relu(nn.Dense(self.width)(context)))
        value = nn.Dense(1)(nn.relu(nn.Dense(self.width)(context)))[..., 0]
        return jnp.concatenate([choices, nudges.reshape((nudges.shape[0], -1))], axis=-1), value


def hrv_attention(observation_space, action_space) -> HRVAttention:
    return HRVAttention(**_hrv_heads("hrv_attention", action_space))
