"""Doubling retry delays: the one helper behind every retry loop.

A loop that failed waits `first` seconds, then twice as long after each further
failure, never more than `cap`; a success starts it over. The agent's watches and
writers, the client's replica rotation, the controllers' work queue and the
supervisor of controller threads all retry this way; the kubelet-like restart
policy in agent/backoff.py adds CrashLoopBackOff's rules on top of `doubling`.
"""


def doubling(first, cap, failures):
    """The delay after `failures` earlier failures in a row: first, 2 x first, ... up to cap."""
    return float(min(cap, first * 2 ** min(max(failures, 0), 62)))


class Backoff:
    """The delays of one retry loop.

    `peek()` is the delay the next failure waits (for a message that says so),
    `next()` takes it and counts the failure, `reset()` follows a success."""

    def __init__(self, first, cap):
        if not 0 < first <= cap:
            raise ValueError("a backoff needs 0 < first (%r) <= cap (%r)" % (first, cap))
        self.first, self.cap = float(first), float(cap)
        self.failures = 0

    def peek(self):
        return doubling(self.first, self.cap, self.failures)

    def next(self):
        delay = self.peek()
        self.failures += 1
        return delay

    def reset(self):
        self.failures = 0

    def wait(self, stop):
        """Count a failure and wait its delay on `stop` (a threading.Event); True if stopped."""
        return stop.wait(self.next())
