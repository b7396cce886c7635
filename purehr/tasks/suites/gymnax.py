"""gymnax environments as tasks: ``gymnax:<name>`` (``gymnax.registered_envs``), through the
adapter of ``purehr.envs.gymnax_adapter``."""

from __future__ import annotations

from importlib import metadata

from purehr.envs.gymnax_adapter import GymnaxEnv
from purehr.tasks.environment_task import DISCRETE_DEFAULTS, environment_task
from purehr.tasks.task import Task

PACKAGE = "gymnax"
EXTRA = "gymnax"

DEFAULT_CONFIGS = {"CartPole-v1": DISCRETE_DEFAULTS}
"""Per environment, where one is published: CartPole-v1 takes PureJaxRL's ``ppo.py`` settings
(its example, which reaches a return of 500). The others: the default for their action space."""


def environment_names() -> list[str]:
    import gymnax

    return sorted(gymnax.registered_envs)


def suite_task(environment: str) -> Task:
    def make_env(**make_kwargs) -> GymnaxEnv:
        return GymnaxEnv(environment, **make_kwargs)

    return environment_task(
        f"gymnax:{environment}",
        make_env,
        default_config=DEFAULT_CONFIGS.get(environment),
        env_kwargs=lambda env: dict(getattr(env, "unwrapped", env).make_kwargs),
        source=lambda env: {"suite": "gymnax", "environment": environment, "versions": versions()},
        env_class=GymnaxEnv,
    )


def versions() -> dict[str, str]:
    return {package: metadata.version(package) for package in ("gymnax",)}
