"""A token bucket: at most `burst` at once, refilled at `rate` per second (thread-safe).

The one rate limit behind what is best effort and must not flood the store: the
controllers' and the agent's Events (as the kubelet's --event-qps/--event-burst)
and the controllers' fault Events.
"""
import threading
import time


class TokenBucket:
    def __init__(self, rate, burst, clock=time.monotonic):
        if not rate > 0 or not burst >= 1:
            raise ValueError("a token bucket needs a positive rate (%r) and a burst of at least 1 (%r)"
                             % (rate, burst))
        self.rate, self.burst, self.clock = float(rate), float(burst), clock
        self._lock = threading.Lock()
        self._tokens, self._at = self.burst, clock()

    def _refill(self):
        now = self.clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now

    def take(self):
        """Take a token if there is one; False (and nothing taken) if not."""
        with self._lock:
            self._refill()
            if self._tokens < 1.0:
                return False
            self._tokens -= 1.0
            return True

    def wait_time(self):
        """Seconds until a token is there (0.0: now)."""
        with self._lock:
            self._refill()
            return max(0.0, (1.0 - self._tokens) / self.rate)
