"""A de-duplicating work queue with delayed re-queue and per-key backoff.

Keys, not events, are queued: ten changes to one deployment before a worker gets
to it are one reconcile. A key being processed is never handed to a second
worker; if it is added meanwhile, it is processed again once the first is done.
"""
import collections
import heapq
import itertools
import threading
import time


class WorkQueue:
    def __init__(self, base_delay=0.05, max_delay=10.0, clock=time.monotonic):
        self._cond = threading.Condition()
        self._ready = collections.deque()   # keys ready now, oldest first
        self._queued = set()          # keys in _ready
        self._processing = set()
        self._dirty = set()           # added while processing: requeue when done
        self._delayed = []            # heap of (due, seq, key)
        self._seq = itertools.count()
        self._failures = {}
        self._base, self._max = base_delay, max_delay
        self._clock = clock
        self._closed = False

    def __len__(self):
        with self._cond:
            return len(self._ready) + len(self._delayed)

    def add(self, key):
        with self._cond:
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
                self._cond.notify()

    def add_after(self, key, delay):
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            heapq.heappush(self._delayed, (self._clock() + delay, next(self._seq), key))
            self._cond.notify()

    def add_with_backoff(self, key):
        """Re-queue after a transient failure: 50 ms, 100 ms, ... up to max_delay."""
        with self._cond:
            n = self._failures.get(key, 0)
            self._failures[key] = n + 1
        self.add_after(key, min(self._max, self._base * (2 ** n)))

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
                wait = None if deadline is None else deadline - self._clock()
                if self._delayed:
                    until_due = self._delayed[0][0] - self._clock()
                    wait = until_due if wait is None else min(wait, until_due)
                if wait is not None and wait <= 0:
                    if deadline is not None and self._clock() >= deadline:
                        return None
                    continue
                self._cond.wait(wait)

    def done(self, key):
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._dirty.discard(key)
                if key not in self._queued:
                    self._queued.add(key)
                    self._ready.append(key)
                    self._cond.notify()

    def close(self):
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _promote_due(self):
        now = self._clock()
        while self._delayed and self._delayed[0][0] <= now:
            _, _, key = heapq.heappop(self._delayed)
            if key in self._processing:
                self._dirty.add(key)
            elif key not in self._queued:
                self._queued.add(key)
                self._ready.append(key)
