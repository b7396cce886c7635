"""The multi-task runner: one compiled call, checkpoints, resume, restore."""

from purehr.run.restore import Restored, restore

__all__ = ["Restored", "restore"]
