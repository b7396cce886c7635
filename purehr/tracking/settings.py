"""What a run logs to besides its CSV files, checked before anything is compiled: the backends
(``--log tensorboard wandb``), where their files go and, for W&B, the mode, project, entity and
one run id per task x seed, kept in the manifest so that a resume continues the same W&B runs."""

from __future__ import annotations

import importlib.util
import os
import secrets
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from purehr.tracking.claims import Owner, claim_problem, take_claim

BACKENDS = {
    "tensorboard": ("tensorboardX", "tensorboard"),
    "wandb": ("wandb",),
}
"""backend -> the packages it needs (tensorboardX writes the event files, TensorBoard's own
reader finds where a resumed run continues them and ``tensorboard --logdir`` serves them)."""
EXTRA = "tracking"
WANDB_MODES = ("offline", "online", "disabled")
DEFAULT_WANDB_PROJECT = "purehr"
TENSORBOARD_DIR = "tensorboard"  # under the run directory unless log_dir says otherwise
RUN_FOLDERS = {"tensorboard": TENSORBOARD_DIR, "wandb": "wandb"}
"""backend -> the folder its files take in the run directory (``wandb``: W&B's own name under
its ``dir``): the run's, removed with it by ``--overwrite``."""


@dataclass(frozen=True)
class TrackingSettings:
    """The backends a run logs to and how; ``run_ids`` (task -> seed -> W&B run id) are filled
    in when the run is planned and read back from the manifest on a resume."""

    backends: tuple[str, ...] = ()
    log_dir: str | None = None
    """TensorBoard's directory (default: ``<run directory>/tensorboard``; one run per task x seed in it)."""
    wandb_mode: str | None = None
    """offline (the default: nothing leaves the machine; ``wandb sync`` uploads later), online, disabled;
    None: the user's ``WANDB_MODE``, else offline."""
    wandb_project: str = DEFAULT_WANDB_PROJECT
    wandb_entity: str | None = None
    run_ids: dict[str, dict[str, str]] = field(default_factory=dict)
    owner: str | None = None
    """The run's token in the claims of the TensorBoard folders it logs to outside its run
    directory (``purehr.tracking.claims``); made when the run is planned, kept on a resume."""

    @classmethod
    def checked(cls, log: TrackingSettings | Iterable[str] | str | None) -> TrackingSettings:
        """``log`` as backend names (or settings), every backend known and its packages installed."""
        if log is None:
            return cls()
        settings = log if isinstance(log, TrackingSettings) else cls(backends=_names(log))
        return settings.validated()

    def validated(self) -> TrackingSettings:
        backends = tuple(dict.fromkeys(self.backends))  # in the order given, once each
        for name in backends:
            if name not in BACKENDS:
                raise ValueError(f"--log {name!r}: unknown backend; expected one or more of {', '.join(BACKENDS)}")
            missing = [package for package in BACKENDS[name] if importlib.util.find_spec(package) is None]
            if missing:
                raise ValueError(
                    f"--log {name} needs {' and '.join(missing)}, which is not installed: "
                    f"pip install -c constraints.txt -e '.[{EXTRA}]'"
                )
        if self.wandb_mode is not None and self.wandb_mode not in WANDB_MODES:
            raise ValueError(f"--wandb-mode {self.wandb_mode!r}: expected one of {', '.join(WANDB_MODES)}")
        if not isinstance(self.wandb_project, str) or not self.wandb_project:
            raise ValueError(f"--wandb-project {self.wandb_project!r}: expected a non-empty name")
        return replace(self, backends=backends)

    @property
    def enabled(self) -> bool:
        return bool(self.backends)

    def resolved_wandb_mode(self) -> str:
        """The mode W&B runs in: the one given, else the user's ``WANDB_MODE``, else offline
        (no network unless asked for)."""
        if self.wandb_mode is not None:
            return self.wandb_mode
        mode = os.environ.get("WANDB_MODE", "offline")
        return "disabled" if mode == "dryrun" else mode if mode in WANDB_MODES else "offline"

    def tensorboard_dir(self, run_dir: Path) -> Path:
        return Path(self.log_dir) if self.log_dir is not None else Path(run_dir) / TENSORBOARD_DIR

    def check_writable(self, run_dir: Path) -> None:
        """The TensorBoard directory can be created and written (the run directory itself is
        checked by the run): refused before anything is compiled."""
        if "tensorboard" in self.backends:
            check_writable_directory(self.tensorboard_dir(run_dir), "--log-dir")

    def absolute(self) -> TrackingSettings:
        """``log_dir`` as an absolute path (a relative one is the caller's working directory's:
        recorded so, a resume from elsewhere finds the same folder)."""
        return self if self.log_dir is None else replace(self, log_dir=os.path.abspath(self.log_dir))

    def check_log_dir_used(self) -> None:
        """``--log-dir`` is TensorBoard's: given without ``--log tensorboard`` it would be ignored."""
        if self.log_dir is not None and "tensorboard" not in self.backends:
            raise ValueError(
                f"--log-dir {self.log_dir} is TensorBoard's directory, but --log does not name tensorboard "
                "(it would be ignored); add --log tensorboard, or leave --log-dir out"
            )

    def with_owner(self) -> TrackingSettings:
        """A claims token for a run that has none yet (kept on a resume)."""
        return self if self.owner is not None else replace(self, owner=new_run_id() + new_run_id())

    def check_log_dir_owner(self, owner: Owner, runs: Sequence[str], resumed: bool, logged_here: bool) -> None:
        """Each TensorBoard run folder (``runs``: labels such as ``hrv/seed_0``) in ``log_dir`` is
        free or ``owner``'s, read only (``take_log_dir`` claims them). ``logged_here``: a
        resume's recorded folder, which a run from before claims holds unclaimed."""
        problems = {run: claim_problem(Path(self.log_dir) / run, owner, logged_here) for run in runs}
        self._refuse(problems, resumed)

    def take_log_dir(self, owner: Owner, runs: Sequence[str], resumed: bool, logged_here: bool) -> None:
        """Claims each TensorBoard run folder for ``owner``: the check and the claim one step."""
        problems = {run: take_claim(Path(self.log_dir) / run, owner, logged_here) for run in runs}
        self._refuse(problems, resumed)

    def _refuse(self, problems: dict[str, str | None], resumed: bool) -> None:
        held = [run for run, problem in problems.items() if problem == "already holds TensorBoard runs"]
        if held:
            whose = " that this run did not write" if resumed else ""
            raise ValueError(
                f"--log-dir {self.log_dir} already holds TensorBoard runs under {', '.join(held)}{whose}; "
                "choose another --log-dir (or remove those folders)"
            )
        for run, problem in problems.items():
            if problem is not None:
                raise ValueError(f"--log-dir {self.log_dir}: {run} {problem}; choose another --log-dir")

    def check_new_log_dir(self, runs: Sequence[str]) -> None:
        """A new run's own ``--log-dir`` holds no TensorBoard run under ``runs`` (run labels
        such as ``hrv/seed_0``, or a task for a sweep) yet: their steps would count as logged
        already. The default directory is the run's own, new with it."""
        if "tensorboard" not in self.backends or self.log_dir is None:
            return
        taken = [run for run in runs if any((Path(self.log_dir) / run).rglob("events.out.tfevents.*"))]
        if taken:
            raise ValueError(
                f"--log-dir {self.log_dir} already holds TensorBoard runs under {', '.join(taken)}; "
                "choose another --log-dir (or remove those folders)"
            )

    def with_run_ids(self, tasks: Sequence[str], seeds: Sequence[int]) -> TrackingSettings:
        """A W&B run id for every task x seed that has none yet (kept ones unchanged)."""
        if "wandb" not in self.backends:
            return self
        ids = {task: dict(self.run_ids.get(task, {})) for task in tasks}
        for task in tasks:
            for seed in seeds:
                ids[task].setdefault(str(seed), new_run_id())
        return replace(self, run_ids=ids)

    def run_id(self, task: str, seed: int) -> str | None:
        """The W&B run id of a task x seed (None without W&B)."""
        return self.run_ids.get(task, {}).get(str(seed))

    def merged_with(self, given: TrackingSettings) -> TrackingSettings:
        """A resume: the recorded backends and run ids, with the backends ``given`` now added
        (a backend new to the run is filled from the rows the run kept) and its W&B options."""
        backends = tuple(dict.fromkeys(self.backends + given.backends))
        return replace(
            self,
            backends=backends,
            log_dir=given.log_dir if given.log_dir is not None else self.log_dir,
            wandb_mode=given.wandb_mode if given.wandb_mode is not None else self.wandb_mode,
            wandb_entity=given.wandb_entity if given.wandb_entity is not None else self.wandb_entity,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "backends": list(self.backends),
            "log_dir": self.log_dir,
            "wandb_mode": self.wandb_mode,
            "wandb_project": self.wandb_project,
            "wandb_entity": self.wandb_entity,
            "run_ids": self.run_ids,
            "owner": self.owner,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> TrackingSettings:
        data = data or {}
        return cls(
            tuple(data.get("backends") or ()),
            data.get("log_dir"),
            data.get("wandb_mode"),
            data.get("wandb_project") or DEFAULT_WANDB_PROJECT,
            data.get("wandb_entity"),
            {task: dict(ids) for task, ids in (data.get("run_ids") or {}).items()},
            data.get("owner"),
        )


def _names(log: Iterable[str] | str) -> tuple[str, ...]:
    if isinstance(log, str):
        return (log,)
    names = tuple(log)
    if not all(isinstance(name, str) for name in names):
        raise TypeError(f"log={log!r}: expected backend names ({', '.join(BACKENDS)})")
    return names


def new_run_id() -> str:
    """Eight lowercase letters and digits (what W&B's own ids look like); random, so two runs
    with the same name never share a W&B run."""
    alphabet = string.ascii_lowercase + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def check_writable_directory(path: Path, option: str) -> None:
    """``path`` is a directory this process can write, or can be created as one."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise ValueError(f"{option} {path}: {existing} is a file, not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{option} {path}: {existing} is not writable by this process")
