"""The longest pause the Raft tick thread sees, for /metrics and the replica report.

Measured as the wall time between consecutive starts of PySyncObj's tick (on the
tick thread), nothing subtracted: a tick normally starts every autoTickPeriod
(50 ms) or sooner; anything that holds the thread back (a garbage collection, the
GIL held by another thread, the whole process stopped, a slow apply) shows up as a
longer gap, and a gap near the election timeout costs an election.

A starting store loads its dump and replays its journal inside its first ticks (13.9 s
at 30,000 pods under load): a meter made with `loading=True` keeps those gaps apart
(`startupSeconds`) until `loaded()` (PySyncObj's onReady, the journal applied; that
needs a leader, so at most LOAD_LIMIT after the first tick), so the window maximum,
the histogram and the warning speak of stalls a running replica had.
"""
import bisect
import logging
import threading
import time

log = logging.getLogger(__name__)

BUCKETS = (0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0)
WARN_EVERY = 10.0          # seconds between two warnings of long gaps (the others are counted)
LOAD_LIMIT = 60.0          # seconds after the first tick when gaps count, loaded or not


class TickGapMeter:
    def __init__(self, window=60.0, clock=time.monotonic, warn_after=None, loading=False):
        self.window = window
        self._loading = loading         # the store is still loading its dump and journal
        self._first = None              # when the first tick started
        self.startup = 0.0              # the longest gap while loading
        self._clock = clock
        self.warn_after = warn_after    # a gap this long is logged (None: never)
        self._warned_at = None
        self._unwarned = 0              # long gaps since the last warning
        self._lock = threading.Lock()
        self._last_start = None
        self._window_start = None
        self._window_max = 0.0          # this window's longest gap
        self._previous_max = 0.0        # the window before
        self._counts = [0] * (len(BUCKETS) + 1)
        self._sum = 0.0
        self.longest = 0.0              # since start

    def loaded(self):
        """The dump and journal are loaded and applied: gaps count from the next tick on."""
        with self._lock:
            self._end_loading(self._clock(), "loaded its dump and journal")

    def _end_loading(self, now, why):
        if not self._loading:
            return
        if self._last_start is not None:
            self.startup = max(self.startup, now - self._last_start)
        self._loading = False
        self._last_start = now
        log.info("Raft store %s: the tick's longest pause until then was %.2f s (not counted as a stall)",
                 why, self.startup)

    def tick(self):
        """Called at the start of every tick."""
        now = self._clock()
        with self._lock:
            if self._first is None:
                self._first = now
            if self._loading and now - self._first >= LOAD_LIMIT:
                self._end_loading(now, "not loaded %.0f s after its first tick (no leader yet?)" % LOAD_LIMIT)
                return                  # this tick starts the count
            if self._loading:
                if self._last_start is not None:
                    self.startup = max(self.startup, now - self._last_start)
                self._last_start = now
                return
            self._roll(now)
            if self._last_start is not None:
                self._observe(now - self._last_start)
                if self.warn_after is not None and now - self._last_start >= self.warn_after:
                    self._warn(now - self._last_start, now)
            self._last_start = now

    def _roll(self, now):
        if self._window_start is None:
            self._window_start = now
        elapsed = now - self._window_start
        if elapsed >= self.window:
            # After a whole empty window, the previous one is that empty window.
            self._previous_max = self._window_max if elapsed < 2 * self.window else 0.0
            self._window_max = 0.0
            self._window_start = now - elapsed % self.window

    def _warn(self, gap, now):
        if self._warned_at is not None and now - self._warned_at < WARN_EVERY:
            self._unwarned += 1
            return
        log.warning("the Raft tick thread stood still for %.2f s (the election timeout starts at %.2f s: the "
                    "followers may campaign)%s", gap, self.warn_after,
                    "; %d more such gap(s) since the last warning" % self._unwarned if self._unwarned else "")
        self._warned_at, self._unwarned = now, 0

    def _observe(self, gap):
        self._counts[bisect.bisect_left(BUCKETS, gap)] += 1
        self._sum += gap
        self._window_max = max(self._window_max, gap)
        self.longest = max(self.longest, gap)

    def snapshot(self):
        """Longest gap of the last one to two windows, counting a tick that is late right
        now (a stuck tick thread must show before it ever ticks again), and a histogram."""
        now = self._clock()
        with self._lock:
            self._roll(now)
            current = now - self._last_start if self._last_start is not None else 0.0
            # A tick thread stuck in the load past LOAD_LIMIT never ticks to end it: it shows.
            loading = self._loading and (self._first is None or now - self._first < LOAD_LIMIT)
            startup = max(self.startup, current) if loading else self.startup
            if loading:
                current = 0.0
            cumulative, total = [], 0
            for bound, count in zip(BUCKETS + (float("inf"),), self._counts):
                total += count
                cumulative.append((bound, total))
            return {"maxSeconds": max(self._window_max, self._previous_max, current),
                    "windowSeconds": self.window, "currentSeconds": current,
                    "longestSeconds": max(self.longest, current),
                    "buckets": cumulative, "count": total, "sumSeconds": self._sum,
                    "loading": loading, "startupSeconds": startup}
