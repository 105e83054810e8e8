"""shepherd_ha/backoff.py: the doubling delays every retry loop waits."""
import threading

import pytest

from shepherd_ha.backoff import Backoff, doubling


def test_doubling_starts_at_first_doubles_and_stops_at_the_cap():
    assert [doubling(0.5, 10.0, n) for n in range(7)] == [0.5, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert doubling(0.05, 10.0, 10 ** 6) == 10.0        # a long failure streak neither overflows nor hangs
    assert doubling(0.5, 10.0, -3) == 0.5


def test_a_backoff_counts_failures_and_a_success_starts_it_over():
    retry = Backoff(0.5, 5.0)
    assert retry.peek() == 0.5 and retry.peek() == 0.5      # peeking counts nothing
    assert [retry.next() for _ in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert retry.failures == 6 and retry.peek() == 5.0
    retry.reset()
    assert retry.next() == 0.5


def test_wait_counts_a_failure_and_returns_at_once_when_stopped():
    stop = threading.Event()
    stop.set()
    retry = Backoff(30.0, 60.0)
    assert retry.wait(stop) is True         # a set stop: no 30 s sleep
    assert retry.peek() == 60.0


@pytest.mark.parametrize("first, cap", [(0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_a_backoff_that_could_spin_or_never_grow_is_refused(first, cap):
    with pytest.raises(ValueError, match="first"):
        Backoff(first, cap)
