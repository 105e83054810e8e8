"""A de-duplicating work queue with delayed re-queue and per-key backoff, shared by
the controllers (keys: objects) and the node agent (keys: pod uids).

Keys, not events, are queued: ten changes to one object before a worker gets to it
are one reconcile. A key being processed is never handed to a second worker; if it
is added meanwhile, it is processed again once the first is done. A delayed add
keeps only the earliest pending time per key. A batched add gathers a burst of
changes to one key into one pass, at most `period` after the first of them.
"""
import collections
import heapq
import itertools
import threading
import time

from .backoff import doubling


class WorkQueue:
    def __init__(self, base_delay=0.05, max_delay=10.0, clock=time.monotonic):
        self._cond = threading.Condition()
        self._failures = {}
        self._base, self._max = base_delay, max_delay
        self._ready = collections.deque()
        self._queued = set()
        self._processing = set()
        self._dirty = set()
        self._delayed = []            # heap of (due, seq, key)
        self._due = {}                # key -> earliest pending due time
        self._seq = itertools.count()
        self._clock = clock
        self._closed = False

    def __len__(self):
        with self._cond:
            return len(self._ready) + len(self._due)

    def _add_locked(self, key):
        if key in self._processing:
            self._dirty.add(key)
        elif key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)
            self._cond.notify()

    def add(self, key):
        with self._cond:
            self._add_locked(key)

    def add_after(self, key, delay):
        with self._cond:
            self._add_after_locked(key, delay)

    def _add_after_locked(self, key, delay):
        if delay <= 0:
            self._add_locked(key)
            return
        due = self._clock() + delay
        pending = self._due.get(key)
        if pending is not None and pending <= due:
            return
        self._due[key] = due
        heapq.heappush(self._delayed, (due, next(self._seq), key))
        self._cond.notify()

    def add_batched(self, key, period):
        """Process `key` within `period` seconds, together with whatever else adds it by
        then: nothing to do when it is already waiting (ready, or due sooner)."""
        with self._cond:
            if key not in self._queued:
                self._add_after_locked(key, period)

    def add_with_backoff(self, key):
        """Re-queue after a transient failure: 50 ms, 100 ms, ... up to max_delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        self.add_after(key, doubling(self._base, self._max, n))

    def forget(self, key):
        """The key succeeded: its next failure starts the backoff again."""
        with self._cond:
            self._failures.pop(key, None)

    def get(self, timeout=None):
        """The next key, or None on timeout or close. Call done(key) after."""
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                self._promote_due()
                if self._ready:
                    key = self._ready.popleft()
                    self._queued.discard(key)
                    self._processing.add(key)
                    return key
                if self._closed:
                    return None
                now = self._clock()
                wait = None if deadline is None else deadline - now
                if self._delayed:
                    until_due = self._delayed[0][0] - now
                    wait = until_due if wait is None else min(wait, until_due)
                if wait is not None and wait <= 0:
                    if deadline is not None and now >= deadline:
                        return None
                    continue
                self._cond.wait(wait)

    def done(self, key):
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                self._add_locked(key)

    def close(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _promote_due(self):
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            due, _, key = heapq.heappop(self._delayed)
            if self._due.get(key) != due:
                continue          # superseded by an earlier add_after
            del self._due[key]
            self._add_locked(key)
