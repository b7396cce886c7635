"""What every tracking backend does, and the one rule that keeps a dashboard exact across kills:
a backend logs a value only at a step after the last one it already holds.

A resumed run trains again, bit for bit, the updates after its last checkpoint; the values a
killed process logged for them before it died are therefore the ones the resume computes
again. So a backend first reads back, with its own reader, the last step it holds of every
task x seed (and tag); the run then hands it the rows it kept that come after (the backend
may lag: writes still buffered when the process died never reached its files) and, as it
trains, only the steps beyond. Every step ends up in the backend exactly once, in order."""

from __future__ import annotations

from typing import Any

ALL_TAGS = ""  # a backend that holds whole steps (W&B's history rows): one last step for every tag


class Backend:
    """A dashboard's writer: one run per task x seed (``open``), scalars at env steps (``log``),
    text and images at the end. Subclasses say what they already hold (``held_steps``)."""

    name = "backend"
    synced = True
    """Whether a checkpoint waits until this backend has written every row handed over (the
    files current at every checkpoint); W&B is not waited for. Correctness across kills does
    not rest on it: a resume reads back what each backend holds."""

    def __init__(self) -> None:
        self.held: dict[tuple[str, int], dict[str, int]] = {}

    def open(self, task: str, seed: int, run: dict[str, Any]) -> None:
        """Starts (or continues) the task x seed's run; ``run`` holds its config, identity, W&B
        id and resume step (``publishing``: reopened only for the end-of-run table and figures)."""
        publishing = run.get("publishing", False)
        self.held[(task, seed)] = {} if publishing else self.held_steps(task, seed)
        start = "" if publishing else "resumed" if self.held[(task, seed)] else "new"
        self._open(task, seed, run, start)

    def held_steps(self, task: str, seed: int) -> dict[str, int]:
        """tag -> the last step this backend already holds (``ALL_TAGS`` for every tag); {} when new."""
        return {}

    def fresh(self, task: str, seed: int, step: int, scalars: dict[str, float]) -> dict[str, float]:
        """The scalars of ``step`` this backend does not hold yet."""
        held = self.held.get((task, seed), {})
        every = held.get(ALL_TAGS, -1)
        return {tag: value for tag, value in scalars.items() if step > max(every, held.get(tag, -1))}

    def log(self, task: str, seed: int, step: int, scalars: dict[str, float]) -> None:
        """Logs what is fresh, and holds it from then on: a tag never goes back to a step."""
        scalars = self.fresh(task, seed, step, scalars)
        if scalars:
            self._log(task, seed, step, scalars)
            held = self.held.setdefault((task, seed), {})
            held.update(dict.fromkeys(scalars, step))

    def _open(self, task: str, seed: int, run: dict[str, Any], start: str) -> None:
        """``start``: "new" (nothing held yet), "resumed", or "" (publishing)."""
        raise NotImplementedError

    def _log(self, task: str, seed: int, step: int, scalars: dict[str, float]) -> None:
        raise NotImplementedError

    def publish(self, task: str, seed: int, step: int, table: str, images: dict[str, Any]) -> None:
        """The end of a run: the results table (Markdown) and figures (name -> PNG path)."""

    def flush(self) -> None:
        """What was logged so far goes to the backend's files (called at every checkpoint, before
        its index is written; what a kill still cuts off, a resume reads back and fills in)."""

    def close(self) -> None:
        """Flushes and ends every run."""
