"""``purehr.export``: a trained policy written for use outside purehr. From a run directory (task,
seed, step ``reported``/``latest``/a number) or a saved model, the deterministic policy
(``purehr.deploy.program``) as ONNX and a ``jax.export`` program, a contract (``contract.json``)
and a model card (README.md, ``purehr.reports.model_card``).

Everything is checked before anything is read at length (the formats' packages, the output
folder, the run's divergences, the step), and nothing final is written before the parity check
passes (``purehr.deploy.parity``): the files go to a temporary folder beside the output and are
moved into place only then."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import numpy as np

from purehr.deploy import formats as formats_module
from purehr.deploy.contract import CONTRACT_FILE, contract, sha256
from purehr.deploy.parity import PARITY_EPISODES, TOLERANCE, check_parity, heldout_samples
from purehr.deploy.program import policy_program
from purehr.model.facade import Model
from purehr.model.saved import SELF_DIGEST
from purehr.reports.model_card import CARD_FILE, export_card_files
from purehr.run.host.estimate import network_text
from purehr.run.restoring import restore
from purehr.run.store.run_dir import MANIFEST, RunDirectory
from purehr.tasks import task_of_env

EXPORT_FILES = frozenset({CARD_FILE, CONTRACT_FILE, *formats_module.FILES.values()})
"""What an export writes besides the figures it copies (``*.png``, ``*.mp4``): an output folder
holding only such files is a previous export, which ``overwrite=True`` replaces."""


@dataclass(frozen=True)
class PolicySource:
    """A trained policy and where it came from: ``checkpoint`` and ``environment`` are the
    contract's records; ``run_dir`` is None for a saved model."""

    policy: Any
    env: Any
    env_params: Any
    algorithm: dict[str, Any]
    checkpoint: dict[str, Any]
    environment: dict[str, Any]
    run_dir: Path | None = None
    task: str | None = None
    seed: int | None = None


@dataclass(frozen=True)
class ExportResult:
    """The folder written, its contract and the seconds each stage took."""

    out: Path
    contract: dict[str, Any]
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def parity(self) -> dict[str, Any]:
        return self.contract["parity"]


def export(
    source: str | Path,
    task: str | None = None,
    seed: int | None = None,
    step: int | str = "reported",
    *,
    out: str | Path,
    formats: Sequence[str] = ("onnx", "jax"),
    tolerance: float = TOLERANCE,
    episodes: int = PARITY_EPISODES,
    overwrite: bool = False,
) -> ExportResult:
    """Export the deterministic policy of ``source``: a run directory (with ``task``, ``seed``
    and ``step``) or a saved model's folder (``Model.save``; no task, seed or step). Writes
    ``out`` (a new or empty folder; a previous export there only with ``overwrite``): the
    formats' files, contract.json and README.md. Refused before anything is written: a format
    not installed (naming the extra), an output folder holding other files, a diverged run, a
    step that does not exist, an export that does not act as the JAX policy (``ParityError``,
    naming the maximum absolute error and the action agreement)."""
    started = time.perf_counter()
    chosen = formats_module.check_formats(formats)
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance={tolerance!r}: expected a non-negative number")
    if isinstance(episodes, bool) or not isinstance(episodes, int) or not 1 <= episodes <= 1000:
        raise ValueError(f"episodes={episodes!r}: expected an integer from 1 to 1000")
    out = Path(out)
    check_output_folder(out, overwrite)
    policy = load_source(Path(source), task, seed, step)
    seconds = {"load": time.perf_counter() - started}

    clock = time.perf_counter()
    program = policy_program(policy.policy, *_spaces(policy))
    written: dict[str, bytes] = {}
    runners = {}
    files: dict[str, dict[str, Any]] = {}
    names = [spec.name for spec in program.inputs]
    if "onnx" in chosen:
        written["onnx"] = formats_module.to_onnx(program)
        runners["onnx"] = formats_module.onnx_runner(written["onnx"], names)
        files["onnx"] = {"opset": formats_module.ONNX_OPSET}
    if "jax" in chosen:
        written["jax"], platforms = formats_module.to_jax_export(program)
        runners["jax"] = formats_module.jax_export_runner(written["jax"])
        files["jax"] = {"platforms": list(platforms), "load": "jax.export.deserialize(bytearray(data)).call(*inputs)"}
    seconds["convert"] = time.perf_counter() - clock

    clock = time.perf_counter()
    samples = heldout_samples(policy.env, policy.env_params, policy.policy, program, episodes)
    figures = check_parity(samples, runners, program, tolerance)
    seconds["parity"] = time.perf_counter() - clock

    for name, data in written.items():
        files[name] = {"file": formats_module.FILES[name], "sha256": sha256(data), "bytes": len(data)} | files[name]
    parity = {"tolerance": tolerance, "episodes": episodes, "observations": samples.count, **figures}
    record = contract(program, files, policy.checkpoint, policy.environment, policy.algorithm, parity)

    clock = time.perf_counter()
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for name, data in written.items():
            (staging / formats_module.FILES[name]).write_bytes(data)
        (staging / CONTRACT_FILE).write_text(json.dumps(record, indent=2) + "\n")
        export_card_files(staging, record, policy.run_dir, policy.task, policy.seed)
        _move_into_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    seconds["write"] = time.perf_counter() - clock
    seconds["total"] = time.perf_counter() - started
    return ExportResult(out, record, seconds)


