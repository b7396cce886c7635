"""Experiment tracking: TensorBoard and Weights & Biases beside the CSV logs, every step
exactly once across kills and resumes (docs/protocol.md, "Watching a run")."""

from purehr.tracking.session import Tracking, make_backends, start_tracking
from purehr.tracking.settings import BACKENDS, TrackingSettings

__all__ = ["BACKENDS", "Tracking", "TrackingSettings", "make_backends", "start_tracking"]
