"""``--profile {auto,cpu,accelerator}`` (scripts/train_all_seeds.py, scripts/sweep.py): which
task defaults a run starts from (``purehr.tasks.profiles``). ``auto`` picks ``accelerator`` on a
GPU or TPU; flags given (and a config file's values) win over the profile's; a resumed run
keeps the profile it was started with, which its manifest records (``run_config``)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from purehr.protocol_settings import split_settings
from purehr.run.planning.run_plan import entry_settings
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


def recorded_profile(manifest: dict) -> str:
    """The profile a run's manifest records (``run_config``); ``cpu`` for a run of before profiles."""
    values = (manifest.get("run_config") or {}).get("values") or {}
    return values.get("profile") or "cpu"


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


def apply_profile(
    profile: str,
    entries: list[str],
    algorithm: str | None,
    overrides: dict[str, Any],
    task_overrides: dict[str, dict[str, Any]],
) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """(``task_overrides`` with the profile's values of each entry under them and under
    ``overrides``, the profile's fields each entry was given otherwise): what is given wins."""
    merged, overridden = {k: dict(v) for k, v in task_overrides.items()}, {}
    for entry in entries:
        values = profile_values(profile, entry, algorithm)
        given = {**overrides, **task_overrides.get(entry, {})}
        kept = {name: value for name, value in values.items() if name not in given}
        if kept:
            _check_fit(profile, entry, algorithm, kept, given)
            merged[entry] = {**kept, **merged.get(entry, {})}
        if len(kept) < len(values):
            overridden[entry] = sorted(set(values) - set(kept))
    return merged, overridden


def _check_fit(profile: str, entry: str, algorithm: str | None, kept: dict, given: dict) -> None:
    """``ValueError`` where the profile's values left under the given ones make no config of
    ``entry`` (``--num-envs 10`` beside the profile's ``num_steps`` and ``minibatch_size``),
    naming which values are the profile's and which were given, and the ways out."""
    try:
        config = entry_settings(entry, algorithm)[0]
    except (ValueError, KeyError):
        return  # the plan refuses the entry itself
    fields = {f.name for f in dataclasses.fields(config)}
    yours = {name: value for name, value in split_settings(given)[0].items() if name in fields}
    if not yours:
        return
    try:
        config.replace(**yours, **split_settings(kept)[0])
    except ValueError as error:
        theirs = " ".join(f"{k}={v}" for k, v in kept.items())
        flags = " and ".join(f"--{k.replace('_', '-')}" for k in kept)
        raise ValueError(
            f"{entry}: {error}; {theirs} from --profile {profile}; "
            f"{' '.join(f'{k}={v}' for k, v in yours.items())} given. Expected values that fit together: "
            f"give --profile cpu (the task's defaults under yours), or set {flags} too"
        ) from None


def profile_line(profile: str, why: str, entries: list[str], algorithm: str | None, overridden: dict) -> str:
    """The plan's line: the profile, why, what it sets per entry and what given values replaced."""
    parts = []
    for entry in entries:
        values = profile_values(profile, entry, algorithm)
        if values:
            given = overridden.get(entry, [])
            shown = " ".join(f"{k}={v}" + (" (given: yours)" if k in given else "") for k, v in values.items())
            parts.append(f"{entry} {shown}")
    what = f": {'; '.join(parts)}" if parts else ": the tasks' defaults"
    return f"profile {profile} ({why}){what}"
