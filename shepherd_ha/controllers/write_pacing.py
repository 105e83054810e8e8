"""Controllers yield to node heartbeats: their writes slow down while renewals wait.

Kubernetes protects the API from its controllers with client-side rate limits
(kube-controller-manager's --kube-api-qps 20, the scheduler's 50), fixed, so a large
rollout takes as long on an idle cluster as on a busy one. Here the controllers write
at full speed until heartbeats suffer: the leader's `system` priority level (node
leases and status, api/flow_control.py) refuses a request or has its queue full, or
some node's heartbeat is late (the node lifecycle controller saw its last renewal
longer ago than the renewal interval plus a quarter of the slack before the grace
period, `heartbeats_at_risk`: 7.5 s for 5 s renewals and a 15 s grace period). Then
every controller write but the scheduler's and the node lifecycle's takes its place in
line for a token of a rate that is lowered at a look (every 0.5 s) that sees pressure,
to 70 % of what the writers used since the last look (at least a floor of 10/s; a
refusal or a full queue lowers it again only after a 2 s hold, late heartbeats at
every look), grows by a quarter at each look that does not, to at most twice what the
writers use (all of the rate while writers wait in line), and is lifted after 30 s
without pressure. (A binding lets a pod already created run:
pacing the creations paces the pipeline without starving it. Marking a node NotReady
must not wait: a renewal during the wait would be missed; its evictions have their
own per-zone pace.)

The two signals (docs/benchmarks.md, run S): a refusal comes first, before any
renewal round fails, but only shows the share of the fleet that renews on the
controllers' API worker, and at 1,000 hollow nodes on one 2-core machine it comes
even with no pod work at all; a late heartbeat covers every node and the node
lifecycle controller's own lag, but comes seconds after the pressure began. Judged by
late heartbeats alone, a rollout went ~1.5x faster and the renewal rounds that failed
tripled (lifted once calm, the limit let a backlog of thousands of creations out at
once); so either signal is pressure. The limit grows only as far as twice what the
writers used: one they did not reach says nothing about what the heartbeats can bear
(as a congestion window is validated, RFC 7661). Measured with the system level alone
(run Q, 1,000 hollow nodes and 10,000 pods): without pacing a third of the renewal
rounds failed and 125 nodes went falsely NotReady; paced, none failed for two
minutes, and pods went Running at ~24/s instead of ~57/s.

Run AC (session 27) found the rollouts of 1,000 hollow nodes stalling for 10-20 s at a
time with the rate at its floor and the pipeline empty: the rate fell at every look
while the writes already let out still arrived (a refusal now lowers it once per
2 s hold; late heartbeats still at every look), writers slept waits computed at the
rate of the moment they queued (now they hold a place in line and go once the tokens
accrued at the current rate reach it), and writers asleep in line counted as using
nothing, so the rate could not grow past 20/s while they waited (now a queue counts
as using all of it).
"""
import logging
import threading
import time

log = logging.getLogger("shepherd_ha.controllers")

LOOK_EVERY = 0.5          # seconds between looks at the pressure
MIN_RATE = 10.0           # writes/s the controllers keep under any pressure
DECREASE = 0.7            # the rate's factor at a look that sees pressure
INCREASE = 1.25           # ... at a look that does not (up to twice what the writers use)
HOLD_AFTER_DECREASE = 2.0  # seconds a refusal or a full queue does not lower the rate again
LIFT_AFTER = 30.0         # seconds without pressure, with the rate well above use, before it is lifted
BURST_SECONDS = 0.5       # tokens a bucket holds, in seconds of its rate


QUEUE_PRESSURE = 1.0      # the system level's queue this full is pressure (the next one is refused)


class Stopped(Exception):
    """take() gave up: the controllers of this epoch are stopping."""


