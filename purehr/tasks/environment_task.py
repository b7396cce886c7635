"""A task for any environment: what a suite's environment or a user's gets, so that it goes
through the whole protocol (checkpoints, resume, held-out evaluation, floors, figures,
restore) like swing and hrv. Its held-out evaluation is the generic one
(``purehr.envs.rollout``), its floors acting at random and, for continuous actions, the zero
action; it has no reference policy unless its maker names one of the policies it gives
(``baselines``, ``reference``: a ``module:factory`` task's ``BASELINES``)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any

import numpy as np

from purehr.algorithms.base import AlgorithmConfig
from purehr.algorithms.registry import DEFAULT_ALGORITHM, get_algorithm
from purehr.engine.distributions import action_mask_reader
from purehr.envs import spaces
from purehr.envs.base import Environment, check_environment
from purehr.envs.rollout import heldout_evaluation, random_policy, record_episode, zero_policy
from purehr.protocol_settings import ProtocolSettings
from purehr.tasks.task import Baseline, Task

BUILT_BY: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""environment -> the name of the task whose ``make_env`` built it (``task_of_env``)."""
BUILT_WITH: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""environment -> the keyword arguments its ``make_env`` was called with (what a manifest records)."""
SUPPORTED_OBSERVATIONS = "Box, or a Dict of Boxes (flattened in sorted-key order)"
SUPPORTED_ACTIONS = "Discrete, MultiDiscrete or Box"


def check_spaces(env: Environment, name: str) -> None:
    """``TypeError`` naming a space PPO cannot handle, and why, before anything is traced."""
    params = env.default_params
    observation, action = env.observation_space(params), env.action_space(params)
    observed = observation.spaces.values() if isinstance(observation, spaces.Dict) else [observation]
    if not all(isinstance(space, spaces.Box) for space in observed):
        raise TypeError(
            f"task {name!r}: observation space {observation!r} is not supported; expected {SUPPORTED_OBSERVATIONS}, "
            "which the MLP networks take as one vector"
        )
    if not isinstance(action, (spaces.Discrete, spaces.MultiDiscrete, spaces.Box)):
        raise TypeError(
            f"task {name!r}: action space {action!r} is not supported; expected {SUPPORTED_ACTIONS} "
            "(a categorical, factored categorical or tanh-squashed Gaussian policy)"
        )
    if isinstance(action, spaces.Box) and not (np.all(np.isfinite(action.low)) and np.all(np.isfinite(action.high))):
        raise TypeError(
            f"task {name!r}: action space {action!r} has infinite bounds; expected finite low and high "
            "(the tanh-squashed Gaussian policy maps onto [low, high])"
        )
    try:
        action_mask_reader(observation, action)  # an "action_mask" entry: one 0/1 per choice
    except TypeError as error:
        raise TypeError(f"task {name!r}: {error}") from None


def default_config_for(env: Environment) -> AlgorithmConfig:
    return get_algorithm(DEFAULT_ALGORITHM).defaults_for(env.action_space(env.default_params))


def floors_for(env: Environment) -> tuple[Baseline, ...]:
    """Acting at random (among the legal actions, where the observation marks them); for a
    continuous action, doing nothing (the zero action) first."""
    random = Baseline(
        "random", "random", lambda env, params: random_policy(env.action_space(params), env.observation_space(params))
    )
    if not isinstance(env.action_space(env.default_params), spaces.Box):
        return (random,)
    zero = Baseline("zero action", "zero", lambda env, params: zero_policy(env.action_space(params)))
    return (zero, random)


RESERVED_POLICY_NAMES = ("random", "zero", "zero action", "ppo")
"""The floors' names and flags, and ``scripts/evaluate.py --policy ppo`` (a run's checkpoint):
no user baseline may take one."""


def with_user_baselines(
    name: str, floors: tuple[Baseline, ...], baselines: Sequence[Baseline], reference: str | None
) -> tuple[Baseline, ...]:
    """The task's baselines: the reference first (when named), then the floors, then the user's
    other policies (floors too). ``ValueError`` for a name a floor or another baseline holds, or
    a reference that names none of them."""
    seen = set(RESERVED_POLICY_NAMES)
    for baseline in baselines:
        for label in dict.fromkeys((baseline.name, baseline.flag)):
            if label in seen:
                raise ValueError(
                    f"task {name!r}: baseline {label!r} clashes with a floor or another baseline "
                    f"(taken: {sorted(seen)}); expected a name of its own"
                )
            seen.add(label)
    chosen = [baseline for baseline in baselines if baseline.flag == reference]
    if reference is not None and not chosen:
        raise ValueError(
            f"task {name!r}: the reference baseline {reference!r} is none of its baselines "
            f"{[baseline.flag for baseline in baselines]}; expected one of them or None"
        )
    return (*chosen, *floors, *(baseline for baseline in baselines if baseline.flag != reference))


def built_with(env: Environment) -> dict[str, Any]:
    """The keyword arguments ``env`` was built with by its task's ``make_env`` ({} if none)."""
    return dict(BUILT_WITH.get(getattr(env, "unwrapped", env), {}))