def check_output_folder(out: Path, overwrite: bool) -> None:
    """``FileExistsError`` for a file, or a folder holding anything but a previous export's
    files (those only with ``overwrite``), naming what is there."""
    if not isinstance(overwrite, bool):
        raise TypeError(f"overwrite={overwrite!r}: expected True or False")
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"{out} is a file; expected a new or empty folder for the export (nothing was written)")
    found = sorted(entry.name for entry in out.iterdir()) if out.is_dir() else []
    if not found:
        return
    others = [name for name in found if name not in EXPORT_FILES and not name.endswith((".png", ".mp4"))]
    if others or CONTRACT_FILE not in found:
        raise FileExistsError(
            f"{out} holds files an export did not write ({', '.join((others or found)[:5])}); export into a new or "
            "empty folder (nothing was written)"
        )
    if not overwrite:
        raise FileExistsError(
            f"{out} holds an export ({', '.join(found[:5])}); pass overwrite=True (--overwrite) to replace it, or "
            "choose another folder (nothing was written)"
        )


def _move_into_place(staging: Path, out: Path) -> None:
    """``staging`` becomes ``out``; a previous export there (checked by ``check_output_folder``)
    is set aside first and removed once the new one is in place."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.replaced-{os.getpid()}"
        os.replace(out, old)
    os.replace(staging, out)
    if old is not None:
        shutil.rmtree(old)


def load_source(source: Path, task: str | None, seed: int | None, step: int | str) -> PolicySource:
    """The policy of a run directory's checkpoint or of a saved model, checked: a run's divergence
    and a checkpoint's non-finite parameters are refused, as a missing step is (``restore``)."""
    if (source / "model.json").is_file():
        if task is not None or seed is not None:
            raise ValueError(
                f"{source} is a saved model: it has one policy (task={task!r}, seed={seed!r}: expected None)"
            )
        return _saved_model_source(source)
    if not (source / MANIFEST).is_file():
        raise FileNotFoundError(
            f"{source} is neither a run directory ({MANIFEST}) nor a saved model (model.json); expected one of them"
        )
    if task is None or seed is None:
        raise ValueError(
            f"{source} is a run directory: name the task and the seed to export (task={task!r}, seed={seed!r})"
        )
    manifest = RunDirectory(source).read_manifest()
    diverged = (manifest.get("diverged") or {}).get(task) or {}
    if str(seed) in diverged or seed in diverged:
        raise ValueError(
            f"{task} seed {seed} of {source} diverged in training (manifest.json 'diverged'); its policy is not a "
            "trained one: export another seed"
        )
    restored = restore(source, task, seed, step)
    _check_finite(restored.params, f"{task} seed {seed} step {restored.steps} of {source}")
    config = restored.config
    return PolicySource(
        restored.pure_policy,
        restored.env,
        restored.env_params,
        {"name": manifest["algorithms"].get(task, "ppo"), "network": network_text(config), "config": config.to_dict()},
        {
            "source": "run",
            "path": str(source),
            "task": task,
            "seed": int(seed),
            "step": step if isinstance(step, str) else int(step),
            "steps": int(restored.steps),
            "target_steps": int(restored.target_steps),
            "state_digest": restored.checkpoint_row["state_digest"],
        },
        _environment(restored.env, manifest.get("environments", {}).get(task)),
        source,
        task,
        int(seed),
    )


def _saved_model_source(source: Path) -> PolicySource:
    model = Model.load(source)
    _check_finite(model.params, str(source))
    description = json.loads((source / "model.json").read_text())
    return PolicySource(
        model._algorithm.policy(model.params),
        model.env,
        model.env_params,
        {"name": model.algorithm, "network": network_text(model.config), "config": model.config.to_dict()},
        {
            "source": "saved model",
            "path": str(source),
            "seed": model.seed,
            "state_digest": description.get(SELF_DIGEST),
        },
        _environment(model.env, None),
    )


def _environment(env, recorded: Any) -> dict[str, Any]:
    task = task_of_env(env)
    base = getattr(env, "unwrapped", env)
    record = {"name": task.name if task is not None else None, "class": type(base).__name__}
    record["kwargs"] = task.env_kwargs(env) if task is not None else {}
    if recorded is not None:
        record["recorded"] = recorded
    return record


def _check_finite(params: Any, what: str) -> None:
    bad = [leaf for leaf in jax.tree.leaves(params) if not np.all(np.isfinite(np.asarray(leaf)))]
    if bad:
        raise ValueError(
            f"{what}: {len(bad)} parameter arrays hold NaN or infinite values (a diverged policy); not exported"
        )


def _spaces(policy: PolicySource):
    return policy.env.observation_space(policy.env_params), policy.env.action_space(policy.env_params)
