"""Action distributions. Each keeps the *stored* action (what the log-prob is evaluated on)
apart from the *environment* action, so the tanh-squashed Gaussian stores its latent
pre-tanh sample and never needs atanh.

Sampling is split in two: ``noise(key)`` draws the random numbers (Gumbel or standard normal)
and ``sample_from_noise(noise)`` turns them into actions, so the rollout can draw a whole
rollout's noise in one call before its step scan (``sampling_noise``); ``sample(key)`` is the two
in a row and draws what distrax's own ``sample`` draws from the same key."""

from __future__ import annotations

from collections.abc import Callable

import distrax
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.envs import spaces


@struct.dataclass
class TanhGaussian:
    mean: jax.Array
    log_std: jax.Array
    low: jax.Array
    high: jax.Array

    @property
    def _latent(self) -> distrax.MultivariateNormalDiag:
        return distrax.MultivariateNormalDiag(self.mean, jnp.exp(self.log_std) * jnp.ones_like(self.mean))

    def noise(self, key: jax.Array) -> jax.Array:
        return jax.random.normal(key, self.mean.shape, self.mean.dtype)

    def sample_from_noise(self, noise: jax.Array) -> jax.Array:
        return self.mean + jnp.exp(self.log_std) * noise

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_from_noise(self.noise(key))

    def log_prob(self, latent: jax.Array) -> jax.Array:
        # distrax.Tanh computes log(1 - tanh^2) as 2 (log 2 - x - softplus(-2x)): stable in the tails.
        log_det = distrax.Block(distrax.Tanh(), ndims=1).forward_log_det_jacobian(latent)
        return self._latent.log_prob(latent) - log_det

    def entropy(self) -> jax.Array:
        """Entropy of the latent Gaussian: the squashed entropy has no closed form, and the
        latent one is a monotone proxy for exploration that PPO's bonus only needs."""
        return self._latent.entropy()

    def mode(self) -> jax.Array:
        return self.mean

    def to_env_action(self, latent: jax.Array) -> jax.Array:
        squashed = jnp.tanh(latent)
        return self.low + (squashed + 1.0) * 0.5 * (self.high - self.low)


# Padding logit for components with fewer choices than the widest: exp() underflows to an
# exact 0 probability, yet stays finite so 0 * log p is 0 in the entropy (-inf would give NaN).
_PADDING_LOGIT = -1e9


@struct.dataclass
class MultiCategorical:
    """One categorical per MultiDiscrete component, evaluated as a single distrax
    ``Categorical`` over padded logits (one op instead of one per component: it compiles
    several times faster). ``logits`` concatenates the components' logits."""

    logits: jax.Array
    nvec: tuple[int, ...] = struct.field(pytree_node=False)

    def _padded(self) -> distrax.Categorical:
        width = max(self.nvec)
        offsets = np.cumsum((0,) + self.nvec[:-1])
        choice = np.arange(width)
        valid = choice[None, :] < np.asarray(self.nvec)[:, None]
        index = np.where(valid, offsets[:, None] + choice[None, :], 0)
        padded = jnp.where(valid, self.logits[..., index], _PADDING_LOGIT)
        return distrax.Categorical(logits=padded)

    def noise(self, key: jax.Array) -> jax.Array:
        padded_shape = self.logits.shape[:-1] + (len(self.nvec), max(self.nvec))
        return jax.random.gumbel(key, padded_shape, self.logits.dtype)

    def sample_from_noise(self, noise: jax.Array) -> jax.Array:
        # the Gumbel-max draw of the padded Categorical, in a quarter of its compile time
        return jnp.argmax(self._padded().logits + noise, axis=-1)

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_from_noise(self.noise(key))

    def log_prob(self, action: jax.Array) -> jax.Array:
        return self._padded().log_prob(action).sum(-1)

    def entropy(self) -> jax.Array:
        return self._padded().entropy().sum(-1)

    def mode(self) -> jax.Array:
        return jnp.argmax(self._padded().logits, axis=-1)

    def to_env_action(self, action: jax.Array) -> jax.Array:
        return action


@struct.dataclass
class Categorical:
    logits: jax.Array

    def noise(self, key: jax.Array) -> jax.Array:
        return jax.random.gumbel(key, self.logits.shape, self.logits.dtype)

    def sample_from_noise(self, noise: jax.Array) -> jax.Array:
        return jnp.argmax(self.logits + noise, axis=-1)  # the Gumbel-max draw

    def sample(self, key: jax.Array) -> jax.Array:
        return self.sample_from_noise(self.noise(key))

    def log_prob(self, action: jax.Array) -> jax.Array:
        return distrax.Categorical(logits=self.logits).log_prob(action)

    def entropy(self) -> jax.Array:
        return distrax.Categorical(logits=self.logits).entropy()

    def mode(self) -> jax.Array:
        return jnp.argmax(self.logits, axis=-1)

    def to_env_action(self, action: jax.Array) -> jax.Array:
        return action


