"""Training past one device: the seed axis (and the environment axis when there are more
devices than seeds) sharded with ``jax.sharding.NamedSharding`` over a ``Mesh``.

    from purehr.devices.distributed import make_sharded_train
    train = make_sharded_train(config, env, devices=None)      # None: every visible device
    result = train(keys_for_seeds(range(8)))                   # one jit, partitioned by XLA

Nothing changes in the algorithm: the program is the same ``jit(scan(vmap(update)))``; the
runner states carry a sharding on their leading seed axis (and on the environment axis of
the environment states and observations), and XLA's SPMD partitioner splits the vmapped
work across devices. Seeds are independent, so seed-only sharding needs no communication
but the final gather; environment-axis sharding adds all-reduces for the batch statistics
(advantage normalisation, minibatch means), so results agree with one device to float
tolerance rather than bit for bit.

The mesh has two axes, ``("seeds", "envs")``. Its shape is the largest use of the given
devices whose parts divide the seed count and the environment count (seeds first): 8 seeds
on 4 devices -> (4, 1); 2 seeds x 8 envs on 8 devices -> (2, 4); 5 seeds x 8 envs on 4
devices -> (1, 4). Devices that do not fit stay idle (a warning says so).

Host callbacks (``make_train(callback=...)`` and the multi-task runner's log and checkpoint
``io_callback``\\ s) still receive the full seed axis: XLA gathers the operands to one device
before calling the host (measured on 4 forced CPU devices, jax 0.10.2).

Multi-host (TPU pods, several GPU hosts): call :func:`initialize_distributed` (that is
``jax.distributed.initialize()``) in every process before anything else touches JAX; the
mesh then spans every process's devices, and the placement helpers below build global
arrays from the full host data each process holds (the same keys on every host). See
``docs/how-to/multi_host.md`` for what is and is not tested.
"""

from __future__ import annotations

import math
import os
import socket
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from purehr.algorithms.trainer import make_train
from purehr.devices.host import (  # noqa: F401  (re-exported)
    COLLECTIVE_TERMINATE_FLAG,
    cpu_pool_threads,
    prepare_host_devices,
    requested_host_devices,
)
from purehr.engine.seeds import raw_seed_keys

SEED_AXIS = "seeds"
ENV_AXIS = "envs"

Devices = int | Sequence[jax.Device] | None


def check_host_callback_threads(devices: Sequence[jax.Device]) -> None:
    """Refuse, before compiling, a CPU mesh whose devices fill XLA's thread pool (the host
    callbacks would deadlock; see :func:`prepare_host_devices`)."""
    local = [d for d in devices if d.platform == "cpu" and d.process_index == jax.process_index()]
    if len(local) > 1 and cpu_pool_threads() <= len(local):
        raise ValueError(
            f"{len(local)} CPU devices in this process but XLA's CPU thread pool has only {len(local)} "
            f"threads (PJRT_NPROC={os.environ.get('PJRT_NPROC', 'unset')}, {cpu_pool_threads()} usable CPUs): "
            f"the checkpoint callbacks would deadlock. Set PJRT_NPROC={len(local) + 1} (or call "
            "purehr.devices.distributed.prepare_host_devices()) before JAX starts its backend"
        )


def initialize_distributed(
    coordinator_address: str | None = None, num_processes: int | None = None, process_id: int | None = None, **kwargs
) -> None:
    """``jax.distributed.initialize`` (coordinator, process count and id are detected on Cloud
    TPU, SLURM and Open MPI; elsewhere pass them); call it once per process, first thing.

    CPU collectives between processes go through gloo (``jax_cpu_collectives_implementation``,
    set explicitly here): without it a CPU mesh spanning processes cannot all-gather."""
    given = {"num_processes": num_processes, "process_id": process_id}
    if coordinator_address is not None:
        check_coordinator_address(coordinator_address)
    if (num_processes is None) != (process_id is None):
        raise ValueError(f"num_processes={num_processes}, process_id={process_id}: give both or neither")
    if num_processes is not None:
        if not (isinstance(num_processes, int) and num_processes >= 1):
            raise ValueError(f"num_processes={num_processes!r}: expected a positive integer")
        if not (isinstance(process_id, int) and 0 <= process_id < num_processes):
            raise ValueError(f"process_id={process_id!r}: expected 0 to {num_processes - 1}")
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address, **{k: v for k, v in given.items() if v is not None}, **kwargs)


