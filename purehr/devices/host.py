"""Several CPU devices in one process need one spare thread in XLA's CPU pool; settled here,
before JAX starts its backend, without importing JAX (``import purehr`` calls
:func:`prepare_host_devices`). See benchmarks/README.md, "Several CPU devices on few cores"."""

from __future__ import annotations

import os
import re

FORCED_DEVICES_FLAG = "--xla_force_host_platform_device_count"
COLLECTIVE_TERMINATE_FLAG = "--xla_cpu_collective_call_terminate_timeout_seconds"
COLLECTIVE_TERMINATE_SECONDS = 600


def requested_host_devices(environ=os.environ) -> int:
    """The CPU device count asked for before the backend starts (``XLA_FLAGS``'s
    ``--xla_force_host_platform_device_count`` or ``JAX_NUM_CPU_DEVICES``; 1 when neither)."""
    counts = [int(m) for m in re.findall(rf"{FORCED_DEVICES_FLAG}=(\d+)", environ.get("XLA_FLAGS", ""))]
    number = environ.get("JAX_NUM_CPU_DEVICES", "").strip()
    if number.lstrip("-").isdigit() and int(number) > 0:
        counts.append(int(number))
    return max(counts, default=1)


def cpu_pool_threads(environ=os.environ) -> int:
    """Threads XLA's CPU client gives its pool before counting devices: ``PJRT_NPROC`` when set,
    else the CPUs this process may run on (the pool then has max(this, device count) threads)."""
    value = environ.get("PJRT_NPROC", "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def prepare_host_devices(num_devices: int | None = None, environ=os.environ) -> dict[str, str]:
    """Before JAX's CPU backend starts, make several CPU devices safe for host callbacks.

    Why: XLA's CPU client runs every device's program, and the copy ``io_callback`` makes of
    a large operand (a checkpoint's state), on one thread pool of max(CPUs, devices) threads.
    With as many devices as threads (4 forced devices on a 2-core machine), the device
    running the callback waits for that copy while every other device thread is parked in
    the next collective: no thread is left to do the copy, and XLA aborts after 40 s
    ("Expected 4 threads to join the rendezvous, but only 3 of them arrived"). One thread
    more than devices (``PJRT_NPROC``) removes the deadlock; the collective timeout is also
    raised to 10 min, since a checkpoint callback on a loaded machine may take longer than 40
    s while the other devices wait. Does nothing for one device or when the pool is already
    large enough; returns the variables it changed. ``purehr`` calls it on import."""
    devices = requested_host_devices(environ) if num_devices is None else int(num_devices)
    changed: dict[str, str] = {}
    if devices <= 1:
        return changed
    if cpu_pool_threads(environ) <= devices:
        changed["PJRT_NPROC"] = str(devices + 1)
    flags = environ.get("XLA_FLAGS", "")
    if COLLECTIVE_TERMINATE_FLAG not in flags:
        changed["XLA_FLAGS"] = f"{flags} {COLLECTIVE_TERMINATE_FLAG}={COLLECTIVE_TERMINATE_SECONDS}".strip()
    environ.update(changed)
    return changed
