"""The contract beside an exported policy (``contract.json``): everything a program that does not
know purehr needs to feed it and read it (input and output names, shapes, dtypes, the
observation's fields in order, the action space and how the output maps to an action, the
recurrent carry's start), and what it is (the checkpoint and its state digest, purehr's version
and commit, the environment's name, arguments and package versions, the parity figures)."""

from __future__ import annotations

import hashlib
import sys
from importlib import metadata
from typing import Any

import numpy as np

from purehr.deploy.program import BATCH, PolicyProgram, observation_fields
from purehr.envs import spaces
from purehr.model.saved import space_text
from purehr.run.store.machine import git_revision

CONTRACT_FILE = "contract.json"
CONTRACT_FORMAT = "purehr-policy-contract/1"
PACKAGES = ("jax", "jaxlib", "flax", "numpy", "jax2onnx", "onnx", "onnxruntime")


def action_record(space) -> dict[str, Any]:
    """The action space and how the ``action`` output maps to the environment's action."""
    if isinstance(space, spaces.Discrete):
        return {
            "space": space_text(space),
            "kind": "discrete",
            "n": int(space.n),
            "mapping": "action[i] is the index of the chosen action (argmax of the policy's logits over the legal "
            "actions where the observation has an action_mask)",
        }
    if isinstance(space, spaces.MultiDiscrete):
        return {
            "space": space_text(space),
            "kind": "multi_discrete",
            "nvec": [int(n) for n in space.nvec],
            "mapping": "action[i, j] is the index chosen for component j (argmax of its logits, legal ones only "
            "where masked)",
        }
    low = np.broadcast_to(np.asarray(space.low, np.float64), space.shape)
    high = np.broadcast_to(np.asarray(space.high, np.float64), space.shape)
    return {
        "space": space_text(space),
        "kind": "continuous",
        "low": [float(v) for v in low.reshape(-1)],
        "high": [float(v) for v in high.reshape(-1)],
        "mapping": "action[i] is the environment's action as the policy sends it (already squashed or clipped into "
        "[low, high] by the policy: pass it as it is)",
    }


def package_versions() -> dict[str, str | None]:
    versions = {}
    for package in PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def contract(
    program: PolicyProgram,
    files: dict[str, dict[str, Any]],
    checkpoint: dict[str, Any],
    environment: dict[str, Any],
    algorithm: dict[str, Any],
    parity: dict[str, Any],
) -> dict[str, Any]:
    """The contract's record (JSON values). ``files``: format -> {file, sha256, bytes, ...};
    ``checkpoint``: where the policy came from; ``environment``: name, class, arguments;
    ``algorithm``: name, network, config; ``parity``: the figures of the check."""
    fields = observation_fields(program.observation_space)
    return {
        "format": CONTRACT_FORMAT,
        "inputs": [spec.record() for spec in program.inputs],
        "outputs": [spec.record() for spec in program.outputs],
        "batch": f"'{BATCH}', the first axis of every input and output, is any number of observations acted on "
        "at once (one per episode)",
        "observation": {
            "space": space_text(program.observation_space),
            "fields": [
                {"input": key or "observation", "key": key, "shape": [int(n) for n in space.shape]}
                for key, space in fields
            ],
            "order": "a dict observation's keys in sorted order, one input each (the network reads them "
            "flattened and concatenated in this order); the action_mask input, where there is one, is 1 for a "
            "legal action",
        },
        "action": action_record(program.action_space),
        "carry": (
            {
                "initial": "zeros at each episode's start",
                "shapes": [list(np.shape(leaf)) for leaf in program.initial_carry],
                "use": "feed each carry_out back as the carry of the same episode's next step",
            }
            if program.recurrent
            else None
        ),
        "deterministic": "the policy's deterministic action: a Gaussian's squashed mean, a categorical's argmax, "
        "greedy over Q; no random input",
        "files": files,
        "checkpoint": checkpoint,
        "environment": environment | {"packages": package_versions()},
        "algorithm": algorithm,
        "purehr": {"version": sys.modules["purehr"].__version__, "git_revision": git_revision()},
        "parity": parity,
    }