def check_coordinator_address(address: str) -> None:
    """Refuses an address that is not HOST:PORT (``jax.distributed`` fails on it deep inside,
    with an IndexError); an IPv6 host goes in brackets, ``[::1]:1234``."""
    host, colon, port = str(address).rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not (colon and host and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(
            f"coordinator address {address!r}: expected HOST:PORT, process 0's host name or IP "
            "address and a free port from 1 to 65535 (e.g. 10.0.0.2:1234, [::1]:1234)"
        )
    try:
        socket.getaddrinfo(host, int(port))
    except (socket.gaierror, UnicodeError) as error:
        raise ValueError(
            f"coordinator address {address!r}: the host {host!r} does not resolve ({error}); expected "
            "HOST:PORT with process 0's host name or IP address"
        ) from None


def is_primary_process() -> bool:
    """Process 0 writes the run directory; the others only compute."""
    return jax.process_index() == 0


PROCESS_WAIT_SECONDS = 3600
_meetings = [0]


def _coordination_client():
    from jax._src import distributed as jax_distributed  # the client jax.distributed.initialize made

    return jax_distributed.global_state.client


def wait_for_all_processes(purpose: str, timeout_s: float = PROCESS_WAIT_SECONDS) -> None:
    """A barrier on the coordination service (no device collective): process 0 may spend
    minutes on checks, restoring and compiling, while gloo gives a first collective only 30 s
    for every process to arrive. Every process must call these in the same order."""
    if jax.process_count() == 1:
        return
    _meetings[0] += 1
    _coordination_client().wait_at_barrier(f"purehr/{_meetings[0]}/{purpose}", int(timeout_s * 1000))


def broadcast_tree(tree: Any) -> Any:
    """Process 0's values of ``tree`` (NumPy leaves of the same shapes in every process) in
    every process; one process: ``tree`` itself."""
    if jax.process_count() == 1:
        return tree
    from jax.experimental import multihost_utils

    wait_for_all_processes("broadcast")
    return jax.tree.map(np.asarray, multihost_utils.broadcast_one_to_all(tree))


def broadcast_json(value: Any = None, timeout_s: float = PROCESS_WAIT_SECONDS) -> Any:
    """Process 0's JSON-serialisable ``value`` in every process (the others pass nothing),
    through the coordination service's key-value store."""
    if jax.process_count() == 1:
        return value
    import json

    _meetings[0] += 1
    key = f"purehr/{_meetings[0]}/message"
    client = _coordination_client()
    if is_primary_process():
        client.key_value_set(key, json.dumps(value))
        return value
    return json.loads(client.blocking_key_value_get(key, int(timeout_s * 1000)))


def gather_to_host(tree: Any) -> Any:
    """Every leaf of a (possibly multi-process) global array tree as a full NumPy array in
    every process; a collective, so every process must call it."""
    if jax.process_count() == 1:
        return jax.tree.map(np.asarray, tree)
    from jax.experimental import multihost_utils

    return jax.tree.map(np.asarray, multihost_utils.process_allgather(tree, tiled=True))


def select_devices(devices: Devices = None) -> list[jax.Device]:
    """``None``: every visible device (all processes); an int n: the first n; or a list."""
    available = jax.devices()
    if devices is None:
        return list(available)
    if isinstance(devices, (int, np.integer)) and not isinstance(devices, bool):
        if not 1 <= devices <= len(available):
            raise ValueError(
                f"devices={devices}: expected 1 to {len(available)} (visible: {[str(d) for d in available]})"
            )
        return list(available[:devices])
    devices = list(devices)
    if not devices:
        raise ValueError("devices: expected at least one device")
    return devices


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def mesh_shape(num_seeds: int, num_envs: int, num_devices: int) -> tuple[int, int]:
    """(seed parts, env parts): the most devices used with parts dividing the counts, seed
    parts as large as possible among those (seed sharding needs no communication)."""
    if num_seeds < 1 or num_envs < 1 or num_devices < 1:
        raise ValueError(f"mesh_shape({num_seeds}, {num_envs}, {num_devices}): expected positive counts")
    best = (1, 1)
    for seed_parts in _divisors(num_seeds):
        for env_parts in _divisors(num_envs):
            used = seed_parts * env_parts
            if used <= num_devices and (used, seed_parts) > (best[0] * best[1], best[0]):
                best = (seed_parts, env_parts)
    return best


def make_mesh(num_seeds: int, num_envs: int = 1, devices: Devices = None) -> Mesh:
    """A ``("seeds", "envs")`` mesh over (a prefix of) ``devices`` for this many seeds/envs."""
    devices = select_devices(devices)
    seed_parts, env_parts = mesh_shape(num_seeds, num_envs, len(devices))
    check_host_callback_threads(devices[: seed_parts * env_parts])
    used = seed_parts * env_parts
    if used < len(devices):
        warnings.warn(
            f"{num_seeds} seeds x {num_envs} envs use {used} of {len(devices)} devices "
            f"(mesh {seed_parts} x {env_parts}); choose counts that divide evenly to use all",
            stacklevel=2,
        )
    return Mesh(np.asarray(devices[:used]).reshape(seed_parts, env_parts), (SEED_AXIS, ENV_AXIS))


def _as_mesh(mesh_or_devices, num_seeds: int, num_envs: int = 1) -> Mesh:
    if isinstance(mesh_or_devices, Mesh):
        return mesh_or_devices
    return make_mesh(num_seeds, num_envs, mesh_or_devices)


def seed_sharding(mesh: Mesh) -> NamedSharding:
    """Leading axis split over ``seeds``, the rest replicated."""
    return NamedSharding(mesh, PartitionSpec(SEED_AXIS))


def _place(leaf, sharding: NamedSharding) -> jax.Array:
    """A global array with this sharding from data every process holds in full (works on
    one host and on many; ``jax.device_put`` of host data is single-process only)."""
    if jax.process_count() == 1:
        return jax.device_put(leaf, sharding)
    data = np.asarray(leaf)
    return jax.make_array_from_callback(data.shape, sharding, lambda index: data[index])


def shard_seeds(tree: Any, mesh_or_devices: Mesh | Devices = None) -> Any:
    """Every leaf of ``tree`` (leading seed axis) placed with its seed axis split over the
    mesh's ``seeds`` axis; e.g. the keys before ``train(keys)``."""
    leaves = jax.tree.leaves(tree)
    num_seeds = int(np.shape(leaves[0])[0]) if leaves else 1
    mesh = _as_mesh(mesh_or_devices, num_seeds)
    sharding = seed_sharding(mesh)
    return jax.tree.map(lambda leaf: _place(leaf, sharding), tree)


def _runner_specs(runner, mesh: Mesh):
    """PartitionSpecs for a RunnerState with a leading seed axis: environment states and
    observations also split their second (environment) axis over ``envs``."""
    env_parts = mesh.shape[ENV_AXIS]

    def env_spec(leaf):
        shape = np.shape(leaf)
        if env_parts > 1 and len(shape) >= 2 and shape[1] % env_parts == 0:
            return PartitionSpec(SEED_AXIS, ENV_AXIS)
        return PartitionSpec(SEED_AXIS)

    seed_only = lambda leaf: PartitionSpec(SEED_AXIS)  # noqa: E731
    return runner.replace(
        params=jax.tree.map(seed_only, runner.params),
        opt_state=jax.tree.map(seed_only, runner.opt_state),
        env_state=jax.tree.map(env_spec, runner.env_state),
        observation=jax.tree.map(env_spec, runner.observation),
        key=seed_only(runner.key),
        update_index=seed_only(runner.update_index),
        hparams=jax.tree.map(seed_only, runner.hparams),
    )


def runner_shardings(runner, mesh: Mesh):
    """``NamedSharding`` per leaf of a (seed-batched) ``RunnerState`` (or its eval_shape)."""
    return jax.tree.map(
        lambda spec: NamedSharding(mesh, spec),
        _runner_specs(runner, mesh),
        is_leaf=lambda x: isinstance(x, PartitionSpec),
    )


def shard_runner(runner, mesh: Mesh):
    """Place a seed-batched ``RunnerState`` (device or host arrays, e.g. restored from a
    checkpoint) on the mesh."""
    return jax.tree.map(_place, runner, runner_shardings(runner, mesh))


def constrain_runner(runner, mesh: Mesh):
    """Inside ``jit``: pin a seed-batched ``RunnerState`` to the mesh layout."""
    return jax.lax.with_sharding_constraint(runner, runner_shardings(runner, mesh))


def make_sharded_train(config, env, env_params=None, *, devices: Devices = None, **make_train_kwargs) -> Callable:
    """``make_train`` whose ``train(keys)`` runs over a ``("seeds", "envs")`` mesh of
    ``devices`` (default: all visible). Same arguments and result as ``make_train``; the
    result's arrays are sharded global arrays (``np.asarray`` gathers them on one host)."""
    programs: dict[int, tuple[Mesh, Callable]] = {}

    def train(keys):
        keys = raw_seed_keys(keys)
        num_seeds = int(keys.shape[0])
        if num_seeds not in programs:
            mesh = make_mesh(num_seeds, config.num_envs, devices)
            programs[num_seeds] = (
                mesh,
                make_train(
                    config,
                    env,
                    env_params,
                    runner_constraint=lambda runner: constrain_runner(runner, mesh),
                    **make_train_kwargs,
                ),
            )
        mesh, inner = programs[num_seeds]
        return inner(shard_seeds(keys, mesh))

    return train


def describe_mesh(mesh: Mesh) -> dict:
    return {
        "shape": {name: int(size) for name, size in mesh.shape.items()},
        "devices": [str(device) for device in mesh.devices.ravel()],
        "processes": jax.process_count(),
        "total_devices": math.prod(mesh.devices.shape),
    }
