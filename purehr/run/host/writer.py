"""``BackgroundWriter``: a checkpoint's files written in one worker thread, in order, while the
compiled program goes on training.

Why: a checkpoint's host work (an Orbax save per seed, the state digests, the showcase files
and the CSVs rewritten atomically) took 0.6 s per checkpoint event on the 2-core CPU, and the
compiled program waits for its io_callbacks: 34 s of the default run's 389 s (swing 2.5M). The
callback now copies what it was handed and returns; this thread writes the same files in the
same order, so what is on disk at any moment is what the synchronous writer had left there a
little earlier: a kill leaves a prefix of the run, and a resume continues from it as before.

A failed job is kept (``failed``): no later job runs, and the recorder raises it from its next
callback, which stops the program, as an error raised in the callback itself would.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

THREAD_NAME = "purehr-checkpoint-writer"
PENDING_JOBS = 2  # a slow disk holds the program up after two checkpoints instead of filling memory


class BackgroundWriter:
    def __init__(self):
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue(maxsize=PENDING_JOBS)
        self.failed: BaseException | None = None
        self.abandoned = False  # a second Ctrl-C: the jobs still queued are dropped
        self.seconds_writing = 0.0
        self._thread: threading.Thread | None = None  # started by the first job

    def submit(self, job: Callable[[], None]) -> None:
        """Queues ``job``; blocks while ``PENDING_JOBS`` wait already."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name=THREAD_NAME, daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def drain(self) -> None:
        """Returns once every queued job has run (or been dropped after a failure)."""
        self._jobs.join()

    def close(self) -> None:
        """Drains, then ends the thread (a new job starts another)."""
        if self._thread is None:
            return
        self.drain()
        self._jobs.put(None)
        self._thread.join()
        self._thread = None

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                if self.failed is None and not self.abandoned:
                    started = time.perf_counter()
                    job()
                    self.seconds_writing += time.perf_counter() - started
            except BaseException as error:  # kept for the recorder's next callback
                self.failed = error
            finally:
                self._jobs.task_done()
