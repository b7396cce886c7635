"""The Q network and its action branches.

``QNetwork`` around a torso: the shipped ``QMLP``, whose hidden layers are Dense -> LayerNorm ->
activation (Gallici et al., 2024: the LayerNorm is what keeps TD learning without a target
network or replay buffer from diverging), then one linear layer of every branch's Q values side
by side; or a user's (``PQNConfig.network``). Initialisers are
the engine's scaled normals (``purehr.engine.networks``), not orthogonal: an orthogonal init
does a QR, and a QR vmapped over seeds deadlocks XLA's CPU thread pool.

Action branching (Tavakoli et al., 2018, "Action Branching Architectures for Deep RL"): a
``MultiDiscrete(nvec)`` action gets one Q head per component, ``Q_d(s, a_d)`` for ``a_d`` in
``range(nvec[d])`` (sum(nvec) outputs, not prod(nvec): hrv's 5 x 3 x 3**8 joint actions would be
98,415). A ``Discrete(n)`` action is the one-branch case. Greedy action: each branch's argmax.
The target: every branch regresses to the *same* scalar return, whose bootstrap is the mean
over branches of each branch's max, ``mean_d max_a Q_d(s', a)`` (Tavakoli et al.'s
mean-operator target, the best of the targets they compared). Why shared and not one return
per branch: the reward is the joint action's, so each ``Q_d(s, a_d)`` estimates the same
return (the others acting greedily); a shared target keeps the branches on one scale, and the
mean of maxes does not add the branches' overestimations as a sum would. For one branch it
is PQN's own ``max_a Q(s', a)``.

Branch views are padded ``[..., D, W]`` (D branches, W = max(nvec)): padding and illegal
actions (an observation's ``"action_mask"``, the components' masks concatenated as the Q
outputs) hold -1e9, so neither the argmax, the max nor a random legal draw can pick them; a
branch with no legal action at all counts all its actions legal (``Branches.legal``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from purehr.engine.conv import Conv
from purehr.engine.dense import Dense
from purehr.engine.networks import ACTIVATION_FUNCTIONS, HIDDEN_GAIN, ObservationNormalizer, scaled_normal
from purehr.envs import spaces

ILLEGAL_Q = -1e9
"""Q value of a padding slot or an illegal action in a branch view: finite, never the max."""


class QNetwork(nn.Module):
    """PQN's one Q network around its torso: flat observation [..., obs] -> (normalised, scaled
    by ``input_scale``) ``torso`` -> one dense layer of every branch's Q values [..., sum(nvec)];
    a ``whole`` torso (the shipped ``QMLP``, or a user's ``whole_network``) gives those Q values
    itself. The torso owns its hidden layers and their LayerNorms (what keeps PQN stable);
    masking stays PQN's (``Branches``)."""

    torso: nn.Module  # QMLP, or a user's in a purehr.engine.user_network.StructuredInput
    output_size: int
    whole: bool = False
    normalize_observations: bool = False
    input_scale: float = 1.0

    @nn.compact
    def __call__(self, observation: jax.Array) -> jax.Array:
        x = ObservationNormalizer(name="normalizer")(observation) if self.normalize_observations else observation
        if self.input_scale != 1.0:
            x = x * self.input_scale
        if getattr(self.torso, "top_level", False):
            nn.share_scope(self, self.torso)
        features = self.torso(x)
        return features if self.whole else Dense(self.output_size, scaled_normal(1.0), name="q_head")(features)


class QMLP(nn.Module):
    """The shipped Q network, a whole one (``QNetwork``): observation [..., obs] -> (with
    ``conv_channels``, 3 x 3 convolutions over its ``image_shape`` first) hidden layers Dense ->
    LayerNorm -> activation -> every branch's Q values [..., sum(nvec)]."""

    hidden: Sequence[int]
    activation: str
    output_size: int
    layer_norm: bool = True
    conv_channels: Sequence[int] = ()
    image_shape: tuple[int, ...] | None = None  # [H, W, C] of the flat observation, with conv_channels
    whole_network = True
    top_level = True
    """Its layers sit in ``QNetwork``'s own scope (``Conv_i``, ``Dense_i``, ``LayerNorm_i``),
    where recorded checkpoints have them."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        activation = ACTIVATION_FUNCTIONS[self.activation]

        def normalised(x):  # every hidden layer's, convolution or dense: LayerNorm, activation
            return activation(nn.LayerNorm()(x) if self.layer_norm else x)

        if self.conv_channels:
            # [..., H*W*C] -> [N, H, W, C] for the convolutions, then back to [..., features]
            batch = x.shape[:-1]
            x = x.reshape((-1, *self.image_shape))
            for index, channels in enumerate(self.conv_channels):
                # purehr's Conv: flax's VALID convolution as a matmul over patches, whose kernel
                # gradient is a matmul too (flax's is 77% of an update on a CPU: purehr.engine.conv)
                x = normalised(Conv(channels, (3, 3), scaled_normal(HIDDEN_GAIN), name=f"Conv_{index}")(x))
            x = x.reshape((*batch, -1))
        # purehr's Dense: flax's layer, with a faster weight gradient for a head of 2 to 8 Q
        # values on a CPU (purehr.engine.dense); named as flax names its Dense layers, so
        # checkpoints read as before
        for index, width in enumerate(self.hidden):
            x = normalised(Dense(width, scaled_normal(HIDDEN_GAIN), name=f"Dense_{index}")(x))
        return Dense(self.output_size, scaled_normal(1.0), name=f"Dense_{len(self.hidden)}")(x)


@dataclass(frozen=True)
class Branches:
    """How a Discrete or MultiDiscrete action space is laid out over the Q outputs."""

    nvec: tuple[int, ...]
    discrete: bool  # a Discrete space: the env action is the one branch's choice, a scalar

    @classmethod
    def of(cls, action_space) -> Branches:
        if isinstance(action_space, spaces.MultiDiscrete):
            return cls(tuple(int(n) for n in action_space.nvec), False)
        if isinstance(action_space, spaces.Discrete):
            return cls((int(action_space.n),), True)
        raise TypeError(
            f"PQN acts in a Discrete or MultiDiscrete action space; got {action_space!r} "
            "(continuous actions: use ppo or sac)"
        )

    @property
    def size(self) -> int:
        return sum(self.nvec)

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        """(flat output index [D, W], slot exists [D, W])."""
        width = max(self.nvec)
        offsets = np.cumsum((0,) + self.nvec[:-1])
        choice = np.arange(width)
        valid = choice[None, :] < np.asarray(self.nvec)[:, None]
        return np.where(valid, offsets[:, None] + choice[None, :], 0), valid

    def view(self, q: jax.Array, action_mask: jax.Array | None = None) -> jax.Array:
        """[..., sum(nvec)] -> [..., D, W]; padding and illegal actions at ``ILLEGAL_Q``."""
        return jnp.where(self.legal(q.shape[:-1], action_mask), q[..., self._index()[0]], ILLEGAL_Q)

    def legal(self, batch_shape: tuple[int, ...], action_mask: jax.Array | None = None) -> jax.Array:
        """bool [..., D, W]: the slots that are actions and legal. A branch whose mask is all
        false (a state with no legal move) has all its actions legal, as PPO's policy then
        draws among them all (docs/environments.md, "Legal actions"): an ``ILLEGAL_Q`` never
        enters its greedy value, so neither a bootstrap nor the loss sees one."""
        index, valid = self._index()
        legal = jnp.broadcast_to(jnp.asarray(valid), (*batch_shape, *valid.shape))
        if action_mask is not None:
            masked = jnp.logical_and(legal, action_mask[..., index])
            legal = jnp.where(masked.any(axis=-1, keepdims=True), masked, legal)
        return legal

    @staticmethod
    def greedy(view: jax.Array) -> jax.Array:
        """int32 [..., D]: each branch's best legal choice."""
        return jnp.argmax(view, axis=-1).astype(jnp.int32)

    @staticmethod
    def value(view: jax.Array) -> jax.Array:
        """[...]: the bootstrap ``mean_d max_a Q_d`` (the module docstring says why)."""
        return view.max(axis=-1).mean(axis=-1)

    @staticmethod
    def chosen(view: jax.Array, action: jax.Array) -> jax.Array:
        """[..., D]: each branch's Q of the choice ``action`` [..., D] made."""
        return jnp.take_along_axis(view, action[..., None], axis=-1)[..., 0]

    @staticmethod
    def random(noise: jax.Array, legal: jax.Array) -> jax.Array:
        """int32 [..., D]: a uniform legal choice per branch from Gumbel ``noise`` [..., D, W]."""
        return jnp.argmax(jnp.where(legal, noise, -jnp.inf), axis=-1).astype(jnp.int32)

    def to_env_action(self, action: jax.Array) -> jax.Array:
        """[..., D] -> the environment's action ([...] for Discrete)."""
        return action[..., 0] if self.discrete else action
