"""Controllers yield to node heartbeats: their writes slow down while lease renewals wait.

Kubernetes protects the API from its controllers with client-side rate limits
(kube-controller-manager's --kube-api-qps 20, the scheduler's 50), fixed, so a large
rollout takes as long on an idle cluster as on a busy one. Here the controllers write
at full speed until the replica's `system` priority level (node leases and status,
api/flow_control.py) refuses requests or has its queue full (requests queued for a
moment are normal); then every controller write but the scheduler's (a pod created or
evicted, an event, a status; a binding is one write per pod already created, and it
lets the pod run: pacing the creations paces the whole pipeline without starving it)
takes a token from a bucket whose
rate falls by 30 % at each look that still sees pressure and grows back by a quarter at
each that does not (additive-increase/multiplicative-decrease, as TCP), until it no
longer binds and is lifted. Measured on one 2-core machine with 1,000 hollow nodes
and 10,000 pods (docs/benchmarks.md, run Q): without pacing a third of the renewal
rounds failed and 125 nodes went falsely NotReady; paced, none failed for two minutes,
and pods went Running at ~24/s instead of ~57/s (the rest was the heartbeats' share).

Only this replica's own `system` level is seen: on one machine every replica feels the
same load; on several, the leader's is the one its controllers load most (it applies
every write, and a third of the fleet renews there).
"""
import logging
import threading
import time

log = logging.getLogger("shepherd_ha.controllers")

LOOK_EVERY = 0.5          # seconds between looks at the system level
MIN_RATE = 10.0           # writes/s the controllers keep under any pressure
DECREASE = 0.7            # the rate's factor at a look that sees pressure
INCREASE = 1.25           # ... at a look that does not
LIFT_AFTER = 10.0         # seconds without pressure, with the rate well above use, before it is lifted
BURST_SECONDS = 0.5       # tokens a bucket holds, in seconds of its rate


QUEUE_PRESSURE = 1.0      # the system level's queue this full is pressure (the next one is refused)


class WritePacer:
    """pressure_counts(): (how full the system level's queue is, 0 to 1; requests refused
    so far). take(n) blocks until n writes may go; `chunk` is how many writes of a batch
    to send at once while paced (the rest wait for their tokens)."""

    chunk = 25

    def __init__(self, pressure_counts, clock=time.monotonic, sleep=time.sleep):
        self._pressure_counts = pressure_counts
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self.rate = None                   # writes/s; None: not paced
        self._tokens = 0.0
        self._filled_at = clock()
        self._looked_at = clock()
        self._refused_seen = pressure_counts()[1]
        self._taken = 0                    # writes since the last look
        self._calm_since = None            # when the looks stopped seeing pressure (paced only)
        self.paced_seconds = 0.0           # total time writers waited here
        self.paced_writes = 0

    @property
    def pacing(self):
        return self.rate is not None

    def take(self, n=1):
        while True:
            with self._lock:
                now = self._clock()
                if now - self._looked_at >= LOOK_EVERY:
                    self._look(now)
                if self.rate is None:
                    self._taken += n
                    return
                self._tokens = min(max(self.rate * BURST_SECONDS, n), self._tokens + (now - self._filled_at) * self.rate)
                self._filled_at = now
                if self._tokens >= n:
                    self._tokens -= n
                    self._taken += n
                    self.paced_writes += n
                    return
                # (at least a millisecond: a wait that rounds to nothing would spin)
                wait = min(LOOK_EVERY, max(0.001, (n - self._tokens) / self.rate))
                self.paced_seconds += wait
            self._sleep(wait)

    def _look(self, now):
        queued, refused = self._pressure_counts()
        used = self._taken / max(now - self._looked_at, 1e-3)        # writes/s since the last look
        pressure = queued >= QUEUE_PRESSURE or refused > self._refused_seen
        before_refused = self._refused_seen
        self._refused_seen, self._taken, self._looked_at = refused, 0, now
        if pressure:
            self._calm_since = None
            before = self.rate
            base = used if self.rate is None else min(self.rate, max(used, MIN_RATE))
            self.rate = max(MIN_RATE, base * DECREASE)
            self._tokens = min(self._tokens, self.rate * BURST_SECONDS)
            if before is None:
                log.info("controllers: node heartbeats are waiting (system level: queue %.0f%% full, %d refused "
                         "since the last look); controller writes paced at %.0f/s",
                         100 * queued, refused - before_refused, self.rate)
            return
        if self.rate is None:
            return
        self.rate *= INCREASE
        if self._calm_since is None:
            self._calm_since = now
        if now - self._calm_since >= LIFT_AFTER and self.rate >= 2 * max(used, MIN_RATE):
            log.info("controllers: no heartbeat waited for %.0f s; controller writes no longer paced", LIFT_AFTER)
            self.rate, self._calm_since = None, None

    def status(self):
        return {"paced": self.pacing, "rateLimit": self.rate, "pacedSeconds": self.paced_seconds,
                "pacedWrites": self.paced_writes}
