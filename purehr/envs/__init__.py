"""Functional environments: reset(key, params) / step(key, state, action, params)."""

from purehr.envs import spaces
from purehr.envs.base import Environment

__all__ = ["Environment", "spaces"]
