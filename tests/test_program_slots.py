"""A compiled training program is held by one run at a time, through its own host slot: a second
run of the same program in this process waits for the first to let go, and never calls the first
run's recorder (issue 47: no module-level state a second run in the same process could trip on).
No program is compiled here: the slot and its lock are what is tested."""

from __future__ import annotations

import threading
import time

from purehr.engine.loop import HostSlot
from purehr.run.compiled.program import TrainingProgram


class Recorder:
    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls

    def on_update(self, loop: str, metrics: dict) -> None:
        self.calls.append((self.name, loop))


def test_a_second_run_of_the_same_program_waits_and_gets_the_slot_to_itself():
    calls: list = []
    program = TrainingProgram(compiled=lambda: None, slot=HostSlot())
    first_holds, second_started = threading.Event(), threading.Event()
    order: list = []

    def first():
        with program.attached(Recorder("first", calls)):
            first_holds.set()
            second_started.wait(5)
            time.sleep(0.2)  # the second run is waiting for the lock now
            program.slot.on_update("hrv", {"update": 1})
            order.append("first done")

    def second():
        first_holds.wait(5)
        second_started.set()
        with program.attached(Recorder("second", calls)):
            order.append("second holds")
            program.slot.on_update("hrv", {"update": 1})

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert order == ["first done", "second holds"]
    assert calls == [("first", "hrv"), ("second", "hrv")]  # each update reached its own run's recorder
    assert program.slot.target is None  # let go


def test_an_abandoned_program_keeps_its_recorder_and_the_next_run_waits_for_it_to_stop():
    calls: list = []
    program = TrainingProgram(compiled=lambda: None, slot=HostSlot())
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)  # stands for the program a second Ctrl-C left running
    worker.start()
    abandoned = Recorder("abandoned", calls)
    try:
        with program.attached(abandoned):
            program.abandoned = worker
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        pass
    assert program.slot.target is abandoned  # its late callbacks still find a (silenced) recorder
    started = time.perf_counter()  # before the timer starts: a loaded machine only adds to what is waited
    threading.Timer(0.3, stop.set).start()
    with program.attached(Recorder("next", calls)):
        waited = time.perf_counter() - started
        assert not worker.is_alive() and program.abandoned is None
    assert waited >= 0.25
