"""Preparing the run directory: what must not be touched is refused (a directory another
process trains in, one holding something that is not a purehr run, a run the caller did not
say to resume or replace), and ``--overwrite`` removes only what a purehr run writes. The
messages name the option the user gave (``--run-name`` or ``--run-dir``) and the ways on."""

from __future__ import annotations

import sys

from purehr.run.planning.resume import extension_hint
from purehr.run.store.files import RunDirectoryError
from purehr.run.store.lock import RunDirectoryBusy
from purehr.run.store.run_dir import MANIFEST_TEMPORARIES, RESUME, RunDirectory, remove_run_files


class RunDirectoryInUse(FileExistsError):
    pass


class RunAlreadyFinished(RunDirectoryInUse):
    """``resume`` on a run that has nothing left to train (killed after training, say)."""


def prepare_run_directory(
    run_dir: RunDirectory, resume: bool, overwrite: bool, directory_option: str = "--run-dir"
) -> bool:
    """Refuses what must not be touched; returns whether there is a run to continue.
    ``directory_option`` is how the user named the directory (``--run-name`` or ``--run-dir``),
    so the messages name the option they gave."""
    if resume and overwrite:
        raise ValueError("--resume and --overwrite contradict each other; give one")
    holder = run_dir.holder()
    if holder is not None:
        raise RunDirectoryBusy(
            f"{run_dir.root} is in use by another running process (pid {holder}); wait for "
            "it to end or stop it before --resume or --overwrite"
        )
    if resume:
        return _run_to_resume(run_dir, directory_option)
    if run_dir.manifest_path.exists():
        _replace_run(run_dir, overwrite, directory_option)
    elif run_dir.root.exists() and any(run_dir.root.iterdir()) and not _stopped_before_manifest(run_dir):
        # only purehr's own lock (a run that failed before its manifest) counts as empty
        raise RunDirectoryInUse(
            f"{run_dir.root} is not empty and holds no purehr run; choose another {directory_option}"
        )
    return False


def _run_to_resume(run_dir: RunDirectory, directory_option: str) -> bool:
    """True when the directory holds a run to continue, False when it holds one that was
    stopped before training began (it starts from scratch); anything else is refused."""
    if run_dir.manifest_path.exists():
        run_dir.read_manifest()  # a manifest.json some other program wrote is refused by name
        return True
    if _stopped_before_manifest(run_dir):
        print(
            f"--resume: {run_dir.root} has no manifest.json yet: the process that started the run was "
            "stopped before training began; starting it from scratch",
            file=sys.stderr,
        )
        return False
    raise FileNotFoundError(
        f"--resume: {run_dir.root} holds no run to resume (no manifest.json); "
        f"check {directory_option}, or start a new run without --resume"
    )


def _replace_run(run_dir: RunDirectory, overwrite: bool, directory_option: str) -> None:
    """A new run where a run is: refused, or with ``overwrite`` the old run's files removed
    (and anything else in the directory kept, said by name)."""
    try:
        manifest = run_dir.read_manifest()
    except RunDirectoryError as error:
        action = "remove anything in it" if overwrite else "train into it"
        raise RunDirectoryError(f"{error}; refusing to {action}: choose another {directory_option}") from None
    if not overwrite:
        raise RunDirectoryInUse(occupied_message(run_dir, manifest, directory_option))
    kept = remove_run_files(run_dir.root, manifest)
    message = f"--overwrite: removed the {manifest['status']} run in {run_dir.root}"
    if kept:
        message += (
            f"; kept {len(kept)} entries a run does not write: "
            + ", ".join(str(p.relative_to(run_dir.root)) for p in kept[:5])
            + (", ..." if len(kept) > 5 else "")
        )
    print(message, file=sys.stderr)


def occupied_message(run_dir: RunDirectory, manifest: dict, directory_option: str = "--run-dir") -> str:
    """Why a new run is refused in a directory holding one, and the three ways on."""
    described = f"tasks {' '.join(manifest['tasks'])}, seeds {' '.join(map(str, manifest['seeds']))}, " + ", ".join(
        f"{task} {_count(manifest['configs'][task].get('total_timesteps'))} steps" for task in manifest["tasks"]
    )
    if manifest["status"] == "finished":
        what = f"a finished run ({described})"
        on = "--resume renders the figures it is missing" + extension_hint(manifest, " (and {})")
    else:
        what = {
            "running": "a run that was stopped before it finished",
            "failed": "a failed run",
            "interrupted": "a run stopped by Ctrl-C (interrupted)",
        }.get(manifest["status"], f"a {manifest['status']} run") + f" ({described})"
        on = "--resume continues it from its last checkpoint"
    return f"{run_dir.root} already holds {what}; {on}, --overwrite replaces it, or choose another {directory_option}"


def _stopped_before_manifest(run_dir: RunDirectory) -> bool:
    """Only the lock (and perhaps a half-written manifest, the resume file) is there: a purehr
    process took the directory and failed or was stopped while evaluating baselines or before,
    so nothing was trained."""
    if not run_dir.lock_path.exists():
        return False
    own = (run_dir.lock_path.name, RESUME, *MANIFEST_TEMPORARIES)
    return all(entry.name in own for entry in run_dir.root.iterdir())


def _count(value) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)
