"""The one task registry: each task's environment, PPO defaults, reference policies, held-out
evaluation and showcase recorder, so the runner, the scripts and the API treat tasks alike.

``get_task(name)`` looks a task up (``TASK_NAMES`` are the names, for argparse choices);
``task_of_env(env)`` finds the task an environment instance belongs to.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from purehr.envs import hrv, swing
from purehr.envs.base import Environment, Policy
from purehr.envs.hrv.curriculum import Curriculum
from purehr.ppo.config import HRV_DEFAULTS, SWING_DEFAULTS, PPOConfig
from purehr.ppo.train import PPO, EnvParamsSchedule

SWING_SHOWCASE_START_DEG = 3.0
SWING_TRAINING_STARTS = {"small_start_fraction": 0.25, "small_reset_noise": 0.05}
"""The swing task's training starts: today's wide N(0, 1) draw, a quarter of them replaced by
starts at the held-out scale, which the fast pumping policies otherwise miss
(results/ablation/swing_speed.md)."""

Evaluation = Callable[..., dict[str, jax.Array]]
"""``evaluation(env, env_params, policy, num_episodes=..., seed=...) -> metrics`` (pure, jittable)."""


@dataclass(frozen=True)
class Baseline:
    """A reference policy, evaluated on the same held-out protocol as PPO."""

    name: str  # as manifests and tables name it
    flag: str  # as ``scripts/evaluate.py --policy`` names it
    make_policy: Callable[[Environment, Any], Policy]  # make_policy(env, env_params)
    definition: str = ""


@dataclass(frozen=True)
class Task:
    name: str
    env_class: type
    make_env: Callable[..., Environment]  # make_env(**env_kwargs)
    default_config: PPOConfig
    baselines: tuple[Baseline, ...]
    """The reference baseline first (structured controller, oracle), then the floors PPO must
    beat by a wide margin (doing nothing, acting at random)."""
    heldout_evaluation: Evaluation
    """The protocol's held-out evaluation (checkpoints, baselines, sweeps)."""
    env_evaluation: Evaluation
    """The environment's own held-out evaluation (``PPOModel.evaluate``, ``scripts/evaluate.py``):
    the same episodes, without the protocol's extra probes."""
    record_showcase: Callable[[Environment, Any, Policy], dict[str, jax.Array]]
    env_kwargs: Callable[[Environment], dict[str, Any]] = lambda env: {}
    """What a run records in its manifest to rebuild the same environment (restore, resume)."""
    legacy_env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """The environment of runs recorded before manifests named it (the first task designs)."""
    unrecorded_env_kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    """Keyword values a recorded environment had before the keyword existed: what a manifest or
    saved model that does not name the keyword was trained with."""

    @property
    def baseline(self) -> Baseline:
        return self.baselines[0]

    @property
    def floors(self) -> tuple[Baseline, ...]:
        return self.baselines[1:]

    def baseline_by_flag(self, flag: str) -> Baseline:
        for baseline in self.baselines:
            if baseline.flag == flag:
                return baseline
        raise ValueError(
            f"{flag!r} is not a {self.name} policy; choose from {', '.join(b.flag for b in self.baselines)}"
        )

    def env_from_manifest(self, manifest: dict) -> Environment:
        recorded = (manifest.get("environments") or {}).get(self.name)
        return self.make_env(**(self.legacy_env_kwargs if recorded is None else self.recorded_kwargs(recorded)))

    def recorded_kwargs(self, recorded: dict[str, Any]) -> dict[str, Any]:
        """``make_env`` keywords of an environment recorded as ``recorded``."""
        return {**self.unrecorded_env_kwargs, **recorded}


def _swing_env(params: swing.SwingParams | None = None, **fields) -> swing.SwingEnv:
    """The swing task's environment: the task's training starts unless ``params`` or
    ``fields`` say otherwise."""
    return swing.SwingEnv(swing.SwingParams(**{**SWING_TRAINING_STARTS, **fields}) if params is None else params)


def _swing_kwargs(env: swing.SwingEnv) -> dict[str, Any]:
    params = env.default_params
    return {name: float(getattr(params, name)) for name in SWING_TRAINING_STARTS}


def _record_swing(env, env_params, policy):
    return swing.record_episode(env, env_params, policy, math.radians(SWING_SHOWCASE_START_DEG), 0.0)


TASKS: dict[str, Task] = {
    "swing": Task(
        name="swing",
        env_class=swing.SwingEnv,
        make_env=_swing_env,
        default_config=SWING_DEFAULTS,
        baselines=(
            Baseline(
                "structured controller",
                "structured",
                lambda env, params: swing.make_structured_policy(params),
                "structured phase-law controller of docs/swing_model.md "
                "(purehr.envs.swing.controller, default ControllerParams)",
            ),
            Baseline("zero action", "zero", lambda env, params: swing.zero_policy),
            Baseline("random", "random", lambda env, params: swing.random_policy),
        ),
        heldout_evaluation=swing.heldout_evaluation,
        env_evaluation=swing.heldout_evaluation,
        record_showcase=_record_swing,
        env_kwargs=_swing_kwargs,
        legacy_env_kwargs={"params": swing.SwingParams(reset_noise=0.01)},
        unrecorded_env_kwargs={"small_start_fraction": 0.0},
    ),
    "hrv": Task(
        name="hrv",
        env_class=hrv.HRWritingEnv,
        make_env=lambda **kwargs: hrv.HRWritingEnv(**{"hrv_dim": 8, **kwargs}),
        default_config=HRV_DEFAULTS,
        baselines=(
            Baseline(
                "oracle",
                "oracle",
                hrv.oracle_policy,
                "greedy oracle of docs/hrv_task.md (purehr.envs.hrv.oracle_action)",
            ),
            Baseline("no-op", "no-op", hrv.no_op_policy),
            Baseline("random", "random", hrv.random_policy),
        ),
        heldout_evaluation=hrv.checkpoint_evaluation,
        env_evaluation=hrv.heldout_evaluation,
        record_showcase=hrv.record_showcase,
        env_kwargs=lambda env: {
            "hrv_dim": env.hrv_dim,
            "similarity": env.similarity,
            "reward_form": env.reward_form,
            "gap_features": env.gap_features,
        },
        legacy_env_kwargs={"hrv_dim": 8, "reward_form": "potential", "gap_features": False},
        unrecorded_env_kwargs={"gap_features": False},
    ),
}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    return TASKS[name]


def task_of_env(env: Environment) -> Task | None:
    """The task whose environment class ``env`` is (wrappers looked through), or None."""
    base = getattr(env, "unwrapped", env)
    return next((task for task in TASKS.values() if isinstance(base, task.env_class)), None)


def task_of_env_class(class_name: str) -> Task | None:
    """The task whose environment class is named ``class_name`` (a saved model's record), or None."""
    return next((task for task in TASKS.values() if task.env_class.__name__ == class_name), None)


def curriculum_schedule(curriculum: Curriculum | None, config: PPOConfig) -> EnvParamsSchedule | None:
    """The ``env_params_schedule`` a curriculum gives a run of ``config`` (None: no schedule)."""
    return None if curriculum is None else curriculum.schedule(config.num_updates)


def heldout_env_params(ppo: PPO, hparams: Any, curriculum: Curriculum | None = None) -> Any:
    """The params PPO is judged on: those of its last update (the env's discount is PPO's, for
    potential shaping), at a curriculum's final stage. ``hparams`` may be traced (a sweep)."""
    params = ppo.env_params_at(ppo.num_updates - 1, hparams)
    return params if curriculum is None else curriculum.final_params(params)
