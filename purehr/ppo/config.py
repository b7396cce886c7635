"""PPO configuration: static shape choices in a frozen dataclass, tunable numbers as a pytree.

The split follows rejax: everything that changes array shapes or the compiled program
(sizes, network widths) lives in `PPOConfig`, and so does every continuous hyperparameter;
those named in `HYPERPARAMETERS` are also carried by the training state as `PPOHyperparams`,
a pytree generated from that list, so a sweep is a `vmap` over it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np
from flax import struct

ACTIVATIONS = ("tanh", "relu", "swish")
INT_FIELDS = (
    "total_timesteps",
    "num_envs",
    "num_steps",
    "num_epochs",
    "minibatch_size",
    "checkpoint_interval",
    "eval_episodes",
    "full_eval_interval",
    "quick_eval_episodes",
)
FLOAT_FIELDS = (
    "learning_rate",
    "gamma",
    "gae_lambda",
    "clip_range",
    "vf_coef",
    "ent_coef",
    "max_grad_norm",
    "log_std_init",
)
BOOL_FIELDS = ("anneal_lr", "normalize_observations", "elementwise_grad_clip")
SIZES_FIELDS = ("actor_hidden", "critic_hidden")
RETIRED_FIELDS = ("progress_interval",)
"""Fields older manifests hold that nothing reads any more: ``from_dict`` drops them."""
FLOAT32_MAX = float(np.finfo(np.float32).max)
MAX_OPTIMIZER_STEPS = 2**31 - 1
"""Largest count of an int32 counter: the limit on updates x epochs x minibatches per seed."""
MAX_HELDOUT_EPISODES = 100_000
"""The largest held-out evaluation scripts/evaluate.py and ``PPOModel.evaluate`` accept: every
episode runs at once (vmapped), and 10^8 swing episodes asked XLA for 354 GB (about 3.5 kB
each), so this bound keeps a request near 0.35 GB."""


HYPERPARAMETERS = ("learning_rate", "clip_range", "ent_coef", "vf_coef", "gae_lambda", "gamma", "max_grad_norm")
"""The continuous ``PPOConfig`` fields the training state carries as traced values (what a
sweep vmaps), in the leaf order of ``PPOHyperparams`` and so of every checkpoint."""

# Declared once, in PPOConfig (name, default, validation); the pytree is generated from the list.
PPOHyperparams = struct.dataclass(
    type(
        "PPOHyperparams",
        (),
        {
            "__module__": __name__,
            "__annotations__": {name: "jax.Array" for name in HYPERPARAMETERS},
            "__doc__": "The ``HYPERPARAMETERS`` of a ``PPOConfig`` as float32 arrays (scalars, or with a "
            "leading seed axis in a sweep): ``PPOConfig.hyperparams()`` builds one.",
        },
    )
)


@dataclass(frozen=True)
class PPOConfig:
    total_timesteps: int = 1_000_000
    num_envs: int = 8
    num_steps: int = 256
    num_epochs: int = 4
    minibatch_size: int = 256
    learning_rate: float = 3e-4
    anneal_lr: bool = True
    gamma: float = 0.995
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.001
    max_grad_norm: float = 0.5
    elementwise_grad_clip: bool = False
    """Clip each gradient element to +-max_grad_norm (``optax.clip``, what rejax does under the
    name max_grad_norm) instead of the gradients' global norm: with one optimiser over actor
    and critic, a global clip lets a large value-loss gradient shrink the actor's step too."""
    actor_hidden: tuple[int, ...] = (64, 64)
    critic_hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    log_std_init: float = -0.5
    normalize_observations: bool = False
    """Normalise the networks' inputs by the running mean and variance of every observation
    trained on so far (all environments of the batch), updated after each update's epochs and
    kept with the network parameters (``purehr.ppo.networks``); rejax's Pendulum setting."""
    checkpoint_interval: int = 50_000
    eval_episodes: int = 100
    full_eval_interval: int = 1
    """Every ``full_eval_interval``-th checkpoint target (and the first and last) gets the full
    held-out evaluation and a showcase episode; the targets between evaluate only
    ``quick_eval_episodes`` fixed episodes. 1 = full evaluation at every checkpoint."""
    quick_eval_episodes: int = 100

    def __post_init__(self) -> None:
        self._check_types()
        for name in INT_FIELDS:
            value = getattr(self, name)
            if value <= 0:
                raise ValueError(f"PPOConfig.{name}={value!r}: expected a positive integer")
        if self.full_eval_interval > 1 and self.quick_eval_episodes > self.eval_episodes:
            raise ValueError(
                f"PPOConfig.quick_eval_episodes={self.quick_eval_episodes}: expected at most "
                f"eval_episodes={self.eval_episodes}"
            )
        if self.batch_size % self.minibatch_size:
            raise ValueError(
                f"PPOConfig.minibatch_size={self.minibatch_size} does not divide the batch "
                f"num_envs * num_steps = {self.num_envs} * {self.num_steps} = {self.batch_size}; "
                f"expected a divisor of {self.batch_size}"
            )
        for name in ("learning_rate", "clip_range", "max_grad_norm"):
            if not getattr(self, name) > 0:
                raise ValueError(f"PPOConfig.{name}={getattr(self, name)!r}: expected a finite number > 0")
        for name in ("vf_coef", "ent_coef"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"PPOConfig.{name}={getattr(self, name)!r}: expected a finite number >= 0")
        for name in ("gamma", "gae_lambda"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"PPOConfig.{name}={getattr(self, name)!r}: expected in [0, 1]")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"PPOConfig.activation={self.activation!r}: expected one of {ACTIVATIONS}")
        self._check_budget()

    def _check_types(self) -> None:
        """Wrong types and non-finite numbers are refused by name (a string learning rate, a
        NaN log std, ``anneal_lr='no'``, which is truthy); numbers are normalised to Python
        ``int``/``float`` and sizes to tuples, so configs compare, hash and serialise alike."""
        for name in INT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
                raise ValueError(f"PPOConfig.{name}={value!r}: expected a positive integer, got {type(value).__name__}")
            object.__setattr__(self, name, int(value))
        for name in FLOAT_FIELDS:
            value = getattr(self, name)
            if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise ValueError(
                    f"PPOConfig.{name}={value!r}: expected a finite real number (int or float), "
                    f"got {type(value).__name__}"
                )
            try:
                number = float(value)
            except OverflowError:  # an int beyond float range
                number = math.inf
            if not abs(number) <= FLOAT32_MAX:  # NaN fails this too; training is float32
                raise ValueError(
                    f"PPOConfig.{name}={value!r}: expected a finite number "
                    f"(|x| <= {FLOAT32_MAX:.4g}, the float32 range training uses)"
                )
            object.__setattr__(self, name, number)
        for name in BOOL_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise ValueError(f"PPOConfig.{name}={value!r}: expected True or False, got {type(value).__name__}")
            object.__setattr__(self, name, bool(value))
        if not isinstance(self.activation, str):
            raise ValueError(f"PPOConfig.activation={self.activation!r}: expected one of {ACTIVATIONS}")
        for name in SIZES_FIELDS:
            sizes = getattr(self, name)
            if (
                not isinstance(sizes, (tuple, list))
                or not sizes
                or any(isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s <= 0 for s in sizes)
            ):
                raise ValueError(f"PPOConfig.{name}={sizes!r}: expected a non-empty tuple of positive ints")
            object.__setattr__(self, name, tuple(int(s) for s in sizes))

    def _check_budget(self) -> None:
        """The update and optimiser-step counters are int32 on the device (optax counts its
        steps in int32 without x64), so a budget whose optimiser steps do not fit is refused
        here, before anything is compiled or written. Environment steps are never counted
        on the device: they are ``update * batch_size`` in Python ints on the host."""
        steps_per_update = self.num_epochs * self.num_minibatches
        if self.num_updates * steps_per_update > MAX_OPTIMIZER_STEPS:
            most = MAX_OPTIMIZER_STEPS // steps_per_update * self.batch_size
            raise ValueError(
                f"PPOConfig.total_timesteps={self.total_timesteps:,}: {self.num_updates:,} updates x "
                f"{self.num_epochs} epochs x {self.num_minibatches} minibatches = "
                f"{self.num_updates * steps_per_update:,} optimiser steps, more than the "
                f"{MAX_OPTIMIZER_STEPS:,} an int32 step counter holds; expected total_timesteps <= "
                f"{most:,} with this batch ({self.batch_size} steps per update)"
            )

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_minibatches(self) -> int:
        return self.batch_size // self.minibatch_size

    @property
    def num_updates(self) -> int:
        """Rounded up, so the last checkpoint target (= total_timesteps) is always reached."""
        return -(-self.total_timesteps // self.batch_size)  # exact for any int

    def hyperparams(self) -> PPOHyperparams:
        return PPOHyperparams(**{name: jnp.float32(getattr(self, name)) for name in HYPERPARAMETERS})

    def replace(self, **changes) -> PPOConfig:
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise ValueError(
                f"unknown PPOConfig field(s) {sorted(unknown)}; expected some of "
                f"{[f.name for f in dataclasses.fields(self)]}"
            )
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PPOConfig:
        fields = {f.name for f in dataclasses.fields(cls)}
        data = {k: v for k, v in data.items() if k not in RETIRED_FIELDS}
        unknown = set(data) - fields
        if unknown:
            raise ValueError(f"unknown PPOConfig field(s) {sorted(unknown)}")
        data = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}
        return cls(**data)
