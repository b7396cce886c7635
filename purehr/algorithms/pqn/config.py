"""PQN configuration: sizes and every setting in a frozen dataclass (help beside each field),
the continuous ones the training state carries as a pytree (``PQNHyperparams``), as PPOConfig.

The defaults are purejaxql's published CartPole settings (Gallici et al., 2024): 32
environments x 64 steps, 4 epochs of 16 minibatches, RAdam at 1e-4 decayed linearly, gradient
norm 10, gamma 0.99, lambda 0.95, epsilon 1 -> 0.2 over the first 20% of updates, rewards x 0.1,
two LayerNorm layers of 256. A task sets its own (``purehr.tasks``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import struct

from purehr.algorithms.config_types import annealed_learning_rate, check_network_spec, normalise_fields
from purehr.protocol_settings import refuse_protocol_settings, with_help

ACTIVATIONS = ("relu", "tanh", "swish")
INT_FIELDS = ("total_timesteps", "num_envs", "num_steps", "num_epochs", "minibatch_size")
FLOAT_FIELDS = (
    "learning_rate",
    "gamma",
    "q_lambda",
    "epsilon_start",
    "epsilon_finish",
    "epsilon_decay_fraction",
    "max_grad_norm",
    "reward_scaling",
    "eval_epsilon",
    "input_scale",
)
BOOL_FIELDS = ("anneal_lr", "layer_norm", "normalize_observations")
MAX_UPDATES = 2**31 - 1
"""The update counter is int32 on the device."""


@struct.dataclass
class PQNHyperparams:
    """The continuous ``PQNConfig`` fields the training state carries as float32 arrays (what a
    sweep vmaps and PBT explores): scalars, or with a leading seed axis in a sweep. The field
    order is the leaf order of every checkpoint."""

    learning_rate: jax.Array
    gamma: jax.Array
    q_lambda: jax.Array
    epsilon_start: jax.Array
    epsilon_finish: jax.Array
    epsilon_decay_fraction: jax.Array
    max_grad_norm: jax.Array
    reward_scaling: jax.Array


HYPERPARAMETERS = tuple(field.name for field in dataclasses.fields(PQNHyperparams))
"""The names of the ``PQNHyperparams`` fields, in their (checkpoint leaf) order."""


@dataclass(frozen=True)
class PQNConfig:
    total_timesteps: int = with_help(500_000, "environment steps of training per seed")
    num_envs: int = with_help(32, "parallel environments per seed")
    num_steps: int = with_help(64, "rollout length per environment and update")
    num_epochs: int = with_help(4, "passes over each batch per update")
    minibatch_size: int = with_help(128, "transitions per gradient step (must divide num_envs * num_steps)")
    learning_rate: float = with_help(1e-4, "RAdam step size")
    anneal_lr: bool = with_help(True, "decay the learning rate linearly to 0 over the budget (true/false)")
    gamma: float = with_help(0.99, "discount factor")
    q_lambda: float = with_help(0.95, "lambda of the Q(lambda) returns (0: one-step Q-learning targets)")
    epsilon_start: float = with_help(1.0, "exploration epsilon at the first update")
    epsilon_finish: float = with_help(0.2, "exploration epsilon once the decay is over")
    epsilon_decay_fraction: float = with_help(0.2, "share of the updates over which epsilon decays linearly")
    max_grad_norm: float = with_help(10.0, "global gradient-norm clip")
    reward_scaling: float = with_help(
        0.1, "multiply the rewards the returns are built from by this; logged returns stay unscaled"
    )
    hidden: tuple[int, ...] = with_help((256, 256), "Q network layer widths")
    activation: str = with_help("relu", "hidden activation (relu, tanh or swish)")
    layer_norm: bool = with_help(True, "LayerNorm before each hidden activation (PQN's stabiliser; true/false)")
    """Gallici et al.'s point: with LayerNorm, TD learning without a target network is stable;
    false only to ablate it."""
    normalize_observations: bool = with_help(
        False, "normalise observations by their running mean and variance (true/false)"
    )
    eval_epsilon: float = with_help(0.01, "epsilon of the stochastic evaluation policy (deterministic=False)")
    conv_channels: tuple[int, ...] = with_help(
        (), "channels of 3 x 3 convolutions over an image observation before the hidden layers (none: an MLP)"
    )
    """A convolutional torso (``purehr.algorithms.pqn.network.QNetwork``): each entry one 3 x 3
    convolution (stride 1, no padding), then LayerNorm (with ``layer_norm``) and the activation,
    over the observation in its own [height, width, channels] shape; flattened into the hidden
    layers. purejaxql's MinAtar network is ``(16,)`` with ``hidden=(128,)``."""
    input_scale: float = with_help(
        1.0, "multiply the observations by this before the network (purejaxql's MinAtar: 1/255)"
    )
    network: str | None = with_help(
        None, "your own network: module:factory or path/to/file.py:factory (docs/how-to/own_network.md)"
    )
    """A user's network (``purehr.engine.user_network``): the factory gets the observation and
    action spaces as the environment gives them and returns a flax torso (the algorithm adds its
    heads and normalisation) or a whole network. None: the shipped network of the other fields."""
    checkpoint_interval: dataclasses.InitVar[int | None] = None
    eval_episodes: dataclasses.InitVar[int | None] = None
    full_eval_interval: dataclasses.InitVar[int | None] = None
    quick_eval_episodes: dataclasses.InitVar[int | None] = None
    """Protocol settings (``purehr.protocol_settings.ProtocolSettings``), the task's: refused here
    naming where they go (``PPOConfig`` alone keeps them, from before they had an owner)."""

    def __post_init__(self, checkpoint_interval, eval_episodes, full_eval_interval, quick_eval_episodes) -> None:
        refuse_protocol_settings(
            "PQNConfig",
            checkpoint_interval=checkpoint_interval,
            eval_episodes=eval_episodes,
            full_eval_interval=full_eval_interval,
            quick_eval_episodes=quick_eval_episodes,
        )
        self._check_types()
        for name in INT_FIELDS:
            if getattr(self, name) <= 0:
                raise ValueError(f"PQNConfig.{name}={getattr(self, name)!r}: expected a positive integer")
        if self.batch_size % self.minibatch_size:
            raise ValueError(
                f"PQNConfig.minibatch_size={self.minibatch_size} does not divide the batch "
                f"num_envs * num_steps = {self.num_envs} * {self.num_steps} = {self.batch_size}; "
                f"expected a divisor of {self.batch_size}"
            )
        for name in ("learning_rate", "max_grad_norm", "reward_scaling", "epsilon_decay_fraction", "input_scale"):
            if not getattr(self, name) > 0:
                raise ValueError(f"PQNConfig.{name}={getattr(self, name)!r}: expected a finite number > 0")
        for name in ("gamma", "q_lambda", "epsilon_start", "epsilon_finish", "epsilon_decay_fraction", "eval_epsilon"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"PQNConfig.{name}={getattr(self, name)!r}: expected in [0, 1]")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"PQNConfig.activation={self.activation!r}: expected one of {ACTIVATIONS}")
        if self.num_updates > MAX_UPDATES:
            raise ValueError(
                f"PQNConfig.total_timesteps={self.total_timesteps:,}: {self.num_updates:,} updates, more than the "
                f"{MAX_UPDATES:,} an int32 counter holds; expected at most {MAX_UPDATES * self.batch_size:,}"
            )

    def _check_types(self) -> None:
        """Wrong types and non-finite numbers are refused by name, numbers normalised
        (``purehr.algorithms.config_types``)."""
        normalise_fields(
            self,
            ints=INT_FIELDS,
            floats=FLOAT_FIELDS,
            bools=BOOL_FIELDS,
            sizes=("hidden",),
            optional_sizes=("conv_channels",),
        )
        check_network_spec("PQNConfig", self.network)
        if not isinstance(self.activation, str):
            raise ValueError(f"PQNConfig.activation={self.activation!r}: expected one of {ACTIVATIONS}")

    @property
    def batch_size(self) -> int:
        """Environment steps per update (per seed): the protocol counts steps by it."""
        return self.num_envs * self.num_steps

    @property
    def num_minibatches(self) -> int:
        return self.batch_size // self.minibatch_size

    @property
    def num_updates(self) -> int:
        """Rounded up, so the last checkpoint target (= total_timesteps) is always reached."""
        return -(-self.total_timesteps // self.batch_size)

    def budget_dependence(self) -> str | None:
        """Why a longer run's first updates would differ from this run's, or None: a resume that
        extends the budget is refused with it. Both PQN's schedules span the budget: the annealed
        learning rate, and epsilon's decay over ``epsilon_decay_fraction`` of the updates (a
        constant epsilon has none)."""
        annealed = annealed_learning_rate(self.anneal_lr)
        if annealed or self.epsilon_start == self.epsilon_finish:
            return annealed
        return (
            f"its exploration epsilon decays from {self.epsilon_start:g} to {self.epsilon_finish:g} over the first "
            f"epsilon_decay_fraction={self.epsilon_decay_fraction:g} of the budget's updates (a constant epsilon, "
            "--epsilon-finish equal to --epsilon-start, has no such schedule)"
        )

    def hyperparams(self) -> PQNHyperparams:
        return PQNHyperparams(**{name: jnp.float32(getattr(self, name)) for name in HYPERPARAMETERS})

    def replace(self, **changes) -> PQNConfig:
        names = [f.name for f in dataclasses.fields(self)]
        unknown = set(changes) - set(names)
        if unknown:
            raise ValueError(f"unknown PQNConfig field(s) {sorted(unknown)}; expected some of {names}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PQNConfig:
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown PQNConfig field(s) {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


assert set(HYPERPARAMETERS) <= set(FLOAT_FIELDS), "every PQNHyperparams field is a float PQNConfig field"
