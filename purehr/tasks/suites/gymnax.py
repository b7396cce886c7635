"""gymnax environments as tasks: ``gymnax:<name>`` (``gymnax.registered_envs``), through the
adapter of ``purehr.envs.gymnax_adapter``."""

from __future__ import annotations

from purehr.envs.gymnax_adapter import GymnaxEnv
from purehr.tasks.environment_task import adapter_task, package_versions
from purehr.tasks.task import Task

PACKAGE = "gymnax"
PACKAGES = ("gymnax",)
"""What the manifest's ``sources`` records the versions of."""
EXTRA = "gymnax"

DEFAULT_CONFIGS: dict = {}
"""Per environment, where one is published beyond PPO's default for its action space. None is:
CartPole-v1's, PureJaxRL's ``ppo.py`` settings (its example, which reaches a return of 500), are
the discrete default itself (``DISCRETE_DEFAULTS``)."""


def environment_names() -> list[str]:
    import gymnax

    return sorted(gymnax.registered_envs)


def suite_task(environment: str) -> Task:
    return adapter_task("gymnax", environment, GymnaxEnv, PACKAGES, DEFAULT_CONFIGS.get(environment))


def versions() -> dict[str, str]:
    return package_versions(PACKAGES)
