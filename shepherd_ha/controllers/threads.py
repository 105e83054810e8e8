"""The threads of one controller epoch, restarted when one dies.

A controller loop catches what one key or one change throws; a thread can still
die (an exception past those guards, a BaseException). That must never be
silent: the thread's end is logged with its cause, `check()` (the manager's tick)
restarts it, counts the restart in `ControllerFaults` and calls its `on_restart`
(re-check every key: whatever the thread was doing may be lost). A thread dying
again soon after a restart waits longer each time (RESTART_DELAY doubling up to
RESTART_MAX), so a crash loop does not spin; until it is back, `status()` lists it
as dead and the manager does not claim its controllers are active.
"""
import logging
import threading
import time

from ..backoff import Backoff
from .faults import describe_error

log = logging.getLogger("shepherd_ha.controllers")

RESTART_DELAY = 0.1
RESTART_MAX = 30.0
STABLE = 60.0            # a thread that ran this long before dying starts the backoff over


class _Supervised:
    __slots__ = ("name", "target", "on_restart", "thread", "started", "error", "due", "delay", "backoff")

    def __init__(self, name, target, on_restart):
        self.name, self.target, self.on_restart = name, target, on_restart
        self.thread = None
        self.started = None
        self.error = None        # why it ended last, once it did
        self.due = None          # when it is restarted, once seen dead
        self.delay = 0.0        # before the pending restart
        self.backoff = Backoff(RESTART_DELAY, RESTART_MAX)


class SupervisedThreads:
    def __init__(self, stop, faults, clock=time.monotonic):
        self.stop = stop
        self.faults = faults
        self.clock = clock
        self._lock = threading.Lock()
        self._threads = {}

    def spawn(self, name, target, on_restart=None):
        """Run target(stop) on a thread called `name`; on_restart(name) runs before a restart."""
        entry = _Supervised(name, target, on_restart)
        with self._lock:
            self._threads[name] = entry
        self._start(entry)

    def _start(self, entry):
        entry.started = self.clock()
        entry.thread = threading.Thread(target=self._run, args=(entry,), name=entry.name, daemon=True)
        entry.thread.start()

    def _run(self, entry):
        try:
            entry.target(self.stop)
        except BaseException as exc:      # noqa: B036 - whatever ends it is reported, then it is restarted
            entry.error = describe_error(exc)
            log.critical("controller thread %s died: %s", entry.name, entry.error, exc_info=exc)
            return
        if not self.stop.is_set():
            entry.error = "returned while the controllers were still running"
            log.critical("controller thread %s %s", entry.name, entry.error)

    def check(self):
        """Restart the threads that died (not after stop). Returns the names restarted."""
        if self.stop.is_set():
            return []
        now = self.clock()
        restarted = []
        with self._lock:
            entries = list(self._threads.values())
        for entry in entries:
            if entry.thread.is_alive():
                continue
            if entry.due is None:
                if now - entry.started < STABLE:
                    entry.delay = entry.backoff.next()
                else:
                    entry.backoff.reset()
                    entry.delay = 0.0
                entry.due = now + entry.delay
                if entry.delay > RESTART_DELAY:
                    log.error("controller thread %s died again within %.0fs of its start; restarting it in %.1fs",
                              entry.name, STABLE, entry.delay)
            if now < entry.due or self.stop.is_set():
                continue
            entry.due = None
            self.faults.thread_restarted(entry.name, entry.error)
            if entry.on_restart is not None:
                try:
                    entry.on_restart(entry.name)
                except Exception:
                    log.exception("preparing the restart of controller thread %s failed", entry.name)
            log.error("controller thread %s restarted (it died: %s)", entry.name, entry.error)
            self._start(entry)
            restarted.append(entry.name)
        return restarted

    def dead(self):
        with self._lock:
            return sorted(e.name for e in self._threads.values() if not e.thread.is_alive())

    def __len__(self):
        with self._lock:
            return len(self._threads)
