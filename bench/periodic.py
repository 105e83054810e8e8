"""A sampler thread for the benchmarks: `sample()` at start, every `interval` seconds
(for at most `max_seconds`), and once more at stop."""
import threading
import time


class PeriodicSampler:
    thread_name = "sampler"

    def __init__(self, interval, max_seconds=6 * 3600):
        self.interval = interval
        self.max_seconds = max_seconds
        self.stop_event = threading.Event()
        self._thread = None

    def sample(self):
        raise NotImplementedError

    def start(self):
        self.sample()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self.stop_event.set()
        if self._thread:
            self._thread.join(10)
        self.sample()

    def _run(self):
        deadline = time.monotonic() + self.max_seconds
        while not self.stop_event.wait(self.interval) and time.monotonic() < deadline:
            self.sample()
