"""The end every benchmark shares: its JSON record, with the machine's load average around
the measurement (a busy machine explains a slow number), written where ``--json`` says."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def load_averages(before: tuple[float, float, float]) -> dict[str, list[float]]:
    """The 1-, 5- and 15-minute load averages ``before`` the measurement (``os.getloadavg()``
    taken then) and now."""
    return {
        "load_average_before": [round(x, 2) for x in before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def write_json(path: Path | None, record: Any, indent: int = 1) -> None:
    """``record`` as JSON at ``path`` (its folder made); nothing when ``path`` is None (no --json)."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=indent))
