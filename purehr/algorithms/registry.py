"""The algorithms by name (``--algorithm ppo``): the one place outside an algorithm's folder that
names it. An entry says where its config class, its builder and its metric names live; they are
imported on first use, so ``--help`` and the CSV columns read this module without JAX.

Adding an algorithm: its folder (``purehr/algorithms/<name>/``: ``config``, ``algorithm`` with a
``make_<name>(config, env, env_params, env_params_schedule) -> Algorithm``, ``metrics``) and one
line in ``ALGORITHMS`` (docs/interfaces.md, "Adding an algorithm")."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from purehr.algorithms.base import Algorithm, AlgorithmConfig, MetricNames


@dataclass(frozen=True)
class AlgorithmEntry:
    name: str
    summary: str
    config: str  # "module:ConfigClass"
    make: str  # "module:make_<name>"
    metrics: str  # "module:METRIC_NAMES"
    hyperparameters: str  # "module:HYPERPARAMETERS": the continuous fields the state carries (sweeps, PBT)

    def config_class(self) -> type:
        return _load(self.config)

    def metric_names(self) -> MetricNames:
        return _load(self.metrics)

    def hyperparameter_names(self) -> tuple[str, ...]:
        return _load(self.hyperparameters)

    def config_from_dict(self, fields: dict) -> AlgorithmConfig:
        """A recorded config (a manifest's, a saved model's) read back, checked as when built."""
        return self.config_class().from_dict(fields)

    def make_algorithm(self, config, env, env_params=None, env_params_schedule=None) -> Algorithm:
        return _load(self.make)(config, env, env_params, env_params_schedule)


ALGORITHMS = {
    "ppo": AlgorithmEntry(
        "ppo",
        "proximal policy optimisation (on-policy, actor-critic; any action space)",
        "purehr.algorithms.ppo.config:PPOConfig",
        "purehr.algorithms.ppo.algorithm:make_ppo",
        "purehr.algorithms.ppo.metrics:METRIC_NAMES",
        "purehr.algorithms.ppo.config:HYPERPARAMETERS",
    ),
    "pqn": AlgorithmEntry(
        "pqn",
        "parallel Q-learning: LayerNorm Q network, Q(lambda) returns, no replay buffer (Discrete, MultiDiscrete)",
        "purehr.algorithms.pqn.config:PQNConfig",
        "purehr.algorithms.pqn.algorithm:make_pqn",
        "purehr.algorithms.pqn.metrics:METRIC_NAMES",
        "purehr.algorithms.pqn.config:HYPERPARAMETERS",
    ),
}
DEFAULT_ALGORITHM = "ppo"


def get_algorithm(name: str) -> AlgorithmEntry:
    """The entry of ``name``; a ``ValueError`` naming the known ones otherwise."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r}: expected one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def algorithm_of(config: AlgorithmConfig) -> AlgorithmEntry:
    """The entry whose config class ``config`` is (a ``TypeError`` naming it otherwise)."""
    for entry in ALGORITHMS.values():
        if isinstance(config, entry.config_class()):
            return entry
    raise TypeError(
        f"config of type {type(config).__name__}: expected the config of a registered algorithm "
        f"({', '.join(sorted(ALGORITHMS))})"
    )


def make_algorithm(config: AlgorithmConfig, env, env_params=None, env_params_schedule=None) -> Algorithm:
    """The per-seed pieces of ``config``'s algorithm on ``env`` (see ``base.Algorithm``)."""
    return algorithm_of(config).make_algorithm(config, env, env_params, env_params_schedule)


def default_config(name: str = DEFAULT_ALGORITHM, **fields: Any) -> AlgorithmConfig:
    """``name``'s config with ``fields`` over its defaults (a task's defaults are built so)."""
    return get_algorithm(name).config_class()(**fields)


def _load(path: str) -> Any:
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)