def python_source(env: Environment) -> dict[str, Any]:
    """Where an environment defined in Python (not a suite) comes from: its class."""
    return {"suite": "python", "environment": f"{type(env).__module__}.{type(env).__name__}"}


def environment_task(
    name: str,
    make_env: Callable[..., Environment],
    *,
    default_config: AlgorithmConfig | None = None,
    default_protocol: ProtocolSettings | None = None,
    default_configs: dict[str, AlgorithmConfig] | None = None,
    env_kwargs: Callable[[Environment], dict[str, Any]] | None = None,
    source: Callable[[Environment], dict[str, Any]] | None = None,
    env_class: type | None = None,
    baselines: Sequence[Baseline] = (),
    reference: str | None = None,
) -> Task:
    """A ``Task`` named ``name`` for the environments ``make_env(**kwargs)`` builds. The default
    environment is built once here, so a missing attribute or an unsupported space is named now
    (``check_environment``, ``check_spaces``). ``env_kwargs(env)`` is what a manifest records to
    rebuild ``env`` (resume, restore; default: the keywords ``make_env`` was called with);
    ``source(env)`` where it comes from; ``default_protocol`` its checkpoint and evaluation
    cadence (default: ``ProtocolSettings()``); ``default_configs`` its configs for other algorithms
    (by name: ``{"sac": SACConfig(...)}``). ``baselines``: the user's policies, evaluated like
    the floors; the one whose flag is ``reference`` is the task's reference, the others floors."""

    def make_named_env(**kwargs: Any) -> Environment:
        env = make_env(**kwargs)
        BUILT_BY[env], BUILT_WITH[env] = name, dict(kwargs)
        return env

    env = make_named_env()
    check_environment(env)
    check_spaces(env, name)
    return Task(
        default_protocol=ProtocolSettings() if default_protocol is None else default_protocol,
        name=name,
        env_class=type(env) if env_class is None else env_class,
        make_env=make_named_env,
        default_config=default_config_for(env) if default_config is None else default_config,
        default_configs=dict(default_configs or {}),
        baselines=with_user_baselines(name, floors_for(env), baselines, reference),
        heldout_evaluation=heldout_evaluation,
        env_evaluation=heldout_evaluation,
        record_showcase=record_episode,
        env_kwargs=built_with if env_kwargs is None else env_kwargs,
        has_reference=reference is not None,
        source=source or python_source,
    )


def adapter_task(
    suite: str,
    environment: str,
    adapter: type,
    packages: Sequence[str],
    default_config: AlgorithmConfig | None,
    default_protocol: ProtocolSettings | None = None,
) -> Task:
    """The task ``<suite>:<environment>`` of a suite's adapter class, built as
    ``adapter(environment, **kwargs)``: the manifest records the adapter's ``make_kwargs`` (its
    keywords, defaults resolved) and the versions of ``packages``."""

    def make_env(**make_kwargs: Any) -> Environment:
        return adapter(environment, **make_kwargs)

    return environment_task(
        f"{suite}:{environment}",
        make_env,
        default_config=default_config,
        default_protocol=default_protocol,
        env_kwargs=lambda env: dict(getattr(env, "unwrapped", env).make_kwargs),
        source=lambda env: {"suite": suite, "environment": environment, "versions": package_versions(packages)},
        env_class=adapter,
    )


def package_versions(packages: Sequence[str]) -> dict[str, str]:
    return {package: metadata.version(package) for package in packages}
