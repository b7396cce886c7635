"""``--profile {auto,cpu,accelerator}`` (scripts/train_all_seeds.py, scripts/sweep.py): which
task defaults a run starts from (``purehr.tasks.profiles``). ``auto`` picks ``accelerator`` on a
GPU or TPU; flags given (and a config file's values) win over the profile's; a resumed run
keeps the profile it was started with, which its manifest records (``run_config``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from purehr.run.planning.settings import SettingsLayer
from purehr.run.store.record import recorded_profile
from purehr.run.store.run_dir import read_manifest
from purehr.tasks.profiles import ACCELERATOR_DEFAULTS, PROFILE_CHOICES, profile_values, resolve_profile


def add_profile_flag(parser: argparse.ArgumentParser, resumable: bool = True) -> None:
    tasks = "; ".join(
        f"{task} {' '.join(f'{k}={v}' for k, v in values.items())}" for task, values in ACCELERATOR_DEFAULTS.items()
    )
    parser.add_argument(
        "--profile",
        choices=PROFILE_CHOICES,
        default=None,
        help="task defaults for the device: 'cpu' (the tasks' defaults), 'accelerator' (wider and shorter "
        f"rollouts, fewer sequential steps on a GPU/TPU: {tasks}), 'auto' (accelerator where JAX's default "
        "backend is a GPU or TPU; the default)" + ("; on --resume: the run's" if resumable else ""),
    )


def run_profile(given: str | None, resume: bool, run_dir: Path) -> tuple[str, str]:
    """(the profile, why it is the one): a resume's is its manifest's (a different
    ``cpu``/``accelerator`` given is refused); a new run's, ``given`` (None: auto) resolved."""
    if resume:
        try:
            recorded = recorded_profile(read_manifest(Path(run_dir)))
        except (OSError, ValueError):  # no run there: train_all_seeds names the problem
            return resolve_profile(given or "auto"), "--resume of no readable run"
        if given not in (None, "auto", recorded):
            raise ValueError(
                f"--profile {given}: {run_dir} was started with profile {recorded!r}; omit --profile to "
                "continue it with its own settings"
            )
        return recorded, "the resumed run's"
    if given in (None, "auto"):
        import jax

        return resolve_profile("auto"), f"auto: JAX's default backend is {jax.default_backend()}"
    return resolve_profile(given), "--profile"


def profile_layer(profile: str, entries: list[str], algorithm: str | None) -> SettingsLayer:
    """The profile's values for each entry: a source of the run's settings under the config file's
    and the flags' (``purehr.run.planning.settings``)."""
    return SettingsLayer(
        f"profile {profile}", {}, {entry: profile_values(profile, entry, algorithm) for entry in entries}
    )


def profile_line(profile: str, why: str, entries: list[str], algorithm: str | None, given: dict[str, set]) -> str:
    """The plan's line: the profile, why, what it sets per entry and which of those ``given``
    (entry -> the fields other sources give) replaced."""
    parts = []
    for entry in entries:
        values = profile_values(profile, entry, algorithm)
        if values:
            yours = given.get(entry, set())
            shown = " ".join(f"{k}={v}" + (" (given: yours)" if k in yours else "") for k, v in values.items())
            parts.append(f"{entry} {shown}")
    what = f": {'; '.join(parts)}" if parts else ": the tasks' defaults"
    return f"profile {profile} ({why}){what}"
