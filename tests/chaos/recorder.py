"""The run's history as JSON lines (format: the shared contract in tests/chaos/checker.py's
docs and the brief): one line per operation, then the final state lines.

Thread-safe: every client thread records through one Recorder. Times are seconds of
time.monotonic() since the recorder was made (one clock for the whole run)."""
import itertools
import json
import threading
import time


class Recorder:
    def __init__(self, path):
        self.path = path
        self.t0 = time.monotonic()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._fh = open(path, "w")
        self.counts = {}             # (op, outcome) -> n

    def now(self):
        return time.monotonic() - self.t0

    def next_id(self):
        with self._lock:
            return next(self._ids)

    def op(self, record):
        """Write one operation record (a dict in the history format)."""
        with self._lock:
            key = (record["op"], record["outcome"])
            self.counts[key] = self.counts.get(key, 0) + 1
            self._fh.write(json.dumps(record, sort_keys=True) + "\n")

    def line(self, record):
        """Write a final-state line ({"final": ...}, {"final_generated": ...}, {"quiescence": ...})."""
        with self._lock:
            self._fh.write(json.dumps(record, sort_keys=True) + "\n")
            self._fh.flush()

    def close(self):
        with self._lock:
            if not self._fh.closed:
                self._fh.close()

    def outcome_totals(self):
        totals = {}
        for (_, outcome), n in self.counts.items():
            totals[outcome] = totals.get(outcome, 0) + n
        return totals
