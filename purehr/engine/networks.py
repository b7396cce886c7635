"""Separate actor and critic MLPs.

Weights are Gaussian with std gain / sqrt(fan_in) (docs/protocol.md), not orthogonal: an
orthogonal init does a QR, and a QR vmapped over seeds deadlocks XLA's CPU thread pool
(docs/protocol.md, "Engine facts").

With ``normalize_observations`` the network owns the running observation statistics, in a
variable collection of its own beside ``params``: every caller of ``network.apply`` (rollout,
loss, bootstrap, the saved and restored policy) then sees the same normalised inputs, and a
checkpoint of the parameters carries them. Without it the variables are exactly as before."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

ACTIVATION_FUNCTIONS = {"tanh": nn.tanh, "relu": nn.relu, "swish": nn.swish}
OBSERVATION_STATISTICS = "observation_statistics"
"""The variable collection of the running observation mean, variance and count."""
NORMALIZATION_EPSILON = 1e-8
HIDDEN_GAIN = 2.0**0.5
POLICY_GAIN = 0.01
VALUE_GAIN = 1.0


def scaled_normal(gain: float) -> nn.initializers.Initializer:
    return nn.initializers.variance_scaling(gain**2, "fan_in", "normal")


class MLP(nn.Module):
    hidden: Sequence[int]
    activation: str
    output_size: int
    output_gain: float
    dense: type[nn.Module] = nn.Dense
    """The layer class: ``flax.linen.Dense``, or ``purehr.engine.dense.Dense`` (flax's
    parameters and forward pass, a faster weight gradient for a head of 2 to 8 outputs on a
    CPU: SAC's actor). The layers are named ``Dense_i`` either way: parameter trees do not
    depend on it."""

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        activation = ACTIVATION_FUNCTIONS[self.activation]
        for index, width in enumerate(self.hidden):
            layer = self.dense(
                width, kernel_init=scaled_normal(HIDDEN_GAIN), bias_init=nn.initializers.zeros, name=f"Dense_{index}"
            )
            x = activation(layer(x))
        output = self.dense(
            self.output_size,
            kernel_init=scaled_normal(self.output_gain),
            bias_init=nn.initializers.zeros,
            name=f"Dense_{len(self.hidden)}",
        )
        return output(x)


class ObservationNormalizer(nn.Module):
    """(x - mean) / sqrt(var + 1e-8), as rejax and PureJaxRL normalise. The statistics start at
    mean 0, variance 1, count 0 and change only through ``update_observation_statistics``; the
    gradient does not reach them (so Adam's update of them is exactly zero)."""

    @nn.compact
    def __call__(self, observation: jax.Array) -> jax.Array:
        size = observation.shape[-1:]
        mean = self.variable(OBSERVATION_STATISTICS, "mean", jnp.zeros, size, jnp.float32).value
        var = self.variable(OBSERVATION_STATISTICS, "var", jnp.ones, size, jnp.float32).value
        self.variable(OBSERVATION_STATISTICS, "count", jnp.zeros, (), jnp.float32)
        mean, var = jax.lax.stop_gradient((mean, var))
        return (observation - mean) / jnp.sqrt(var + NORMALIZATION_EPSILON)


def update_observation_statistics(variables, observations: jax.Array):
    """Fold a batch of flat observations (any leading axes) into the running mean and variance
    (Chan et al.'s parallel combination, as rejax's ``update_rms``); unchanged variables when the
    network does not normalise."""
    if OBSERVATION_STATISTICS not in variables:
        return variables
    statistics = variables[OBSERVATION_STATISTICS]["normalizer"]
    batch = observations.reshape((-1, observations.shape[-1])).astype(jnp.float32)
    batch_count = jnp.float32(batch.shape[0])
    batch_mean, batch_var = batch.mean(axis=0), batch.var(axis=0)
    count = statistics["count"] + batch_count
    delta = batch_mean - statistics["mean"]
    mean = statistics["mean"] + delta * batch_count / count
    var = (
        statistics["var"] * statistics["count"]
        + batch_var * batch_count
        + delta**2 * statistics["count"] * batch_count / count
    ) / count
    return {**variables, OBSERVATION_STATISTICS: {"normalizer": {"mean": mean, "var": var, "count": count}}}


class ActorCritic(nn.Module):
    """Returns (actor output, log std or None, value). The log std is state-independent."""

    actor_hidden: Sequence[int]
    critic_hidden: Sequence[int]
    activation: str
    policy_output_size: int
    continuous: bool
    log_std_init: float = -0.5
    normalize_observations: bool = False

    def setup(self) -> None:
        if self.normalize_observations:
            self.normalizer = ObservationNormalizer()
        self.actor = MLP(self.actor_hidden, self.activation, self.policy_output_size, POLICY_GAIN)
        self.critic = MLP(self.critic_hidden, self.activation, 1, VALUE_GAIN)
        if self.continuous:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.log_std_init), (self.policy_output_size,)
            )

    def __call__(self, observation: jax.Array):
        return (*self.policy(observation), self.value(observation))

    def policy(self, observation: jax.Array):
        """(actor output, log std or None): the actor alone, for a caller that evaluates the
        critic on other observations as well."""
        log_std = self.log_std if self.continuous else None
        return self.actor(self._normalized(observation)), log_std

    def value(self, observation: jax.Array) -> jax.Array:
        return jnp.squeeze(self.critic(self._normalized(observation)), -1)

    def _normalized(self, observation: jax.Array) -> jax.Array:
        return self.normalizer(observation) if self.normalize_observations else observation


