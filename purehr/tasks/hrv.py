"""The hrv task: the writing environment (8 HRV dimensions), PPO defaults, the greedy oracle
and the floors."""

from __future__ import annotations

from purehr.envs import hrv
from purehr.ppo.config import PPOConfig
from purehr.tasks.task import Baseline, Task

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

HRV_TASK = Task(
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
)
