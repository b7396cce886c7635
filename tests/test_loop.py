"""The scan driver (purehr.engine.loop) on a toy update: loops of different lengths in one scan,
hooks in program order, stacked hook outputs, a stop from the host, and a swappable host."""

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from purehr.engine.loop import Hook, HostSlot, UpdateLoop, call_host, every, run_updates


@struct.dataclass
class Toy:
    value: jax.Array  # [seeds]
    update_index: jax.Array  # [seeds]


def toy_update(runner: Toy):
    runner = Toy(runner.value * 2 + 1, runner.update_index + 1)
    return runner, {"value": runner.value.astype(jnp.float32), "update": runner.update_index}


class Recorder:
    def __init__(self, stop_at=None):
        self.calls, self.stop_at = [], stop_at

    def on_update(self, loop, metrics):
        self.calls.append((loop, "update", int(metrics["update"][0])))
        return self.stop_at is None or int(metrics["update"][0]) < self.stop_at

    def on_checkpoint(self, loop, runner, evaluation, showcase):
        self.calls.append((loop, "checkpoint", int(runner.update_index[0])))


def make_program(host: HostSlot):
    def log(loop):
        return Hook(
            every(1),
            lambda runner, metrics: call_host(lambda m: host.on_update(loop, m), metrics, keep_going=True),
            stops=True,
        )

    def checkpoint(loop):
        def run(runner, _metrics):
            call_host(lambda r: host.on_checkpoint(loop, r, {}, None), runner)
            return runner.value.astype(jnp.float32)  # stacked: NaN where not due

        return Hook(every(2), run, at_start=True)

    loops = [
        UpdateLoop(toy_update, 3, (log("a"), checkpoint("a"))),
        UpdateLoop(toy_update, 5, (log("b"), checkpoint("b"))),
    ]

    def program(first: Toy, second: Toy):
        return run_updates(loops, [first, second], 5)

    return jax.jit(program)


def start(update_index=0):
    return Toy(jnp.zeros(2, jnp.int32), jnp.full(2, update_index, jnp.int32))


def test_loops_of_different_lengths_run_their_hooks_in_order():
    recorder = Recorder()
    runners, outputs = make_program(HostSlot(recorder))(start(), start())
    assert [int(r.update_index[0]) for r in runners] == [3, 5]
    assert [int(r.value[0]) for r in runners] == [7, 31]
    assert recorder.calls[:4] == [
        ("a", "checkpoint", 0),
        ("b", "checkpoint", 0),
        ("a", "update", 1),
        ("b", "update", 1),
    ]
    assert [c for c in recorder.calls if c[0] == "a"] == [
        ("a", "checkpoint", 0),
        ("a", "update", 1),
        ("a", "update", 2),
        ("a", "checkpoint", 2),
        ("a", "update", 3),
    ]
    checkpoints_b = np.asarray(outputs[1].hooks[1][:, 0])
    assert np.array_equal(np.isnan(checkpoints_b), [True, False, True, False, True])
    assert checkpoints_b[1] == 3 and checkpoints_b[3] == 15
    assert np.asarray(outputs[0].metrics["update"][:, 0]).tolist() == [1, 2, 3, 0, 0]  # 0: no update
    assert float(outputs[0].at_start[1][0]) == 0.0


def test_a_stop_from_the_host_and_a_new_target_without_recompiling():
    slot = HostSlot(Recorder(stop_at=2))
    program = make_program(slot)
    runners, _ = program(start(), start())
    assert [int(r.update_index[0]) for r in runners] == [2, 2]
    slot.target = other = Recorder()  # the same compiled program, another host
    runners, _ = program(start(3), start(1))  # resumed: a has nothing left, b runs 4 more
    assert program._cache_size() == 1
    assert [int(r.update_index[0]) for r in runners] == [3, 5]
    assert all(call[0] == "b" for call in other.calls)
    assert ("b", "checkpoint", 0) not in other.calls  # not untrained: no start checkpoint


def test_a_hook_that_replaces_the_runner_is_where_the_next_update_continues_from():
    """PBT's hook: at every second update (and at the start, untrained) the runner becomes
    value + 100; the updates after it continue from that value (v -> 2v + 1 by hand)."""
    jump = Hook(
        every(2), lambda runner, _m: runner.replace(value=runner.value + 100), at_start=True, replaces_runner=True
    )
    loop = UpdateLoop(toy_update, 4, (jump,))
    start = Toy(jnp.zeros(2, jnp.int32), jnp.zeros(2, jnp.int32))
    (final,), (output,) = jax.jit(lambda r: run_updates([loop], [r], 4))(start)
    # 0 -> +100 at the start = 100; u1: 201; u2: 403 -> +100 = 503; u3: 1007; u4: 2015 -> +100 = 2115
    assert np.asarray(final.value).tolist() == [2115, 2115]
    assert np.asarray(output.metrics["value"][:, 0]).tolist() == [201, 403, 1007, 2015]  # before each jump
    assert output.hooks == (None,) and output.at_start == (None,)
    # resumed from the state saved after update 2 (after its jump): no start hook, the same end
    resumed = Toy(jnp.full(2, 503, jnp.int32), jnp.full(2, 2, jnp.int32))
    (again,), _ = jax.jit(lambda r: run_updates([loop], [r], 4))(resumed)
    assert np.asarray(again.value).tolist() == [2115, 2115]
