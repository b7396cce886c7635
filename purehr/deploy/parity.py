"""The parity check of an export: the exported programs run on held-out observations gathered by
rolling the JAX policy in its environment, and must give the actions that policy took there
(with the real step index and key) within a tolerance. Refused, naming the maximum absolute
error and the action agreement, above it; the export then writes nothing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from purehr.deploy.program import PolicyProgram, observation_fields
from purehr.envs.policies import as_recurrent
from purehr.envs.rollout import HELDOUT_SEED, heldout_key

TOLERANCE = 1e-4
"""The largest absolute difference from the JAX policy's action (and carry) an export may have."""
PARITY_EPISODES = 4
"""Held-out episodes rolled for the check (every step of each, to its end)."""
PARITY_SEED = HELDOUT_SEED + 1
"""Their keys: the generic held-out stream of another seed than the evaluation's."""


class ParityError(ValueError):
    """An exported program that does not act as the JAX policy did."""


@dataclass(frozen=True)
class HeldoutSamples:
    """What the JAX policy saw and did on held-out steps: ``inputs`` in the program's input order
    [N, ...] (observation leaves, the carry it acted with), ``outputs`` in its output order
    (the action taken, the next carry)."""

    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    episodes: int

    @property
    def count(self) -> int:
        return int(self.inputs[0].shape[0])


def heldout_samples(
    env, env_params, policy, program: PolicyProgram, episodes: int = PARITY_EPISODES, seed: int = PARITY_SEED
) -> HeldoutSamples:
    """Roll ``policy`` (deterministic, as trained) on ``episodes`` held-out episodes of ``env``
    and keep every step inside an episode."""
    recurrent = as_recurrent(policy)
    fields = [key for key, _ in observation_fields(program.observation_space)]
    horizon = env.max_episode_steps(env_params)

    def one_episode(key):
        reset_key, run_key = jax.random.split(key)
        observation, state = env.reset(reset_key, env_params)

        def step(carry, t):
            observation, state, memory, key, running = carry
            key, action_key, step_key = jax.random.split(key, 3)
            action, next_memory = recurrent.step(memory, observation, t, action_key)
            leaves = [observation[k] for k in fields] if fields != [None] else [observation]
            row = (leaves, jax.tree.leaves(memory), jnp.asarray(action), jax.tree.leaves(next_memory), running)
            observation, state, _, terminated, truncated, _ = env.step(step_key, state, action, env_params)
            running = running & ~(terminated | truncated)
            return (observation, state, next_memory, key, running), row

        start = (observation, state, recurrent.initial_state, run_key, jnp.bool_(True))
        return jax.lax.scan(step, start, jnp.arange(horizon, dtype=jnp.int32))[1]

    keys = jax.random.split(heldout_key(seed), episodes)
    leaves, memory, action, next_memory, running = jax.jit(jax.vmap(one_episode))(keys)
    keep = np.asarray(running).reshape(-1)

    def kept(values):
        return [np.asarray(value).reshape(-1, *np.shape(value)[2:])[keep] for value in values]

    inputs = [value.astype(spec.dtype) for value, spec in zip(kept(leaves) + kept(memory), program.inputs, strict=True)]
    return HeldoutSamples(inputs, kept([action]) + kept(next_memory), episodes)


def compare(
    samples: HeldoutSamples, outputs: Sequence[np.ndarray], program: PolicyProgram, tolerance: float = TOLERANCE
) -> dict[str, float]:
    """``max_abs_error`` over every output (action and carry; an integer action's error is its
    difference), ``action_agreement``: the fraction of observations whose action is within
    ``tolerance`` in every component (equal, for integer actions)."""
    errors = []
    for expected, got, spec in zip(samples.outputs, outputs, program.outputs, strict=True):
        got = np.asarray(got)
        if got.shape != expected.shape:
            raise ParityError(f"output {spec.name!r} has shape {got.shape}; expected {expected.shape}")
        errors.append(np.abs(got.astype(np.float64) - expected.astype(np.float64)).reshape(len(expected), -1))
    worst = max(float(error.max(initial=0.0)) for error in errors)
    action_error = errors[0].max(axis=1, initial=0.0)
    exact = np.issubdtype(samples.outputs[0].dtype, np.integer)
    agreement = float(np.mean(action_error <= (0 if exact else tolerance)))
    if not np.isfinite(worst):
        worst = float("inf")
    return {"max_abs_error": worst, "action_agreement": agreement, "observations": samples.count}


def check_parity(
    samples: HeldoutSamples,
    runners: dict[str, Callable[[Sequence[np.ndarray]], list[np.ndarray]]],
    program: PolicyProgram,
    tolerance: float = TOLERANCE,
) -> dict[str, dict[str, float]]:
    """Each format's figures (``compare``); ``ParityError`` naming both numbers where a format's
    maximum absolute error exceeds ``tolerance`` or an action disagrees."""
    figures = {name: compare(samples, run(samples.inputs), program, tolerance) for name, run in runners.items()}
    bad = {name: f for name, f in figures.items() if f["max_abs_error"] > tolerance or f["action_agreement"] < 1.0}
    if bad:
        said = "; ".join(
            f"{name}: maximum absolute error {f['max_abs_error']:.3g} (tolerance {tolerance:g}), action agreement "
            f"{f['action_agreement']:.4f} over {f['observations']} held-out observations"
            for name, f in bad.items()
        )
        raise ParityError(f"the exported policy does not act as the JAX policy: {said}; nothing was written")
    return figures
