"""What a fleet run checks besides convergence: leader changes and false NotReady.

- ReplicaSampler polls every replica's /shepherd/v1/replica (role, term, controller
  activations) on a thread. Leader changes are read from the terms: a term that
  moved is an election, whether or not the sampling saw the new leader; the
  leader ids seen and each replica's leader->follower transitions are kept too.
- ReadinessTracker watches the Nodes (one watch) and records every hollow node whose
  Ready condition went from True to anything else. It is *false* NotReady when the
  fleet sent a lease renewal of that node within the grace period before the
  transition (the node kept renewing: the control plane failed to take or see it
  in time, or answered too slowly); when the fleet itself sent nothing in that
  window (its process starved on a busy machine), it is counted as fleet-late
  instead: a fault of the simulator, not of the control plane.
- metric(): one value from a replica's /metrics (None when absent).
"""
import re
import threading
import time

import requests

from shepherd_ha.model.times import parse_seconds
from shepherd_ha.client import Client, ClientError, WatchExpired

from periodic import PeriodicSampler


def get_json(url, path, timeout=2.0):
    try:
        reply = requests.get(url + path, timeout=timeout)
        return reply.json() if reply.status_code == 200 else None
    except (requests.RequestException, ValueError):
        return None


def metrics_text(url, timeout=5.0):
    try:
        reply = requests.get(url + "/metrics", timeout=timeout)
        return reply.text if reply.status_code == 200 else None
    except requests.RequestException:
        return None


def metric(text, name):
    """The value of a metric (summed over its label sets) in Prometheus text, or None."""
    if not text:
        return None
    total, found = 0.0, False
    for m in re.finditer(r"^%s(?:\{[^}]*\})?\s+([-+0-9.eEnaNIf]+)\s*$" % re.escape(name), text, re.M):
        total += float(m.group(1))
        found = True
    return total if found else None


def metric_like(text, pattern):
    """{name: value} of every metric whose name matches `pattern` (a regex)."""
    out = {}
    for m in re.finditer(r"^(%s)(?:\{[^}]*\})?\s+([-+0-9.eE]+)\s*$" % pattern, text or "", re.M):
        out[m.group(1)] = max(out.get(m.group(1), float("-inf")), float(m.group(2)))
    return out


class ReplicaSampler(PeriodicSampler):
    thread_name = "replica-sampler"

    def __init__(self, urls, interval=0.5, timeout=2.0, max_seconds=6 * 3600):
        super().__init__(interval, max_seconds)
        self.urls = list(urls)
        self.timeout = timeout
        self.first, self.last = {}, {}      # url -> replica status
        self.leaders = []                    # (time, replica id, term) each time the leader changed
        self.losses = {u: 0 for u in self.urls}   # leader -> not leader, per replica
        self.samples = 0
        self.misses = 0

    def stop(self):
        super().stop()
        return self.result()

    def sample(self):
        for url in self.urls:
            state = get_json(url, "/shepherd/v1/replica", self.timeout)
            self.samples += 1
            if state is None:
                self.misses += 1
                continue
            prev = self.last.get(url)
            self.first.setdefault(url, state)
            self.last[url] = state
            if prev and prev.get("role") == "leader" and state.get("role") != "leader":
                self.losses[url] += 1
            if state.get("role") == "leader":
                current = (state["id"], state["term"])
                if not self.leaders or self.leaders[-1][1:] != current:
                    self.leaders.append((time.monotonic(),) + current)

    @staticmethod
    def _activations(state):
        return ((state or {}).get("controllers") or {}).get("activations")

    def result(self):
        terms0 = [s["term"] for s in self.first.values()]
        terms1 = [s["term"] for s in self.last.values()]
        term0, term1 = (max(terms0) if terms0 else None), (max(terms1) if terms1 else None)
        per = {}
        for url in self.urls:
            a, b = self.first.get(url), self.last.get(url)
            per[(b or a or {}).get("id", url)] = {
                "term_start": (a or {}).get("term"), "term_end": (b or {}).get("term"),
                "leadership_losses": self.losses[url],
                "controller_activations": (self._activations(a), self._activations(b))}
        return {"term_start": term0, "term_end": term1,
                "elections": None if term0 is None or term1 is None else term1 - term0,
                "leader_changes": max(0, len(self.leaders) - 1), "leaders": self.leaders,
                "per_replica": per, "samples": self.samples, "missed_samples": self.misses}


