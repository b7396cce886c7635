"""PPO's network around its parts (``ActorCritic``, ``RecurrentActorCritic``) and the shipped
parts: separate actor and critic MLPs, and the GRU torso (``purehr.algorithms.ppo.torso``
chooses the parts: these, or a user's module).

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
    """The one PPO network around its parts: flat observation [..., obs] -> (actor output
    [..., P], log std [P] or None, value [...]). ``actor`` and ``critic`` are the shipped MLPs
    (towers ending in their own output layers: gain 0.01 and 1) or, with ``heads``, a user's
    torsos [..., F] that PPO's dense policy head (gain 0.01) and value head (gain 1) then read
    (None: the heads read the input itself); ``whole``: ``actor`` is a user's whole network
    giving (policy outputs, value) itself. The log std is state-independent; the normaliser
    reads the observation before any part."""

    actor: nn.Module | None
    critic: nn.Module | None
    policy_output_size: int
    continuous: bool
    log_std_init: float = -0.5
    normalize_observations: bool = False
    heads: bool = False
    whole: bool = False

    def setup(self) -> None:
        if self.normalize_observations:
            self.normalizer = ObservationNormalizer()
        if self.heads:
            self.policy_head = nn.Dense(self.policy_output_size, kernel_init=scaled_normal(POLICY_GAIN))
            self.value_head = nn.Dense(1, kernel_init=scaled_normal(VALUE_GAIN))
        if self.continuous:
            self.log_std = self.param(
                "log_std", nn.initializers.constant(self.log_std_init), (self.policy_output_size,)
            )

    def __call__(self, observation: jax.Array):
        return (*self.policy(observation), self.value(observation))

    def policy(self, observation: jax.Array):
        """(actor output, log std or None): the actor alone, for a caller that evaluates the
        critic on other observations as well."""
        x = self._normalized(observation)
        output = x if self.actor is None else self.actor(x)
        output = output[0] if self.whole else output
        return self.policy_head(output) if self.heads else output, (self.log_std if self.continuous else None)

    def value(self, observation: jax.Array) -> jax.Array:
        x = self._normalized(observation)
        if self.whole:
            return self.actor(x)[1]
        output = x if self.critic is None else self.critic(x)
        return jnp.squeeze(self.value_head(output) if self.heads else output, -1)

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


class GRUTorso(nn.Module):
    """The shipped memory (``PPOConfig.policy="gru"``), a recurrent torso: the observation
    embedded by one dense layer [..., W], a GRU folding it into the hidden state [..., W], and
    as features the hidden state, or with ``skip`` the hidden state beside this step's embedding
    [..., 2W], so the heads see the present directly and the memory only has to hold what the
    present does not show (docs/recurrent.md, "The readout"). Its step is split for a sequence
    (``RecurrentActorCritic``): ``prepare`` every step's GRU inputs at once, ``advance`` the
    hidden side alone inside the loop over time, ``finish`` the features after it."""

    width: int
    activation: str
    skip: bool = False
    top_level = True
    """Its parameters sit in the network's own scope (``embedding``, ``gru``), where recorded
    checkpoints have them."""

    def setup(self) -> None:
        self.embedding = nn.Dense(self.width, kernel_init=scaled_normal(HIDDEN_GAIN), bias_init=nn.initializers.zeros)
        self.gru = GRUGates(self.width)

    def initial_carry(self) -> jax.Array:
        return jnp.zeros((self.width,), jnp.float32)

    def __call__(self, hidden: jax.Array, observation: jax.Array):
        """(next hidden [..., W], features) of one step."""
        gates, embedded = self.prepare(observation)
        hidden, _ = self.advance(hidden, gates)
        return hidden, self.finish(hidden, embedded)

    def prepare(self, observation: jax.Array):
        """(GRU input terms [..., 3W], embedding [..., W]) of observations with any leading axes."""
        embedded = ACTIVATION_FUNCTIONS[self.activation](self.embedding(observation))
        return self.gru.inputs(embedded), embedded

    def advance(self, hidden: jax.Array, gates: jax.Array):
        hidden = self.gru.recur(hidden, gates)
        return hidden, hidden

    def finish(self, hidden: jax.Array, embedded: jax.Array) -> jax.Array:
        return jnp.concatenate([hidden, embedded], axis=-1) if self.skip else hidden


class RecurrentActorCritic(ActorCritic):
    """``ActorCritic`` after a memory shared by the actor and critic: ``torso`` (the shipped
    ``GRUTorso`` or a user's recurrent torso) turns (carry, normalised observation) into
    (carry, features), which the actor and critic (or PPO's heads) read. ``memory`` is one step
    (any leading axes); ``prepare``, ``advance`` and ``finish`` are its parts for a sequence, so
    a torso that splits its step (the GRU) runs only ``advance`` inside the loop over time; any
    other torso runs whole there. A caller resets the carry where an episode starts
    (``purehr.algorithms.ppo.recurrent``)."""

    torso: nn.Module | None = None

    def setup(self) -> None:
        super().setup()
        if getattr(self.torso, "top_level", False):
            nn.share_scope(self, self.torso)

    def __call__(self, carry, observation: jax.Array):
        """(next carry, (actor output, log std or None, value)) for one step."""
        carry, features = self.memory(carry, observation)
        return carry, (*self.policy(features), self.value(features))

    def initial_carry(self):
        """One environment's carry where an episode starts (the torso's declaration)."""
        return self.torso.initial_carry()

    def memory(self, carry, observation: jax.Array):
        """(next carry, features) of one step."""
        return self.torso(carry, self._observed(observation))

    def prepare(self, observation: jax.Array):
        """(the loop's inputs, what ``finish`` reads) of observations [..., obs]."""
        x = self._observed(observation)
        return self.torso.prepare(x) if self._split else (x, None)

    def advance(self, carry, inputs):
        """(next carry, what ``finish`` reads) of one step's inputs."""
        return self.torso.advance(carry, inputs) if self._split else self.torso(carry, inputs)

    def finish(self, outputs, context):
        """The features of ``advance``'s outputs (any leading axes)."""
        return self.torso.finish(outputs, context) if self._split else outputs

    @property
    def _split(self) -> bool:
        return callable(getattr(self.torso, "advance", None))

    def _observed(self, observation: jax.Array) -> jax.Array:
        return self.normalizer(observation) if self.normalize_observations else observation

    def _normalized(self, features: jax.Array) -> jax.Array:
        return features  # the actor and critic read the torso's features
