"""What a protocol run will cost: the time left, from what each task will do (``TaskPlan``)
and what the compiled program's scan iterations and checkpoints cost as they are timed
(``RunEstimate``), which the progress line (``purehr.run.host.progress``) shows; and, before
anything is compiled, the memory its training needs (``TrainingMemory``) against the machine's
(``machine_memory``). Nothing here prints.
"""

from __future__ import annotations

import math
import os
import resource
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import jax
import numpy as np

from purehr.envs.spaces import flat_dim


@dataclass(frozen=True)
class TaskPlan:
    """What one task will do, from its config: ``num_updates`` updates of ``batch_size``
    environment steps per seed, and at which update indices a checkpoint follows (full or
    quick evaluation), by the rules of ``runner.TaskSetup``."""

    batch_size: int
    num_updates: int
    total_steps: int  # num_updates * batch_size (the rounded-up budget)
    full_checkpoints: tuple[int, ...]
    quick_checkpoints: tuple[int, ...]

    @classmethod
    def from_config(cls, config, protocol=None) -> TaskPlan:
        """``config``'s updates checkpointed as ``protocol`` (its ``ProtocolSettings``) says;
        ``protocol=None``: a training without checkpoints (``make_train``, the seed API)."""
        batch, updates = config.batch_size, config.num_updates
        interval = 1 if protocol is None else protocol.checkpoint_interval
        full, quick = [], []
        for update in range(1, updates + 1 if protocol is not None else 1):
            crossed = (update * batch) // interval > ((update - 1) * batch) // interval or update == updates
            if not crossed:
                continue
            is_full = update == updates or (update * batch // interval) % protocol.full_eval_interval == 0
            (full if is_full else quick).append(update)
        return cls(batch, updates, updates * batch, tuple(full), tuple(quick))

    def checkpoints_after(self, done_updates: int) -> tuple[int, int]:
        """(full, quick) checkpoints still to come once ``done_updates`` updates are done."""
        return (
            sum(u > done_updates for u in self.full_checkpoints),
            sum(u > done_updates for u in self.quick_checkpoints),
        )


def _typical(values) -> float:
    """The mean, leaving out the first value while later ones exist (it carries warm-up: the
    first run of that branch of the program)."""
    values = list(values)
    return float(np.mean(values[1:] or values))


class RunEstimate:
    """The training time left, from what the program's scan iterations cost.

    Each scan iteration runs one update of every task still training, and XLA computes those
    updates before it makes their callbacks, which then arrive within a millisecond of each
    other (0.9 ms apart in results/protocol). So the time between two callbacks is not one
    task's: it is timed per iteration (first update callback to the next iteration's first),
    for each set of tasks still training, and a checkpoint's cost is what its iteration took
    beyond a plain one of the same set. Timing it per task gave the first task of an iteration
    the whole iteration and the next task nothing; when the first one's budget ran out first
    (swing 25 updates, hrv 49 at ``--steps 100000``) the time left fell to about 0, then grew
    back as hrv's own cost arrived, and the percentage went 95 -> 98 -> 92 -> 94.

    A set of tasks not timed yet (what is left when a task finishes) borrows the cost of the
    smallest timed set that holds it, and an untimed checkpoint the first interval's (start-up
    and the step-0 checkpoints): both upper bounds, and ``remaining`` then says it is not settled.
    """

    def __init__(self, plans: dict[str, TaskPlan], done_updates: dict[str, int]):
        self.plans = plans
        self.left_at_start = {task: max(0, plan.num_updates - done_updates[task]) for task, plan in plans.items()}
        self.seen = {task: 0 for task in plans}  # update callbacks since start
        self.iteration = -1  # the latest iteration whose first update callback has come
        self.iteration_started: float | None = None
        self.pending: list[tuple[str, bool]] = []  # (task, full) checkpoints since then
        self.plain: dict[frozenset, deque[float]] = {}  # latest 50 (+1) iterations without checkpoints
        self.with_checkpoints: list[tuple[frozenset, float, tuple[tuple[str, bool], ...]]] = []
        self.initial: float | None = None  # the first interval: start-up, step-0 checkpoints, first updates

    def start(self, now: float) -> None:
        self.iteration_started = now

    def training(self, iteration: int) -> frozenset:
        """The tasks that update in ``iteration`` (0: the first update of this program)."""
        return frozenset(task for task, left in self.left_at_start.items() if left > iteration)

    def on_update(self, task: str, now: float) -> None:
        index, self.seen[task] = self.seen[task], self.seen[task] + 1
        if index <= self.iteration:
            return  # not the first callback of its iteration
        seconds = now - self.iteration_started
        if self.iteration < 0:
            self.initial = seconds
        elif self.pending:
            self.with_checkpoints.append((self.training(index), seconds, tuple(self.pending)))
        else:
            self.plain.setdefault(self.training(index), deque(maxlen=51)).append(seconds)
        self.iteration, self.iteration_started, self.pending = index, now, []

    def on_checkpoint(self, task: str, full: bool) -> None:
        if self.iteration >= 0:  # the step-0 checkpoints are part of the first interval
            self.pending.append((task, full))

    def iteration_seconds(self, training: frozenset) -> tuple[float | None, bool]:
        """Seconds of a plain iteration of ``training`` and whether that set was timed."""
        if self.plain.get(training):
            return _typical(self.plain[training]), True
        supersets = sorted((s for s in self.plain if s > training), key=len)
        if supersets:
            return _typical(self.plain[supersets[0]]), False
        with_checkpoints = [seconds for s, seconds, _ in self.with_checkpoints if s >= training]
        return (float(np.mean(with_checkpoints)), False) if with_checkpoints else (None, False)

    def checkpoint_seconds(self, task: str, full: bool) -> tuple[float | None, bool]:
        """A checkpoint's cost beyond its iteration's and whether one was timed (an untimed
        kind borrows the task's other kind; neither timed: the first interval's)."""
        shares: dict[tuple[str, bool], list[float]] = {}
        for training, seconds, checkpoints in self.with_checkpoints:
            if self.plain.get(training):
                share = max(0.0, seconds - _typical(self.plain[training])) / len(checkpoints)
                for checkpoint in checkpoints:
                    shares.setdefault(checkpoint, []).append(share)
        values = shares.get((task, full)) or shares.get((task, not full))
        return (_typical(values), True) if values else (self.initial, False)

    def remaining(self, checkpointed: dict[str, int]) -> tuple[float | None, bool]:
        """(seconds of training left, or None before anything was timed; settled: no upper bound
        in it), ``checkpointed`` holding each task's update count at its latest checkpoint."""
        total, settled = 0.0, True
        thresholds = sorted({0, *self.left_at_start.values()})
        for low, high in zip(thresholds, thresholds[1:]):
            count = high - max(low, self.iteration + 1)  # iterations of the tasks with >= high left
            if count > 0:
                seconds, timed = self.iteration_seconds(
                    frozenset(t for t, n in self.left_at_start.items() if n >= high)
                )
                if seconds is None:
                    return None, False
                total, settled = total + count * seconds, settled and timed
        for task, plan in self.plans.items():
            for count, full in zip(plan.checkpoints_after(checkpointed[task]), (True, False)):
                if count:
                    seconds, timed = self.checkpoint_seconds(task, full)
                    if seconds is None:
                        return None, False
                    total, settled = total + count * seconds, settled and timed
        return total, settled


@dataclass(frozen=True)
class TrainingMemory:
    """A lower bound of the bytes one task's training holds at once, for all its seeds: its
    state as ``init`` builds it (every leaf: parameters, optimiser moments, environments, a
    replay buffer: exact, from ``jax.eval_shape``, nothing allocated) and what an update holds
    beyond it: the algorithm's own ``working_set_bytes`` where it has one (PPO: gradients, a
    rollout's transitions, one minibatch's activations and their gradients), else one more copy
    of the network (its gradients) and one batch of transitions. XLA needs more (temporaries,
    the evaluations), never less: what exceeds the machine's memory cannot run, and used to hang
    at 0% CPU in the first allocation instead of failing."""

    task: str
    seeds: int
    parameters: int
    state: int  # every leaf of the state: parameters, optimiser, environments, buffers
    activations: int  # what an update holds beyond the state: gradients, transitions, activations
    network: str  # the config fields that size the parameters, as given
    buffers: str = ""  # the config fields that size a replay buffer, as given (SAC's buffer_size)

    @property
    def total(self) -> int:
        return self.state + self.activations

    @property
    def layers(self) -> str:
        names = [part.partition("=")[0] for part in self.network.split(", ")]
        return ", ".join(name for name in names if _sizes_layers(name) or name.endswith("_width")) or "the networks"

    @property
    def ways_out(self) -> str:
        """What to lower, by the fields of this entry's own algorithm (a replay buffer first:
        it is most of an off-policy state)."""
        smaller = [f"a smaller replay buffer ({self.buffers})"] if self.buffers else []
        return ", ".join([*smaller, f"smaller layers ({self.layers})", "fewer environments (num_envs)"]) + (
            " or fewer seeds"
        )

    @classmethod
    def of(cls, task: str, algorithm, config, observation_size: int, num_seeds: int) -> TrainingMemory:
        state = jax.eval_shape(algorithm.init, jax.random.PRNGKey(0))
        parameters = _bytes(algorithm.network_params(state))
        working_set = getattr(algorithm, "working_set_bytes", None)
        if working_set is not None:
            per_seed = working_set(state, observation_size)
        else:  # gradients of the network and one batch of transitions, no fewer
            per_seed = parameters + config.batch_size * (observation_size + TRANSITION_SCALARS) * _float_itemsize()
        return cls(
            task,
            num_seeds,
            parameters * num_seeds,
            _bytes(state) * num_seeds,
            per_seed * num_seeds,
            network_text(config),
            ", ".join(f"{name}={value}" for name, value in config.to_dict().items() if name.endswith("buffer_size")),
        )

    def refusal(self, available: int, where: str, together: int | None = None) -> str:
        """Why this training cannot run on a machine of ``available`` bytes (``where`` says
        which memory); ``together``: every task's need, when the tasks together exceed it."""
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        message = (
            f"{self.task}: training {seeds} needs at least {byte_count(self.total)} of memory: parameters "
            f"{byte_count(self.parameters)} ({self.network}), the training state (parameters, optimiser, "
            f"environments, buffers) {byte_count(self.state)}, gradients and activations {byte_count(self.activations)}"
        )
        if together is not None:
            message += f"; every task of the run together {byte_count(together)}"
        return f"{message}; this machine has {byte_count(available)} ({where}). Expected {self.ways_out}"


TRANSITION_SCALARS = 8
"""A stored transition's scalars besides its observation (action, reward, flags, ...)."""


def network_text(config) -> str:
    """The fields of ``config`` that size its networks, as given: every ``*_hidden`` field, and a
    recurrent policy's width (``actor_hidden=(64, 64), critic_hidden=(64, 64)``)."""
    fields = config.to_dict()
    shown = [f"{name}={value}" for name, value in fields.items() if _sizes_layers(name) and value != ()]
    if fields.get("policy") == "gru":
        shown += ["policy='gru'", f"recurrent_width={fields.get('recurrent_width')}"]
    return ", ".join(shown) or "its networks"


def _sizes_layers(name: str) -> bool:
    """A config field of layer widths: ``actor_hidden``, PQN's ``hidden`` and ``conv_channels``."""
    return name == "hidden" or name.endswith(("_hidden", "_channels"))


def _float_itemsize() -> int:
    return 8 if jax.config.jax_enable_x64 else 4


def _bytes(tree) -> int:
    return sum(math.prod(leaf.shape) * np.dtype(leaf.dtype).itemsize for leaf in jax.tree.leaves(tree))


def byte_count(count: int) -> str:
    """``1.2 PB (1,200,000,000,000,000 bytes)``: readable, and the exact count."""
    scaled, unit = float(count), "bytes"
    for name in ("kB", "MB", "GB", "TB", "PB", "EB"):
        if scaled < 1000:
            break
        scaled, unit = scaled / 1000, name
    shown = f"{count:,} bytes" if unit == "bytes" else f"{scaled:,.1f} {unit} ({count:,} bytes)"
    return shown


def machine_memory() -> tuple[int, str]:
    """(bytes, what they are): the local devices' memory where the backend reports it (GPU,
    TPU), else the host's RAM (a CPU backend's arrays live there)."""
    devices = jax.local_devices()
    try:
        stats = devices[0].memory_stats()
    except Exception:  # a backend without memory statistics
        stats = None
    if stats and stats.get("bytes_limit"):
        count = len(devices)
        return int(stats["bytes_limit"]) * count, f"device memory of {count} x {devices[0].device_kind}"
    available, what = host_memory_limit()
    return available, f"{what}: the {jax.default_backend()} backend reports no device memory"


CGROUP_LIMIT_FILES = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is read: cgroup v2's ``memory.max``, cgroup v1's file."""


def host_memory_limit() -> tuple[int, str]:
    """(bytes, what they are): the least of the host's RAM, a cgroup v2/v1 memory limit and the
    process's ``RLIMIT_AS``/``RLIMIT_DATA``: a container or ``ulimit`` below the RAM kills the
    run (or fails its allocation) at its own limit, not the RAM's."""
    limits = [(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "host RAM")]
    for path in CGROUP_LIMIT_FILES:
        try:
            with open(path) as limit_file:
                text = limit_file.read().strip()
        except OSError:  # no such cgroup version here
            continue
        if text.isdigit():  # v2 writes "max" for none; v1 a huge number, which the RAM undercuts
            limits.append((int(text), f"the cgroup memory limit ({path})"))
    for name in ("RLIMIT_AS", "RLIMIT_DATA"):
        soft = resource.getrlimit(getattr(resource, name))[0]
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append((soft, f"the process's {name} (ulimit)"))
    count, what = min(limits, key=lambda limit: limit[0])
    return int(count), what


def check_training_memory(needs: list[TrainingMemory]) -> None:
    """``ValueError`` when the tasks' training cannot fit in the machine's memory."""
    available, where = machine_memory()
    total = sum(need.total for need in needs)
    if total <= available:
        return
    largest = max(needs, key=lambda need: need.total)
    raise ValueError(largest.refusal(available, where, together=total if len(needs) > 1 else None))


class OutOfMemory(ValueError):
    """XLA's ``RESOURCE_EXHAUSTED`` while a run allocated or trained, told as one line with the
    run's estimate and the ways out (a ``ValueError``: the scripts print it as a usage error)."""


def training_needs(setups, num_seeds: int) -> list[TrainingMemory]:
    """Each ``TaskSetup``'s ``TrainingMemory`` for ``num_seeds`` seeds (shapes only)."""
    return [
        TrainingMemory.of(
            s.name, s.algorithm, s.config, flat_dim(s.env.observation_space(s.env.default_params)), num_seeds
        )
        for s in setups
    ]


def explained_out_of_memory(error: BaseException, needs: Callable[[], list[TrainingMemory]]) -> BaseException:
    """``error`` itself, or for XLA's ``RESOURCE_EXHAUSTED`` an ``OutOfMemory`` naming what ran
    out, the run's estimate (a lower bound: XLA adds temporaries and the evaluations) against
    the machine's memory, and what to lower (the largest task's own fields, or fewer seeds).
    ``needs`` is called only then (it traces the states' shapes)."""
    if "RESOURCE_EXHAUSTED" not in str(error):
        return error
    needs = needs()
    available, where = machine_memory()
    total = sum(need.total for need in needs)
    largest = max(needs, key=lambda need: need.total)
    first = next((line.strip() for line in str(error).splitlines() if "RESOURCE_EXHAUSTED" in line), "")
    tasks = f"; {largest.task} the most, {byte_count(largest.total)}" if len(needs) > 1 else ""
    return OutOfMemory(
        f"out of memory ({first[:200]}): the run's training was estimated at {byte_count(total)} at least"
        f"{tasks}, and XLA needs more (temporaries, the evaluations); this machine has {byte_count(available)} "
        f"({where}). Expected {largest.ways_out}"
    )
