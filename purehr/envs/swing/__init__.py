"""The swing task: a standing rider pumping a rigid-rod swing over the top bar."""

from purehr.envs.swing.controller import (
    ControllerParams,
    StructuredController,
    make_structured_policy,
    structured_action,
)
from purehr.envs.swing.env import SwingEnv, SwingState
from purehr.envs.swing.evaluation import HELDOUT_SEED, heldout_evaluation, heldout_starts, random_policy, zero_policy
from purehr.envs.swing.physics import SwingParams, natural_frequency, validate
from purehr.envs.swing.recording import TRACE_KEYS, record_episode
from purehr.envs.swing.swingrl_adapter import SwingRLEnv

__all__ = [
    "SwingParams",
    "SwingEnv",
    "SwingState",
    "natural_frequency",
    "validate",
    "ControllerParams",
    "StructuredController",
    "make_structured_policy",
    "structured_action",
    "HELDOUT_SEED",
    "heldout_evaluation",
    "heldout_starts",
    "random_policy",
    "zero_policy",
    "TRACE_KEYS",
    "record_episode",
    "SwingRLEnv",
]
