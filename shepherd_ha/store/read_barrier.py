"""Linearizable reads: a barrier command through the Raft log, shared by readers.

A reader may only use a barrier submitted after it arrived: an older barrier
could be ordered before a write that was acknowledged before the read began.
So readers queue up; one barrier is in flight at a time, and when it is applied
locally it releases the readers that were waiting when it was sent, and the next
barrier carries everyone who arrived meanwhile.
"""
import threading

from . import commands
from .raft_node import Unavailable


class _Batch:
    def __init__(self):
        self.done = threading.Event()
        self.error = None


class ReadBarrier:
    def __init__(self, submit, timeout):
        self._submit = submit          # submit(command, timeout) -> result; raises Unavailable
        self._timeout = timeout
        self._cond = threading.Condition()
        self._waiting = None           # batch that the next barrier will release
        self.barriers_sent = 0
        threading.Thread(target=self._loop, name="read-barrier", daemon=True).start()

    def wait(self):
        """Return once this replica has applied everything committed before the call."""
        with self._cond:
            if self._waiting is None:
                self._waiting = _Batch()
                self._cond.notify()
            batch = self._waiting
        if not batch.done.wait(self._timeout + 1.0):
            raise Unavailable("read barrier not confirmed within %.1fs (no quorum?)" % self._timeout,
                              "not-applied")
        if batch.error is not None:
            raise batch.error

    def _loop(self):
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._waiting is not None)
                batch, self._waiting = self._waiting, None
            try:
                self.barriers_sent += 1
                self._submit(commands.barrier(), self._timeout)
            except Unavailable as exc:
                batch.error = Unavailable("linearizable read failed: %s; use resourceVersion=0 for a "
                                          "possibly stale local read" % exc, "not-applied")
            except Exception as exc:  # never leave readers hanging on a bug
                batch.error = exc
            batch.done.set()
