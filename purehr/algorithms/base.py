"""What the protocol asks of an algorithm, and nothing else: ``Algorithm`` (the per-seed pieces
built for one environment) and ``AlgorithmConfig`` (its settings). PPO is one implementation
(``purehr.algorithms.ppo``); the registry (``purehr.algorithms.registry``) finds each by name.

The protocol never reads an algorithm's state beyond three fields every state carries:
``update_index`` (int32 updates done: checkpoints, curricula and resumes line up on it),
``hparams`` (the explicit pytree of continuous hyperparameters: sweeps vmap and PBT explores it)
and ``key``. Everything else (parameters, optimiser, buffers, normalisers) is the algorithm's.
No JAX here: the command line's ``--help`` and the CSV columns read it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

ROLLOUT_METRICS = ("mean_step_reward", "mean_episode_return", "episodes_completed", "train_success_rate")
"""What every algorithm's rollout reports (``purehr.algorithms.rollout_metrics``), first in updates.csv;
its counters of bad actions and states and the environment's diagnostics follow them, as a task's
own columns."""


@dataclass(frozen=True)
class MetricNames:
    """The per-update metrics an algorithm reports, in updates.csv's order: what its rollout
    reports (``rollout/`` on the dashboards), then what its learning step reports (``train/``);
    its counters of bad actions and states and the environment's diagnostics follow them, as a
    task's own columns. ``meanings`` says in a line what each one measures."""

    rollout: tuple[str, ...]
    learning: tuple[str, ...]
    meanings: Mapping[str, str] = field(default_factory=dict)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.rollout + self.learning


class AlgorithmConfig(Protocol):
    """An algorithm's settings: a frozen dataclass whose fields carry their help
    (``metadata["help"]``, the text of their flags), checked when built (a ``ValueError`` naming
    the field). Its continuous hyperparameters are also a pytree (``hyperparams()``)."""

    total_timesteps: int

    @property
    def batch_size(self) -> int: ...  # environment steps per update (per seed)

    @property
    def num_updates(self) -> int: ...

    def hyperparams(self) -> Any: ...

    def replace(self, **changes) -> AlgorithmConfig: ...

    def to_dict(self) -> dict: ...

    # ``budget_dependence() -> str | None``: why the first steps of a longer run would differ
    # from this run's (a schedule over ``total_timesteps``: "its epsilon decays over the
    # budget"), None where nothing depends on the budget; a resume that extends the budget is
    # then refused with it (``purehr.run.planning.resume.extension_problem``, the one place
    # that asks). PPO's is its ``anneal_lr``; PQN's its ``anneal_lr`` and its epsilon decay;
    # SAC's None. A config without one is taken to depend on nothing.


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """An algorithm package's ``__getattr__`` (PEP 562): each public name (``exports``: name ->
    module) is imported on first use and kept, so importing the package (the registry reads its
    ``metrics`` for the CSV columns) does not import JAX."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            vars(sys.modules[package])[name] = value
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


class Algorithm(Protocol):
    """The per-seed pieces of an algorithm on one environment, unbatched (vmap them over seeds).

    ``init(key [2] uint32, hparams=None) -> state``: everything one seed needs to continue
    bit-for-bit (parameters, optimiser, normalisers, buffers, environment states, key).
    ``update(state) -> (state, metrics)``: one training iteration (environment steps and
    learning); metrics a flat dict of scalars named by ``metric_names`` (plus the rollout's
    counters, the environment's diagnostics, ``update`` and ``diverged_at_update``).
    ``policy(network_params, deterministic=True)``: ``policy(obs, t, key) -> env action`` for one
    observation (a ``RecurrentPolicy`` where the algorithm has memory), what evaluation runs.
    ``network_params(state)``: what ``policy`` takes from a state.
    ``diverged_at_update(state)``: the first update (1-based) whose losses or parameters were not
    finite, 0 for a healthy seed; traced or numpy, one seed or a leading seed axis.
    ``population_fields``: the fields of a state that a PBT member copies from its parent when it
    exploits (what was learned: networks, optimisers); it keeps the rest (environments, key,
    update counter, a replay buffer) and explores the copied ``hparams``.

    Optional: ``working_set_bytes(state_shapes, observation_size) -> int``, the bytes one seed's
    ``update`` holds beyond its state (gradients, a rollout, a minibatch's activations), given
    ``jax.eval_shape(init, key)``; the memory check before compiling
    (``purehr.run.host.estimate.TrainingMemory``) adds it to the state's bytes, and assumes a
    gradient's copy of the network and one batch of transitions where an algorithm has none.
    """

    name: str
    config: AlgorithmConfig
    env: Any
    env_params: Any
    metric_names: MetricNames
    recurrent: bool
    population_fields: tuple[str, ...]
    init: Callable[..., Any]
    update: Callable[[Any], tuple[Any, dict]]
    env_params_at: Callable[[Any, Any], Any]

    @property
    def num_updates(self) -> int: ...

    def policy(self, network_params, deterministic: bool = True) -> Callable: ...

    def network_params(self, state) -> Any: ...

    def diverged_at_update(self, state) -> Any: ...
