"""Task defaults per kind of device: the ``cpu`` profile (the tasks' defaults as they are) and
the ``accelerator`` profile (GPU/TPU), which trades rollout length for width (issue 49).

On an accelerator a loop costs its length, not its width: a swing update of 32 envs x 128 steps
runs 1,217 sequential loop iterations (128 x 8 RK4 sub-steps of rollout, 128 of GAE, 64
gradient steps), one of 128 envs x 32 steps with minibatches of 128 runs 417 (256 + 32 + 128),
on the same 4,096 transitions and 489 updates. The checkpoint targets (every 50k steps),
held-out evaluations and goals are the protocol's, unchanged (docs/protocol.md, "Profiles";
benchmarks/README.md, "The accelerator profile")."""

from __future__ import annotations

from typing import Any

from purehr.algorithms.registry import DEFAULT_ALGORITHM, split_entry
from purehr.protocol_settings import split_settings

PROFILES = ("cpu", "accelerator")
PROFILE_CHOICES = ("auto", *PROFILES)
"""``auto``: ``accelerator`` where JAX's default backend is a GPU or TPU, else ``cpu``."""
ACCELERATOR_BACKENDS = ("gpu", "cuda", "rocm", "tpu")

SWING_ACCELERATOR = {"num_envs": 128, "num_steps": 32, "minibatch_size": 128}
"""Swing: 4x the environments for 1/4 of the rollout, the batch (4,096) and updates (489) of
``SWING_DEFAULTS``, minibatches of 128 (32 gradient steps an epoch, not 16): 417 sequential
iterations an update, not 1,217. Shorter rollouts with the minibatch of 256 learned worse (256
x 16: 3 seeds of 5 at >= 0.95; 128 x 32: 4, one at 0); halving the minibatch gave 5 of 5 at
1.00, median 13.29 s (docs/protocol.md, "Profiles")."""
HRV_ACCELERATOR = {"num_envs": 256, "num_steps": 8, "minibatch_size": 512}
"""hrv: 4x the environments for 1/4 of the rollout (episodes last ~4 steps, gamma 0.8), the
batch (2,048), minibatches (4 of 512) and updates (147) of ``HRV_DEFAULTS``."""
ACCELERATOR_DEFAULTS: dict[str, dict[str, Any]] = {"swing": SWING_ACCELERATOR, "hrv": HRV_ACCELERATOR}
"""Task -> the PPO config fields the accelerator profile sets over its defaults: the tasks whose
goals it was checked against (the partially observed variants keep their defaults)."""


def check_profile(profile: str) -> str:
    """``profile`` itself, or ``ValueError`` naming it and the choices."""
    if profile not in PROFILE_CHOICES:
        raise ValueError(f"profile={profile!r}: expected one of {', '.join(PROFILE_CHOICES)}")
    return profile


def resolve_profile(profile: str = "auto", backend: str | None = None) -> str:
    """``cpu`` or ``accelerator``: ``profile`` itself, or for ``auto`` what ``backend`` (default:
    ``jax.default_backend()``) is."""
    if check_profile(profile) != "auto":
        return profile
    if backend is None:
        import jax

        backend = jax.default_backend()
    return "accelerator" if backend.lower() in ACCELERATOR_BACKENDS else "cpu"


def profile_values(profile: str, entry: str, algorithm: str | None = None) -> dict[str, Any]:
    """The config fields ``profile`` (``cpu`` or ``accelerator``) sets for the task entry
    ``entry`` trained by ``algorithm`` (None: PPO; an entry ``swing@sac`` names its own):
    none under ``cpu``, nor for an entry the profile has no values for."""
    if check_profile(profile) == "auto":
        raise ValueError("profile='auto': resolve it first (resolve_profile)")
    task, suffix = split_entry(entry)
    if profile == "cpu" or (suffix or algorithm or DEFAULT_ALGORITHM) != "ppo":
        return {}
    return dict(ACCELERATOR_DEFAULTS.get(task, {}))


def profile_config(config, profile: str, entry: str, algorithm: str | None = None):
    """``config`` (a task's default) with ``profile``'s config values for ``entry`` over it."""
    return config.replace(**split_settings(profile_values(profile, entry, algorithm))[0])


def profile_protocol(protocol, profile: str, entry: str, algorithm: str | None = None):
    """``protocol`` (a task's ``ProtocolSettings``) with ``profile``'s protocol values over it."""
    return protocol.replace(**split_settings(profile_values(profile, entry, algorithm))[1])
