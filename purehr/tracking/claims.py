"""Who owns a TensorBoard run folder outside a run's own directory (``--log-dir``): the run
that claimed it, by an exclusive link of a whole ``purehr_claim.json`` naming the run. The check and
the claim are that one step, so of two runs started together with the same ``--log-dir``
exactly one gets each folder; a resume finds its own claim, any other run is refused
(docs/protocol.md, "Who owns a dashboard"). A folder's steps count as already logged for a
resume, so a folder holding another run's events would silently swallow this run's."""

from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path

CLAIM_FILE = "purehr_claim.json"  # TensorBoard reads only events.out.tfevents.* files


@dataclass(frozen=True)
class Owner:
    """A run as a claim names it: its token (the manifest's ``tracking.owner``, kept on a
    resume) and its run directory (None for the seed API, which has none)."""

    token: str
    run_dir: str | None = None


def holds_events(folder: Path) -> bool:
    return folder.is_dir() and any(folder.rglob("events.out.tfevents.*"))


def read_claim(folder: Path) -> dict | None:
    """The claim in ``folder`` ({} when one is there but unreadable: being written), else None."""
    try:
        claim = json.loads((folder / CLAIM_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}
    return claim if isinstance(claim, dict) else {}


def claim_problem(folder: Path, owner: Owner, may_hold_events: bool = False) -> str | None:
    """Why ``owner`` may not log into ``folder`` (None: it may), without claiming it.
    ``may_hold_events``: the run logged there before claims existed (its recorded log dir)."""
    claim = read_claim(folder)
    if claim is not None and claim.get("owner") == owner.token:
        return None
    if not may_hold_events and holds_events(folder):
        return "already holds TensorBoard runs"
    if claim is None or _abandoned_attempt(claim, owner, folder):
        return None
    if not claim.get("owner"):
        return _being_claimed(folder / CLAIM_FILE)
    who = f"run directory {claim['run_dir']}" if claim.get("run_dir") else "a train_hr_ppo call"
    since = f", since {claim['claimed_at']}" if claim.get("claimed_at") else ""
    return f"is claimed by another run ({who}{since}; {folder / CLAIM_FILE})"


def take_claim(folder: Path, owner: Owner, may_hold_events: bool = False) -> str | None:
    """Claims ``folder`` for ``owner`` (created if missing): None when it is the owner's now,
    else why not (``claim_problem``). The claim is written whole to a temporary file, then
    hard-linked to its name, which fails when a claim is there: runs that check at the same
    moment cannot both get it, and a failed write (a full disk) leaves no claim at all."""
    problem = claim_problem(folder, owner, may_hold_events)
    if problem is not None:
        return problem
    folder.mkdir(parents=True, exist_ok=True)
    claim_file, temporary = folder / CLAIM_FILE, folder / f".{CLAIM_FILE}.{owner.token}.{os.getpid()}.tmp"
    try:
        _write_claim_text(temporary, json.dumps(_claim_record(owner), indent=1) + "\n")
        try:
            _link_exclusively(temporary, claim_file)
            return None
        except FileExistsError:
            claim = read_claim(folder)
            if claim is not None and claim.get("owner") == owner.token:
                return None
            if claim is None or not _abandoned_attempt(claim, owner, folder):
                return claim_problem(folder, owner, may_hold_events) or _being_claimed(claim_file)
            os.replace(temporary, claim_file)  # the run directory's lock is held
            return None
    finally:
        temporary.unlink(missing_ok=True)


def _write_claim_text(path: Path, text: str) -> None:
    path.write_text(text)


def _link_exclusively(source: Path, target: Path) -> None:
    """``target`` becomes ``source``'s text in one step, or FileExistsError when it is there.
    Where hard links are not supported, an exclusive create then a write, undone if it fails."""
    try:
        os.link(source, target)
        return
    except FileExistsError:
        raise
    except OSError:
        pass
    handle = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(handle, "w") as file:
            file.write(source.read_text())
    except BaseException:
        target.unlink(missing_ok=True)
        raise


def _being_claimed(claim_file: Path) -> str:
    return (
        f"is being claimed by another run ({claim_file} is empty or unreadable); if no other run is "
        f"starting with this --log-dir now, it is a claim whose write failed: delete {claim_file}"
    )


def _abandoned_attempt(claim: dict, owner: Owner, folder: Path) -> bool:
    """A claim of this same run directory that never logged: an attempt stopped before its
    manifest, or a run since replaced by --overwrite. Claims are taken holding the run
    directory's lock, so no live process of that directory holds it."""
    return owner.run_dir is not None and claim.get("run_dir") == owner.run_dir and not holds_events(folder)


def _claim_record(owner: Owner) -> dict:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"owner": owner.token, "run_dir": owner.run_dir, "claimed_at": now, "pid": os.getpid()}