def policy_output_size(action_space) -> int:
    """Width of the actor's last layer for an action space."""
    if isinstance(action_space, spaces.Box):
        return action_space.flat_dim
    if isinstance(action_space, spaces.MultiDiscrete):
        return int(sum(action_space.nvec))
    if isinstance(action_space, spaces.Discrete):
        return action_space.n
    raise TypeError(f"unsupported action space {action_space!r}; expected Box, Discrete or MultiDiscrete")


def masked_logits(logits: jax.Array, action_mask: jax.Array) -> jax.Array:
    """Illegal actions' logits set to -1e9: probability exactly 0, never sampled nor the mode,
    yet finite (0 * log p stays 0 in the entropy) and without gradient."""
    return jnp.where(action_mask, logits, _PADDING_LOGIT)


def action_mask_reader(observation_space, action_space) -> Callable[[jax.Array], jax.Array] | None:
    """``flat observation [..., obs] -> bool mask [..., policy outputs]`` for an observation
    with an ``"action_mask"`` entry (one 0/1 per Discrete action, or the MultiDiscrete
    components' masks concatenated: the actor's outputs' layout); None without one, so an
    environment without a mask compiles the program it compiled before masks existed.
    ``TypeError`` (a space PPO cannot take) for a mask of another shape or beside a continuous
    action. A choice (Discrete) or MultiDiscrete component with no legal action in a state
    counts all its actions legal there, as PQN's ``Branches.legal`` does: the policy draws by
    its own logits, and a component's real choices never tie with the padding (an out-of-range
    action)."""
    where = spaces.action_mask_slice(observation_space)
    if where is None:
        return None
    mask_shape = tuple(observation_space.spaces[spaces.ACTION_MASK].shape)
    if isinstance(action_space, spaces.Box):
        raise TypeError(
            f"observation entry 'action_mask' beside the continuous action space {action_space!r}; "
            "expected a Discrete or MultiDiscrete action space (a mask marks legal choices)"
        )
    expected = (policy_output_size(action_space),)
    if mask_shape != expected:
        raise TypeError(
            f"observation entry 'action_mask' has shape {mask_shape}; expected {expected}: one 0/1 per "
            f"choice of {action_space!r} (MultiDiscrete: the components' masks concatenated)"
        )
    sizes = action_space.nvec if isinstance(action_space, spaces.MultiDiscrete) else (action_space.n,)
    bounds = np.cumsum((0, *(int(n) for n in sizes)))

    def read(flat_observation: jax.Array) -> jax.Array:
        mask = flat_observation[..., where] > 0.5
        parts = [mask[..., a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        return jnp.concatenate([p | ~p.any(axis=-1, keepdims=True) for p in parts], axis=-1)

    return read


def make_distribution(
    action_space, actor_output: jax.Array, log_std: jax.Array | None, action_mask: jax.Array | None = None
):
    """The policy's distribution; ``action_mask`` (bool, the actor output's shape) restricts a
    categorical one to the legal actions (``masked_logits``)."""
    if action_mask is not None:
        if isinstance(action_space, spaces.Box):
            raise TypeError(f"an action mask needs a Discrete or MultiDiscrete action space, not {action_space!r}")
        actor_output = masked_logits(actor_output, action_mask)
    if isinstance(action_space, spaces.Box):
        low = jnp.broadcast_to(jnp.asarray(action_space.low, actor_output.dtype), action_space.shape)
        high = jnp.broadcast_to(jnp.asarray(action_space.high, actor_output.dtype), action_space.shape)
        return TanhGaussian(actor_output, jnp.broadcast_to(log_std, actor_output.shape), low, high)
    if isinstance(action_space, spaces.MultiDiscrete):
        return MultiCategorical(actor_output, tuple(int(n) for n in action_space.nvec))
    if isinstance(action_space, spaces.Discrete):
        return Categorical(actor_output)
    raise TypeError(f"unsupported action space {action_space!r}")


def sampling_noise(action_space, key: jax.Array, batch_shape: tuple[int, ...]) -> jax.Array:
    """The noise of ``batch_shape`` draws from the policy on ``action_space``, in one call: it
    depends on the distribution's shape only, never on its parameters."""
    template = make_distribution(
        action_space, jnp.zeros(batch_shape + (policy_output_size(action_space),), jnp.float32), jnp.float32(0.0)
    )
    return template.noise(key)
