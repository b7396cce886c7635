"""The environment of a test's subprocess that needs several forced host devices."""

from __future__ import annotations

import os


def forced_devices(count: int) -> str:
    """XLA_FLAGS for a subprocess with ``count`` host CPU devices that keeps the suite's own
    flags (conftest's XLA optimisation level 1: replaced rather than extended, the subprocess
    compiled at XLA's default level, which conftest measured about 1.8x slower to compile)."""
    return f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
