"""The algorithms by name (``--algorithm ppo``): the one place outside an algorithm's folder that
names it. An entry says where its config class, its builder and its metric names live; they are
imported on first use, so ``--help`` and the CSV columns read this module without JAX.

Adding an algorithm: its folder (``purehr/algorithms/<name>/``: ``config``, ``algorithm`` with a
``make_<name>(config, env, env_params, env_params_schedule) -> Algorithm``, ``metrics``) and one
line in ``ALGORITHMS`` (docs/interfaces.md, "Adding an algorithm")."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

from purehr.algorithms.base import Algorithm, AlgorithmConfig, MetricNames


@dataclasses.dataclass(frozen=True)
class AlgorithmEntry:
    name: str
    summary: str
    config: str  # "module:ConfigClass"
    make: str  # "module:make_<name>"
    metrics: str  # "module:METRIC_NAMES"
    hyperparameters: str  # "module:HYPERPARAMETERS": the continuous fields the state carries (sweeps, PBT)
    action_spaces: tuple[str, ...] = ("Discrete", "MultiDiscrete", "Box")  # the spaces it can act in
    defaults: str | None = None  # "module:function": function(action_space) -> its config for such a task

    def serves(self, action_space) -> bool:
        """Whether it can act in ``action_space`` (a ``purehr.envs.spaces`` space)."""
        return type(action_space).__name__ in self.action_spaces

    def check_serves(self, entry: str, task: str, action_space) -> None:
        """``ValueError`` naming the entry, this algorithm and the spaces it supports when it
        cannot act in ``task``'s ``action_space`` (before anything is built)."""
        if not self.serves(action_space):
            raise ValueError(
                f"{entry}: {self.name} needs {' or '.join(self.action_spaces)} actions; {task}'s are "
                f"{space_text(action_space)}"
            )

    def defaults_for(self, action_space) -> AlgorithmConfig:
        """Its own config for a task without a tuned one (its ``defaults``; else the config
        class's defaults)."""
        if self.defaults is None:
            return self.config_class()()
        return _load(self.defaults)(action_space)

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
        defaults="purehr.algorithms.ppo.config:defaults_for",
    ),
    "sac": AlgorithmEntry(
        "sac",
        "soft actor-critic (off-policy, replay buffer in the state, learned temperature; Box actions)",
        "purehr.algorithms.sac.config:SACConfig",
        "purehr.algorithms.sac.algorithm:make_sac",
        "purehr.algorithms.sac.metrics:METRIC_NAMES",
        "purehr.algorithms.sac.config:HYPERPARAMETERS",
        action_spaces=("Box",),
    ),
    "pqn": AlgorithmEntry(
        "pqn",
        "parallel Q-learning: LayerNorm Q network, Q(lambda) returns, no replay buffer (Discrete, MultiDiscrete)",
        "purehr.algorithms.pqn.config:PQNConfig",
        "purehr.algorithms.pqn.algorithm:make_pqn",
        "purehr.algorithms.pqn.metrics:METRIC_NAMES",
        "purehr.algorithms.pqn.config:HYPERPARAMETERS",
        action_spaces=("Discrete", "MultiDiscrete"),
    ),
}
DEFAULT_ALGORITHM = "ppo"


def get_algorithm(name: str) -> AlgorithmEntry:
    """The entry of ``name``; a ``ValueError`` naming the known ones otherwise."""
    if name not in ALGORITHMS:
        raise ValueError(f"algorithm={name!r}: expected one of {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name]


def space_text(space) -> str:
    """``Box(2,)``, ``Discrete(3)``, ``MultiDiscrete(5, 3)``: an action space in a message."""
    kind = type(space).__name__
    if hasattr(space, "nvec"):
        return f"{kind}({', '.join(map(str, space.nvec))})"
    if hasattr(space, "shape") and kind == "Box":
        return f"{kind}{tuple(space.shape)}"
    return f"{kind}({getattr(space, 'n', '')})"


def split_entry(entry: str) -> tuple[str, str | None]:
    """``swing@sac`` -> ("swing", "sac"); ``swing`` -> ("swing", None): a run's task entry is a
    task, trained by the algorithm its ``@`` suffix names (else the run's ``--algorithm``)."""
    task, at, algorithm = entry.rpartition("@")
    return (task, algorithm) if at else (entry, None)


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
