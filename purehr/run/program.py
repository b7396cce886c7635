"""The compiled training program of a run and the devices it runs on. Compiling takes far
longer than a small run trains, so each program is compiled once per process and kept: its
host callbacks call whichever recorder sits in ``HANDLERS``, so one compiled program serves
every run of the same shape in a process (a resume, a test)."""

from __future__ import annotations

import math
from typing import Any

import jax

from purehr.devices.distributed import make_mesh, select_devices
from purehr.envs.hrv.curriculum import Curriculum
from purehr.ppo.loop import HostSlot
from purehr.ppo.trainer import keys_for_seeds
from purehr.run.runner import TaskSetup, make_train_all

HANDLERS = HostSlot()
_PROGRAMS: dict[tuple, Any] = {}


def compiled_program(
    setups: list[TaskSetup], num_seeds: int, runners: dict, curricula: dict[str, Curriculum] | None = None, mesh=None
):
    """``train_all(runners) -> runners`` compiled for these setups, seeds, precision and mesh
    (``runners``: task -> RunnerState with a leading seed axis, placed as the program takes them)."""
    curricula = curricula or {}
    mesh_key = None if mesh is None else (tuple(mesh.shape.items()), tuple(d.id for d in mesh.devices.flat))
    key = (
        tuple((s.name, s.config, curricula.get(s.name)) for s in setups),
        num_seeds,
        bool(jax.config.jax_enable_x64),
        mesh_key,
    )
    if key not in _PROGRAMS:
        _PROGRAMS[key] = jax.jit(make_train_all(setups, HANDLERS)).lower(runners).compile()
    return _PROGRAMS[key]


def protocol_mesh(setups: list[TaskSetup], seeds: list[int], devices):
    """The device mesh for this run, or None on one device (every task shares it: the
    environment axis is split only as far as every task's num_envs allows)."""
    chosen = select_devices(devices)
    if len(chosen) == 1:
        return None
    return make_mesh(len(seeds), math.gcd(*(s.config.num_envs for s in setups)), chosen)


def initial_runners(setups: list[TaskSetup], seeds: list[int]) -> dict[str, Any]:
    """task -> the initial RunnerState of every seed (leading axis: seeds), from the seeds' keys."""
    keys = keys_for_seeds(seeds)
    return {setup.name: jax.jit(jax.vmap(setup.ppo.init))(keys) for setup in setups}