class WritePacer:
    """pressure_counts(): (how full the system level's queue is, 0 to 1; requests refused
    so far). take(n) returns once n writes may go: each caller reserves its place in
    line (first come, first served), and goes once the tokens accrued at the rate of
    the moment reach it, so a batch is never starved by single writes, and a writer
    that queued while the rate was low goes as soon as the rate is raised.
    `chunk` is how many writes of a batch to send at once while paced."""

    chunk = 25

    def __init__(self, pressure_counts, clock=time.monotonic, sleep=None):
        self._pressure_counts = pressure_counts
        self._heartbeats = None            # () -> nodes whose heartbeat is late; None: not watched
        self.heartbeats_at_risk = None     # what it said at the last look
        self._clock = clock
        self._sleep = sleep                # (seconds, stop event or None) -> True if stopped; tests inject one
        self._lock = threading.Lock()
        self.rate = None                   # writes/s; None: not paced
        # The line: tokens reserved by writers so far, and tokens accrued at the rate (both
        # only grow; pacing starts with accrued = reserved). A writer goes once `accrued`
        # reaches its place, or once pacing is lifted.
        self._reserved = 0.0
        self._accrued = 0.0
        self._filled_at = clock()
        self._looked_at = clock()
        self._refused_seen = pressure_counts()[1]
        self._taken = 0                    # writes since the last look
        self._calm_since = None            # when the looks stopped seeing pressure (paced only)
        self._held_until = None            # no decrease for a refusal or full queue before this
        self.paced_seconds = 0.0           # total time writers waited here
        self.paced_writes = 0

    def watch_heartbeats(self, at_risk):
        """Late heartbeats are pressure too: `at_risk()` is how many nodes' heartbeats are
        late (the node lifecycle controller's, set while its epoch runs; None: none)."""
        with self._lock:
            self._heartbeats, self.heartbeats_at_risk = at_risk, None

    @property
    def pacing(self):
        return self.rate is not None

    def take(self, n=1, stop=None, divisible=False):
        """Wait until n writes may go, and return how many may: n, or with `divisible` (a
        batch) at most a chunk while paced, also when this very call's look starts the
        pacing (a whole batch in line would hold every writer behind it). Stopped if
        `stop` (an Event) is set meanwhile."""
        with self._lock:
            now = self._clock()
            self._look_if_due(now)
            if self.rate is None:
                self._taken += n
                return n
            if divisible:
                n = min(n, self.chunk)
            self._taken += n
            self._fill(now)                # before the reservation: its burst is of what came before
            self._reserved += n
            place = self._reserved
            self.paced_writes += n
            wait = self._wait_for(place, now)
        started = now
        while wait > 0:
            # Sleep at most until the next look: the rate may change meanwhile (or be
            # lifted), and this writer's turn with it.
            if self._wait(min(wait, LOOK_EVERY), stop):
                with self._lock:
                    self.paced_seconds += self._clock() - started
                    # Its place goes to those behind it: the line moves on by what it
                    # had not yet been given.
                    self._accrued += max(0.0, min(n, place - self._accrued))
                raise Stopped("controllers stopping")
            with self._lock:
                now = self._clock()
                self._look_if_due(now)
                wait = 0.0 if self.rate is None else self._wait_for(place, now)
                if wait <= 0:
                    self.paced_seconds += now - started
        return n

    def _wait_for(self, place, now):
        """Seconds until the tokens accrued reach `place` at the current rate (lock held)."""
        self._fill(now)
        wait = (place - self._accrued) / self.rate
        return wait if wait > 1e-6 else 0.0      # (not a rounding error's sleep)

    def _fill(self, now):
        """Accrue tokens up to `now` at the current rate; at most a burst beyond what is
        reserved, so an idle bucket does not bank a flood (lock held)."""
        if self.rate is not None:
            self._accrued = min(self._reserved + self.rate * BURST_SECONDS,
                                self._accrued + (now - self._filled_at) * self.rate)
        self._filled_at = now

    def _look_if_due(self, now):
        if now - self._looked_at >= LOOK_EVERY:
            self._look(now)

    def _wait(self, seconds, stop):
        if self._sleep is not None:
            return self._sleep(seconds, stop)
        if stop is not None:
            return stop.wait(seconds)
        time.sleep(seconds)
        return False

    def _look(self, now):
        queued, refused = self._pressure_counts()
        if self._heartbeats is not None:
            self.heartbeats_at_risk = self._heartbeats()
        looks = max(1, int((now - self._looked_at) / LOOK_EVERY))    # looks due since the last one
        if self.rate is None and looks > 2:
            # Nobody wrote for a while (a follower, or quiet controllers): what happened
            # meanwhile says nothing about the writes to come. Start counting again.
            self._refused_seen, self._taken, self._looked_at = refused, 0, now
            return
        self._fill(now)                                               # at the rate until now
        used = self._taken / max(now - self._looked_at, 1e-3)        # writes/s since the last look
        late = bool(self.heartbeats_at_risk)
        refusing = queued >= QUEUE_PRESSURE or refused > self._refused_seen
        before_refused = self._refused_seen
        self._refused_seen, self._taken, self._looked_at = refused, 0, now
        if late or refusing:
            self._calm_since = None
            # A refusal or a full queue is this replica's early, local signal: the writes
            # already let out (and the bindings and status writes they bring) still
            # arrive for a second or two after the rate was lowered, so it is lowered
            # once per hold, not at every look (as TCP halves its window once per round
            # trip). A late heartbeat is the fleet's own, later and graver: every look.
            if not late and self._held_until is not None and now < self._held_until:
                return
            self._held_until = now + HOLD_AFTER_DECREASE
            before = self.rate
            # From what the writers used since the last look, even while some wait in line
            # (then often the floor): lowered from the whole rate instead, a rollout was no
            # faster and lost more renewal rounds (docs/benchmarks.md, run AC).
            base = used if self.rate is None else min(self.rate, max(used, MIN_RATE))
            self.rate = max(MIN_RATE, base * DECREASE)
            if before is None:
                self._accrued, self._filled_at = self._reserved, now       # nothing banked
                log.info("controllers: node heartbeats are waiting (system level: queue %.0f%% full, %d refused "
                         "since the last look; %s nodes' heartbeats late); controller writes paced at %.0f/s",
                         100 * queued, refused - before_refused,
                         "?" if self.heartbeats_at_risk is None else self.heartbeats_at_risk, self.rate)
            else:
                self._accrued = min(self._accrued, self._reserved + self.rate * BURST_SECONDS)
            return
        if self.rate is None:
            return
        # Grows only as far as twice what the writers used: a limit they do not reach says
        # nothing about what the heartbeats can bear, and a backlog arriving later would
        # go out at all of it at once (as a congestion window is validated, RFC 7661).
        if self._reserved - self._accrued > 1e-6 * self.rate:
            used = max(used, self.rate)    # writers waiting in line use all it allows, whatever they reserved lately
        ceiling = 2 * max(used, MIN_RATE)
        grown = self.rate * INCREASE ** min(looks, 20)     # (a paced writer may come back only seconds later)
        self.rate = max(self.rate, min(grown, ceiling))
        if self._calm_since is None:
            self._calm_since = now
        if now - self._calm_since >= LIFT_AFTER and self.rate >= ceiling:
            log.info("controllers: no heartbeat waited for %.0f s; controller writes no longer paced", LIFT_AFTER)
            self.rate, self._calm_since = None, None

    def status(self):
        return {"paced": self.pacing, "rateLimit": self.rate, "pacedSeconds": self.paced_seconds,
                "pacedWrites": self.paced_writes, "heartbeatsAtRisk": self.heartbeats_at_risk}
