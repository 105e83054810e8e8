"""controllers/threads.py: a controller thread that keeps dying is restarted later each
time (a crash loop does not spin), and one that ran a long while restarts at once."""
import threading

import pytest

from shepherd_ha.controllers import threads as T
from shepherd_ha.controllers.faults import ControllerFaults
from tests.waiting import wait_for


class Clock:
    """Whole milliseconds (a due time may still land one 10 ms step late: float sums)."""
    def __init__(self):
        self.ms = 1_000_000

    def __call__(self):
        return self.ms / 1000


def dies_at_once(stop):
    raise RuntimeError("boom")


def restart_delays(supervised, clock, deaths):
    """The delay before each of `deaths` restarts: how long check() keeps the dead thread down."""
    delays = []
    for _ in range(deaths):
        wait_for("the thread to die", lambda: supervised.dead() == ["crashy"], timeout=5)
        start = clock.ms
        while not supervised.check():
            clock.ms += 10
            assert clock.ms - start < 100_000, "never restarted"
        delays.append((clock.ms - start) / 1000)
    return delays


def test_a_crash_loop_waits_longer_each_time_and_a_stable_run_starts_over():
    clock, stop = Clock(), threading.Event()
    faults = ControllerFaults(clock=clock)
    supervised = T.SupervisedThreads(stop, faults, clock)
    try:
        supervised.spawn("crashy", dies_at_once)
        assert restart_delays(supervised, clock, 4) == pytest.approx([0.1, 0.2, 0.4, 0.8], abs=0.011)
        assert faults.restarts["crashy"] == 4
        # It now runs for longer than STABLE before dying: restarted at once, and the
        # next quick death waits the first delay again.
        wait_for("the thread to die", lambda: supervised.dead() == ["crashy"], timeout=5)
        clock.ms += int(T.STABLE * 1000) + 1000
        assert supervised.check() == ["crashy"]
        assert restart_delays(supervised, clock, 1) == pytest.approx([0.1], abs=0.011)
    finally:
        stop.set()
