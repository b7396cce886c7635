"""The hrv task: the writing environment (8 HRV dimensions), PPO defaults, the greedy oracle
and the floors; and its partially observed variant ``hrv-hidden-audience`` (no audience
context, no gain)."""

from __future__ import annotations

import dataclasses
from typing import Any

from purehr.envs import hrv
from purehr.ppo.config import PPOConfig
from purehr.tasks.task import Baseline, Task, one_observation

# Chosen by measurement (results/sweep; docs/protocol.md): a wide batch learns hrv and runs
# several times faster per step than the first defaults (8 envs x 256 steps, minibatch 64).
HRV_DEFAULTS = PPOConfig(
    total_timesteps=300_000,
    num_envs=64,
    num_steps=32,
    minibatch_size=512,
    learning_rate=1e-3,
    gamma=0.99,
    ent_coef=0.01,
    actor_hidden=(256, 128, 64),
    critic_hidden=(256, 128),
    activation="relu",
)

HRV_FLOORS = (
    Baseline("no-op", "no-op", hrv.no_op_policy),
    Baseline("random", "random", hrv.random_policy),
)


def _hrv_env(**kwargs: Any) -> hrv.HRWritingEnv:
    return hrv.HRWritingEnv(**{"hrv_dim": 8, **kwargs})


def _hrv_kwargs(env: hrv.HRWritingEnv) -> dict[str, Any]:
    return {
        "hrv_dim": env.hrv_dim,
        "similarity": env.similarity,
        "reward_form": env.reward_form,
        "gap_features": env.gap_features,
    }


def _observes_audience(env) -> bool:
    return bool(getattr(env, "observe_audience", True))


HRV_TASK = Task(
    name="hrv",
    env_class=hrv.HRWritingEnv,
    make_env=one_observation(_hrv_env, "observe_audience", True, "hrv-hidden-audience"),
    default_config=HRV_DEFAULTS,
    baselines=(
        Baseline(
            "oracle",
            "oracle",
            hrv.oracle_policy,
            "greedy oracle of docs/hrv_task.md (purehr.envs.hrv.oracle_action)",
        ),
        *HRV_FLOORS,
    ),
    heldout_evaluation=hrv.checkpoint_evaluation,
    env_evaluation=hrv.heldout_evaluation,
    record_showcase=hrv.record_showcase,
    env_kwargs=_hrv_kwargs,
    legacy_env_kwargs={"hrv_dim": 8, "reward_form": "potential", "gap_features": False},
    unrecorded_env_kwargs={"gap_features": False},
    owns=_observes_audience,
)

# The audience is hidden (docs/hrv_task.md, "hrv-hidden-audience"): the same episodes, rewards,
# gap feature and held-out evaluation. The oracle reads the context's gain, which this
# observation lacks, so the variant has floors only; the oracle's numbers on the full task are
# the reference with full observation.
HRV_HIDDEN_AUDIENCE_TASK = dataclasses.replace(
    HRV_TASK,
    name="hrv-hidden-audience",
    make_env=one_observation(_hrv_env, "observe_audience", False, "hrv"),
    baselines=HRV_FLOORS,
    env_kwargs=lambda env: {**_hrv_kwargs(env), "observe_audience": env.observe_audience},
    legacy_env_kwargs={},  # every hrv-hidden-audience manifest records its arguments
    unrecorded_env_kwargs={},
    has_reference=False,
    owns=lambda env: not _observes_audience(env),
)