def ready_status(node):
    for cond in (node.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            return cond.get("status"), cond.get("lastTransitionTime")
    return None, None


class ReadinessTracker:
    BORDER = 2.0     # s: acks this close to a grace period apart count as "at the border"

    def __init__(self, urls, fleet, grace=15.0, timeout=10.0):
        """fleet: a hollow_nodes.NodeFleet (by_name; each node's acks deque of wall times)."""
        self.urls = list(urls)
        self.fleet = fleet
        self.grace = grace
        self.timeout = timeout
        self.stop_event = threading.Event()
        self.ready = {}               # node name -> last Ready status seen
        self.false_not_ready = []     # (node, transition wall time, newest send, newest ack before it, the ack before that)
        self.fleet_late = []          # the same, when the fleet sent no renewal within the grace period
        self.events = 0
        self.native_id = None
        self._thread = None

    def start(self):
        self._thread = threading.Thread(target=self._watch, name="readiness-tracker", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self.stop_event.set()
        if self._thread:
            self._thread.join(10)

    def _watch(self):
        self.native_id = threading.get_native_id()
        client = Client(self.urls, timeout=self.timeout, retry_deadline=30.0)
        rv = None
        deadline = time.monotonic() + 24 * 3600
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            try:
                for event in client.watch("nodes", resource_version=rv, stop=self.stop_event, read_timeout=30):
                    obj = event.get("object") or {}
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        self.events += 1
                        self._observe(obj)
            except WatchExpired:
                rv = None
            except ClientError:
                self.stop_event.wait(1.0)
        client.close()

    def _observe(self, obj):
        name = (obj.get("metadata") or {}).get("name")
        node = self.fleet.by_name.get(name)
        if node is None:
            return
        status, transition = ready_status(obj)
        before = self.ready.get(name)
        self.ready[name] = status
        if before == "True" and status != "True":
            at = parse_seconds(transition) or time.time()
            # Transition times have a 1 s resolution: a send up to 1 s after it still counts as before.
            sends = [t for t in list(node.sends) if t <= at + 1.0]
            acks = [t for t in list(node.acks) if t <= at + 1.0]
            acks.sort()
            row = (name, at, max(sends) if sends else None, acks[-1] if acks else None,
                   acks[-2] if len(acks) > 1 else None)
            if sends and at - max(sends) < self.grace:
                self.false_not_ready.append(row)
            else:
                self.fleet_late.append(row)

    def result(self):
        # Of those, the transitions after an acknowledged renewal within the grace period: the
        # control plane took the renewal and still judged the node late (its view lagged);
        # the others had every renewal of the period refused or timed out.
        # The transition time is truncated to the second: the mark came up to 1 s after it.
        # The controller marks a grace period after it saw the newest heartbeat, so a mark
        # within the grace period of an acknowledged renewal, even at its latest (transition
        # + 1 s), is one the controller made without having seen that renewal. (Before
        # session 17 this compared the truncated time: marks 14-15 s after the newest ack,
        # which every later renewal missed, were counted as lagging views.)
        acked = [r for r in self.false_not_ready if r[3] is not None and r[1] + 1.0 - r[3] <= self.grace]
        # An acked case is at the border when the two newest acks were nearly a grace period
        # apart: every renewal between them failed, and the last got through so late that the
        # controller's deadline (from when it saw the one before) came first. Otherwise the
        # controller's view lagged by about (transition - newest ack).
        border = [r for r in acked if r[4] is not None and r[3] - r[4] >= self.grace - self.BORDER]
        lagged = sorted(round(r[1] - r[3], 1) for r in acked if r not in border)
        return {"false_not_ready": len({r[0] for r in self.false_not_ready}),
                "false_not_ready_events": len(self.false_not_ready),
                "false_not_ready_acked": len(acked),
                "false_not_ready_acked_border": len(border),
                "false_not_ready_acked_lags": lagged,
                "fleet_late_not_ready": len({r[0] for r in self.fleet_late}),
                "not_ready_now": sorted(n for n, s in self.ready.items() if s != "True"),
                "examples": (self.false_not_ready + self.fleet_late)[:5], "node_events": self.events}
