"""The HRV task: steer a piece of writing's human-resonance vector toward a target profile
(``docs/hrv_task.md``): the environment, its reference policies, its held-out evaluation
and the difficulty curriculum that trains it."""

from purehr.envs.curriculum import Curriculum
from purehr.envs.hrv.baselines import no_op_policy, oracle_action, oracle_policy, random_policy
from purehr.envs.hrv.env import (
    CONTENT_CONDENSE,
    CONTENT_EXPAND,
    CONTENT_KEEP,
    CONTEXT_DIM,
    MOD_DECREASE,
    MOD_INCREASE,
    MOD_KEEP,
    NUM_CONTENT_STATS,
    NUM_STYLES,
    REWARD_FORMS,
    SIMILARITIES,
    STYLE_NONE,
    HRVParams,
    HRVState,
    HRWritingEnv,
    context_gain,
)
from purehr.envs.hrv.evaluation import (
    HRV_EVAL_SEED,
    HRV_OBSERVATION_NOISE_STD,
    HRV_SHOWCASE_SEED,
    checkpoint_evaluation,
    heldout_evaluation,
    record_showcase,
)

__all__ = [
    "CONTENT_CONDENSE",
    "CONTENT_EXPAND",
    "CONTENT_KEEP",
    "CONTEXT_DIM",
    "MOD_DECREASE",
    "MOD_INCREASE",
    "MOD_KEEP",
    "NUM_CONTENT_STATS",
    "NUM_STYLES",
    "REWARD_FORMS",
    "SIMILARITIES",
    "STYLE_NONE",
    "HRVParams",
    "HRVState",
    "HRWritingEnv",
    "context_gain",
    "no_op_policy",
    "oracle_action",
    "oracle_policy",
    "random_policy",
    "HRV_EVAL_SEED",
    "HRV_OBSERVATION_NOISE_STD",
    "HRV_SHOWCASE_SEED",
    "checkpoint_evaluation",
    "heldout_evaluation",
    "record_showcase",
    "Curriculum",
]