class GRUGates(nn.Module):
    """A GRU (Cho et al. 2014, the equations of ``flax.linen.GRUCell``) split in two so the
    input side can run outside the time loop: ``inputs(x) -> [..., 3W]`` (the reset, update
    and candidate gates' input terms in one matmul), ``recur(h, gates) -> h'`` (the hidden
    side in one matmul). Flax's cell makes six dense calls per step; on a CPU every call inside
    a ``lax.scan`` costs a loop iteration's overhead, and with the inputs hoisted the update's
    scan over time runs one matmul per step (measured in docs/recurrent.md). The recurrent
    kernel is scaled-normal, not orthogonal (the vmapped-QR deadlock of the module docstring)."""

    width: int

    def setup(self) -> None:
        self.input_gates = nn.Dense(3 * self.width, kernel_init=scaled_normal(1.0), bias_init=nn.initializers.zeros)
        self.hidden_gates = nn.Dense(3 * self.width, kernel_init=scaled_normal(1.0), bias_init=nn.initializers.zeros)

    def inputs(self, x: jax.Array) -> jax.Array:
        return self.input_gates(x)

    def recur(self, hidden: jax.Array, gates: jax.Array) -> jax.Array:
        from_input = jnp.split(gates, 3, axis=-1)
        from_hidden = jnp.split(self.hidden_gates(hidden), 3, axis=-1)
        reset = nn.sigmoid(from_input[0] + from_hidden[0])
        update = nn.sigmoid(from_input[1] + from_hidden[1])
        candidate = jnp.tanh(from_input[2] + reset * from_hidden[2])
        return (1.0 - update) * candidate + update * hidden


class RecurrentActorCritic(nn.Module):
    """A memory shared by actor and critic: the (normalised) observation is embedded by one
    dense layer, a GRU folds the embedding into the hidden state [..., width], and the actor and
    critic MLPs read the *readout*: the hidden state, or with ``skip`` the hidden state beside
    this step's embedding [..., 2 width], so the heads see the present directly and the memory
    only has to hold what the present does not show (docs/recurrent.md, "The readout").
    ``memory`` is one step (any leading axes); ``embed``, ``inputs`` and ``recur`` are its
    parts, so a sequence computes every step's inputs at once and loops over ``recur`` alone. A
    caller resets the hidden state to zeros where an episode starts (``purehr.algorithms.ppo.recurrent``)."""

    actor_hidden: Sequence[int]
    critic_hidden: Sequence[int]
    activation: str
    policy_output_size: int
    continuous: bool
    width: int
    log_std_init: float = -0.5
    normalize_observations: bool = False
    skip: bool = False

    def setup(self) -> None:
        if self.normalize_observations:
            self.normalizer = ObservationNormalizer()
        self.embedding = nn.Dense(self.width, kernel_init=scaled_normal(HIDDEN_GAIN), bias_init=nn.initializers.zeros)
        self.gru = GRUGates(self.width)
        self.actor = MLP(self.actor_hidden, self.activation, self.policy_output_size, POLICY_GAIN)
        self.critic = MLP(self.critic_hidden, self.activation, 1, VALUE_GAIN)
        if self.continuous:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.log_std_init), (self.policy_output_size,)
            )

    def __call__(self, hidden: jax.Array, observation: jax.Array):
        """(next hidden, (actor output, log std or None, value)) for one step."""
        hidden, readout = self.memory(hidden, observation)
        return hidden, (*self.policy(readout), self.value(readout))

    def memory(self, hidden: jax.Array, observation: jax.Array) -> tuple[jax.Array, jax.Array]:
        """(next hidden [..., W], the heads' readout) of one step."""
        embedded = self.embed(observation)
        hidden = self.recur(hidden, self.inputs(embedded))
        return hidden, self.readout(hidden, embedded)

    def embed(self, observation: jax.Array) -> jax.Array:
        """The (normalised) observation's embedding [..., W], any leading axes."""
        if self.normalize_observations:
            observation = self.normalizer(observation)
        return ACTIVATION_FUNCTIONS[self.activation](self.embedding(observation))

    def inputs(self, embedded: jax.Array) -> jax.Array:
        """The GRU's input terms [..., 3W] of embeddings with any leading axes."""
        return self.gru.inputs(embedded)

    def recur(self, hidden: jax.Array, gates: jax.Array) -> jax.Array:
        return self.gru.recur(hidden, gates)

    def readout(self, hidden: jax.Array, embedded: jax.Array) -> jax.Array:
        """What the heads read: the hidden state, or [hidden, embedding] with ``skip``."""
        return jnp.concatenate([hidden, embedded], axis=-1) if self.skip else hidden

    def policy(self, readout: jax.Array):
        """(actor output, log std or None) read from the readout."""
        return self.actor(readout), (self.log_std if self.continuous else None)

    def value(self, readout: jax.Array) -> jax.Array:
        return jnp.squeeze(self.critic(readout), -1)
