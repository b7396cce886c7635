"""The environment side of an exported policy run outside JAX: the policy acts in a separate
process (``purehr.deploy.onnx_worker``: ONNX Runtime and NumPy only, reading only the contract and
the .onnx), this process steps the environment (JAX) and exchanges observations and actions with
it every step. ``heldout_outcomes`` runs the task's held-out evaluation and its held-out episodes
with both the JAX policy and the worker, so the two can be compared episode by episode."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from purehr.deploy import onnx_worker
from purehr.deploy.program import observation_fields
from purehr.envs.policies import RecurrentPolicy, as_recurrent
from purehr.envs.rollout import heldout_key, run_episodes
from purehr.model.facade import evaluation_of


class OnnxWorker:
    """The policy process of ``folder`` (an export); ``act(inputs) -> outputs`` in the contract's order."""

    def __init__(self, folder: Path):
        self.contract = json.loads((Path(folder) / "contract.json").read_text())
        self.process = subprocess.Popen(
            [sys.executable, onnx_worker.__file__, str(folder)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )

    def act(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        self.process.stdin.write(b"R")
        for array in arrays:
            onnx_worker.send(self.process.stdin, array)
        self.process.stdin.flush()
        return [onnx_worker.receive(self.process.stdout) for _ in self.contract["outputs"]]

    def close(self) -> dict[str, Any]:
        """Ends the process; its report (requests served, whether it imported JAX)."""
        self.process.stdin.write(b"Q")
        self.process.stdin.close()
        report = json.loads(self.process.stdout.readline())
        self.process.wait(timeout=60)
        return report


def worker_policy(worker: OnnxWorker, observation_space, initial_carry) -> RecurrentPolicy:
    """A policy for JAX's episode loops whose every action comes from ``worker`` (a host callback,
    batched over the loops' vmaps into one request a step)."""
    inputs, outputs = worker.contract["inputs"], worker.contract["outputs"]
    fields = [key for key, _ in observation_fields(observation_space)]

    def host(*arrays):
        lead = np.shape(arrays[0])[: np.ndim(arrays[0]) - (len(inputs[0]["shape"]) - 1)]
        flat = [np.asarray(a, spec["dtype"]).reshape(-1, *spec["shape"][1:]) for a, spec in zip(arrays, inputs)]
        answers = worker.act(flat)
        return tuple(
            np.asarray(a, spec["dtype"]).reshape(*lead, *spec["shape"][1:]) for a, spec in zip(answers, outputs)
        )

    def step(state, observation, t, key):
        leaves = [observation[k] for k in fields] if fields != [None] else [observation]
        shapes = tuple(jax.ShapeDtypeStruct(tuple(spec["shape"][1:]), np.dtype(spec["dtype"])) for spec in outputs)
        action, *carry = jax.pure_callback(host, shapes, *leaves, *state, vmap_method="broadcast_all")
        return action, tuple(carry)

    return RecurrentPolicy(tuple(jnp.asarray(leaf) for leaf in initial_carry), step)


def heldout_outcomes(folder: Path, env, env_params, policy, episodes: int) -> dict[str, Any]:
    """The task's held-out evaluation (its protocol's metrics) and ``episodes`` generic held-out
    episodes (length, success, return each), with the JAX ``policy`` and with the exported ONNX
    policy in its own process; plus that process's report."""
    worker = OnnxWorker(folder)
    try:
        initial = [
            np.zeros(spec["shape"][1:], spec["dtype"]) for spec in worker.contract["inputs"] if spec["role"] == "carry"
        ]
        exported = worker_policy(worker, env.observation_space(env_params), initial)
        evaluation = evaluation_of(env)
        outcomes = {}
        for name, acting in (("jax", as_recurrent(policy)), ("onnx", exported)):
            metrics = jax.jit(lambda: evaluation(env, env_params, acting, num_episodes=episodes))()
            runs = jax.jit(lambda: run_episodes(env, env_params, acting, heldout_key(), episodes))()
            outcomes[name] = {
                "evaluation": {key: float(value) for key, value in metrics.items()},
                "lengths": np.asarray(runs["length"]).tolist(),
                "success": np.asarray(runs["success"]).astype(bool).tolist(),
                "returns": np.asarray(runs["return"]).tolist(),
            }
    finally:
        report = worker.close()
    return outcomes | {"worker": report}
