"""An API worker's waitress threads, grown as watches open and shrunk as they end.

Every watch and followed log holds a server thread for its whole life. Flow control
(api/flow_control.py) needs a thread for every seat, queued request and spare answer
besides the watches, so a worker started one thread per possible watch as well: ~400
threads with 256 watch slots, ~16 KB of memory each while idle (docs/benchmarks.md,
run AA), most of them never used. Instead the worker starts with the threads flow
control needs without watches and one STEP more. As the long-running slots in use
change it keeps one to three steps of threads beyond them: it grows to a step beyond
the slots in use as soon as they reach it, and stops threads only once three steps
are spare (a watch that ends and reconnects does not stop and start threads). It never
goes past what every slot in use would need.
"""
import math
import threading

STEP = 32        # threads started or stopped at a time


class ThreadBudget:
    def __init__(self, base, ceiling, step=STEP):
        """base: threads needed with no watch open; ceiling: with every slot in use."""
        self.base, self.ceiling, self.step = base, max(base, ceiling), step
        self.threads = self.wanted(0)
        self.resizes = 0
        self.failures = 0        # resizes that raised (threads could not be started)
        self._dispatcher = None
        self._lock = threading.Lock()

    def wanted(self, held):
        """Threads for `held` long-running requests: enough for them and everything else,
        and a step's worth more, in whole steps, at most the ceiling."""
        return min(self.ceiling, self.base + self.step * math.ceil((held + self.step) / self.step))

    @classmethod
    def of(cls, flow, step=STEP):
        """The budget of a FlowControl with both its limits on (else None: fixed threads)."""
        base = flow.threads_without_watches()
        return None if base is None else cls(base, flow.threads_needed(), step)

    def attach(self, dispatcher, flow):
        """Resize `dispatcher` (waitress's ThreadedTaskDispatcher, started with
        self.threads) as `flow`'s long-running slots are taken and given back."""
        self._dispatcher = dispatcher
        flow.observe_long_running(lambda: self.held_changed(flow.long_running_held))

    def held_changed(self, held):
        """Flow control's long-running slots in use changed: `held()` counts them (read
        under this budget's lock, so the last resize always sees the last count)."""
        with self._lock:
            want = self.wanted(held())
            if want > self.threads or want + 2 * self.step <= self.threads:
                if self._dispatcher is not None:
                    # Starting threads under its lock takes ~3 ms for a step; stopping
                    # makes threads end as they finish their task (a watch's, at its end).
                    try:
                        self._dispatcher.set_thread_count(want)
                    except Exception:
                        # (RuntimeError: can't start new thread.) Counted, not taken as
                        # done: the next change of the watches in use tries again. Waitress
                        # counts a thread it failed to start as running (it records it
                        # first), so each such failure leaves the pool one thread short.
                        self.failures += 1
                        raise
                self.threads = want
                self.resizes += 1
