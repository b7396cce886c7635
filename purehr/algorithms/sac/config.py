"""SAC configuration: static shape choices in a frozen dataclass, tunable numbers as a pytree
(the split of ``purehr.algorithms.ppo.config``, after rejax).

Sizes that change arrays or the compiled program (environments, steps, gradient steps, the
sampled minibatch, the buffer, network widths) are ``SACConfig`` fields, and so is every
continuous hyperparameter; the ones the training state carries as traced values (a sweep vmaps
them, PBT explores them) are the fields of ``SACHyperparams``.

One update is ``num_steps`` steps of ``num_envs`` environments (``batch_size`` = their product:
the environment steps per update per seed, the protocol's unit), their insertion into the replay
buffer, then ``gradient_steps`` gradient steps on ``sample_size`` transitions drawn uniformly from
the buffer. The replay ratio is ``gradient_steps * sample_size / batch_size`` samples per
environment step.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax
import jax.numpy as jnp
from flax import struct

from purehr.algorithms.config_types import check_network_spec, normalise_fields
from purehr.protocol_settings import refuse_protocol_settings, with_help

ACTIVATIONS = ("tanh", "relu", "swish")
INT_FIELDS = (
    "total_timesteps",
    "num_envs",
    "num_steps",
    "gradient_steps",
    "sample_size",
    "buffer_size",
    "n_step",
)
NON_NEGATIVE_INT_FIELDS = ("learning_starts",)
FLOAT_FIELDS = (
    "actor_learning_rate",
    "critic_learning_rate",
    "temperature_learning_rate",
    "gamma",
    "tau",
    "initial_temperature",
    "target_entropy_per_dimension",
    "action_noise_correlation",
)
SIZES_FIELDS = ("actor_hidden", "critic_hidden")
MAX_OPTIMIZER_STEPS = 2**31 - 1
"""Largest count of an int32 counter: the limit on updates x gradient steps per seed."""


@struct.dataclass
class SACHyperparams:
    """The continuous ``SACConfig`` fields the training state carries as traced values, float32
    scalars (or [seeds] in a sweep); ``SACConfig.hyperparams()`` builds one. The field order is
    the leaf order of every checkpoint: do not reorder."""

    actor_learning_rate: jax.Array
    critic_learning_rate: jax.Array
    temperature_learning_rate: jax.Array
    gamma: jax.Array
    tau: jax.Array
    target_entropy_per_dimension: jax.Array


HYPERPARAMETERS = tuple(field.name for field in dataclasses.fields(SACHyperparams))
"""The names of the ``SACHyperparams`` fields, in their (checkpoint leaf) order."""


@dataclass(frozen=True)
class SACConfig:
    total_timesteps: int = with_help(1_000_000, "environment steps of training per seed")
    num_envs: int = with_help(16, "parallel environments per seed")
    num_steps: int = with_help(8, "environment steps per environment and update")
    gradient_steps: int = with_help(16, "gradient steps (critic, actor, temperature) per update")
    sample_size: int = with_help(256, "transitions sampled from the replay buffer per gradient step")
    buffer_size: int = with_help(100_000, "replay buffer capacity in transitions per seed (oldest overwritten)")
    learning_starts: int = with_help(
        5_000, "environment steps per seed of uniform random actions before the first gradient step"
    )
    actor_learning_rate: float = with_help(3e-4, "Adam step size of the actor")
    critic_learning_rate: float = with_help(3e-4, "Adam step size of the twin critics")
    temperature_learning_rate: float = with_help(3e-4, "Adam step size of the log temperature")
    gamma: float = with_help(0.99, "discount factor")
    tau: float = with_help(0.005, "Polyak step of the target critics towards the critics per gradient step")
    initial_temperature: float = with_help(1.0, "entropy temperature alpha at the start")
    target_entropy_per_dimension: float = with_help(
        -1.0, "target entropy per action dimension (the target is this x action dimensions; SAC's: -1)"
    )
    actor_hidden: tuple[int, ...] = with_help((256, 256), "actor network layer widths")
    critic_hidden: tuple[int, ...] = with_help((256, 256), "critic network layer widths (each of the twins)")
    activation: str = with_help("relu", "hidden activation (tanh, relu or swish)")
    action_noise_correlation: float = with_help(
        0.0,
        "b in [0, 1) of the rollout actions' AR(1) noise eps_t = b eps_{t-1} + sqrt(1 - b^2) z_t (stationary "
        "N(0, 1), lag-k correlation b^k; exp(-1/tau) for a correlation time of tau steps); 0: white, SAC's",
    )
    n_step: int = with_help(
        1, "rewards summed in the critics' target before the bootstrap (stopping at episode ends); 1: SAC's"
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
            "SACConfig",
            checkpoint_interval=checkpoint_interval,
            eval_episodes=eval_episodes,
            full_eval_interval=full_eval_interval,
            quick_eval_episodes=quick_eval_episodes,
        )
        self._check_types()
        for name in INT_FIELDS:
            if getattr(self, name) <= 0:
                raise ValueError(f"SACConfig.{name}={getattr(self, name)!r}: expected a positive integer")
        if self.learning_starts < 0:
            raise ValueError(f"SACConfig.learning_starts={self.learning_starts!r}: expected an integer >= 0")
        if self.buffer_size < self.batch_size:
            raise ValueError(
                f"SACConfig.buffer_size={self.buffer_size}: expected at least one update's environment steps, "
                f"num_envs * num_steps = {self.num_envs} * {self.num_steps} = {self.batch_size}"
            )
        for name in ("actor_learning_rate", "critic_learning_rate", "temperature_learning_rate", "initial_temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"SACConfig.{name}={getattr(self, name)!r}: expected a finite number > 0")
        for name in ("gamma", "tau"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"SACConfig.{name}={getattr(self, name)!r}: expected in [0, 1]")
        if not 0 <= self.action_noise_correlation < 1:
            raise ValueError(
                f"SACConfig.action_noise_correlation={self.action_noise_correlation!r}: expected in [0, 1) "
                "(0: white noise; exp(-1/tau) for a correlation time of tau steps)"
            )
        if self.n_step * self.num_envs > self.buffer_size:
            raise ValueError(
                f"SACConfig.n_step={self.n_step}: expected n_step * num_envs <= buffer_size = {self.buffer_size} "
                "(an n-step window of one environment spans n_step * num_envs buffer rows)"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"SACConfig.activation={self.activation!r}: expected one of {ACTIVATIONS}")
        if self.num_updates * self.gradient_steps > MAX_OPTIMIZER_STEPS:
            raise ValueError(
                f"SACConfig.total_timesteps={self.total_timesteps:,}: {self.num_updates:,} updates x "
                f"{self.gradient_steps} gradient steps is more than the {MAX_OPTIMIZER_STEPS:,} an int32 step "
                f"counter holds; expected total_timesteps <= "
                f"{MAX_OPTIMIZER_STEPS // self.gradient_steps * self.batch_size:,}"
            )

    def _check_types(self) -> None:
        """Wrong types and non-finite numbers are refused by name, numbers normalised
        (``purehr.algorithms.config_types``)."""
        normalise_fields(
            self, ints=INT_FIELDS, non_negative_ints=NON_NEGATIVE_INT_FIELDS, floats=FLOAT_FIELDS, sizes=SIZES_FIELDS
        )
        check_network_spec("SACConfig", self.network)
        if not isinstance(self.activation, str):
            raise ValueError(f"SACConfig.activation={self.activation!r}: expected one of {ACTIVATIONS}")

    @property
    def batch_size(self) -> int:
        """Environment steps per update per seed (the protocol's unit; not the sampled minibatch,
        which is ``sample_size``)."""
        return self.num_envs * self.num_steps

    @property
    def num_updates(self) -> int:
        """Rounded up, so the last checkpoint target (= total_timesteps) is always reached."""
        return -(-self.total_timesteps // self.batch_size)

    @property
    def warmup_updates(self) -> int:
        """Updates of uniform random actions and no gradient step: those that start before
        ``learning_starts`` environment steps were taken."""
        return -(-self.learning_starts // self.batch_size)

    def budget_dependence(self) -> None:
        """None: nothing of SAC's depends on the budget (no learning-rate decay; the warm-up is
        ``learning_starts`` steps, not a share of the budget), so a run can be extended."""
        return None

    def hyperparams(self) -> SACHyperparams:
        return SACHyperparams(**{name: jnp.float32(getattr(self, name)) for name in HYPERPARAMETERS})

    def replace(self, **changes) -> SACConfig:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(
                f"unknown SACConfig field(s) {sorted(unknown)}; expected some of "
                f"{[f.name for f in dataclasses.fields(self)]}"
            )
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> SACConfig:
        unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown SACConfig field(s) {sorted(unknown)}")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


assert set(HYPERPARAMETERS) <= set(FLOAT_FIELDS), "every SACHyperparams field is a float SACConfig field"
