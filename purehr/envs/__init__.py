"""Functional environments: reset(key, params) / step(key, state, action, params)."""

from purehr.envs import spaces
from purehr.envs.base import Environment
from purehr.envs.gymnasium_adapter import to_gymnasium
from purehr.envs.hrv import HRVParams, HRWritingEnv
from purehr.envs.swing import SwingEnv, SwingParams
from purehr.envs.wrappers import AutoResetWrapper, EpisodeStatisticsWrapper, training_wrappers

__all__ = [
    "Environment",
    "spaces",
    "HRWritingEnv",
    "HRVParams",
    "SwingEnv",
    "SwingParams",
    "AutoResetWrapper",
    "EpisodeStatisticsWrapper",
    "training_wrappers",
    "to_gymnasium",
]
