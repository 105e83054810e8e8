"""What every drill shares: a report (what was done, figures, verdict), the background
ConfigMap writer with its "no acknowledged write lost" check, and cluster probes over
the HTTP API of a Target. Every wait is bounded by a deadline.
"""
import threading
import time
import uuid

import requests

from shepherd_ha.client import ApiError, ClientError

PROBE_TIMEOUT = 1.5
WRITE_NAMESPACE = "default"


class DrillFailed(Exception):
    """The drill's claim did not hold; the message is the reason printed after FAIL:."""


class Report:
    """Lines of one drill: steps as they happen, figures, then the verdict."""

    def __init__(self, drill, out=print):
        self.drill = drill
        self.out = out
        self.started = time.monotonic()
        self.figures = {}
        self.verdict = None

    def step(self, text):
        self.out("[%s %6.1fs] %s" % (self.drill, time.monotonic() - self.started, text))

    def figure(self, name, value, unit=""):
        self.figures[name] = value
        shown = "%.2f" % value if isinstance(value, float) else str(value)
        self.out("[%s] figure %s = %s%s" % (self.drill, name, shown, unit and " " + unit))

    def finish(self, reason=None):
        self.verdict = "PASS" if reason is None else "FAIL: %s" % reason
        self.out("[%s] %s" % (self.drill, self.verdict))
        return reason is None


def wait_for(what, predicate, timeout, interval=0.1):
    """Poll predicate() until truthy; returns (value, seconds waited) or raises DrillFailed."""
    start = time.monotonic()
    deadline = start + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last, time.monotonic() - start
        if time.monotonic() >= deadline:
            raise DrillFailed("%s: not within %.0fs" % (what, timeout))
        time.sleep(interval)


# ---- probes of single replicas (no failover: we ask that host) ----

def replica_state(target, host):
    """/shepherd/v1/replica of control-plane `host`, or None when it does not answer."""
    try:
        reply = requests.get(target.api_url(host) + "/shepherd/v1/replica", headers=target.headers(),
                             timeout=PROBE_TIMEOUT, verify=target.verify())
        return reply.json() if reply.ok else None
    except (requests.RequestException, ValueError):
        return None


def is_ready(target, host):
    try:
        return requests.get(target.api_url(host) + "/readyz", timeout=PROBE_TIMEOUT,
                            verify=target.verify()).status_code == 200
    except requests.RequestException:
        return False


def leaders(target, hosts=None):
    """{host: term} of the hosts that say they lead."""
    found = {}
    for host in hosts or target.control_planes:
        state = replica_state(target, host)
        if state and state.get("role") == "leader":
            found[host] = state["term"]
    return found


def one_leader(target, hosts=None):
    """The single leader among hosts, or None while there are zero or several."""
    found = leaders(target, hosts)
    return next(iter(found)) if len(found) == 1 else None


def wait_leader(target, hosts, timeout):
    """(leader host among hosts, seconds): exactly one of them leads and it is ready."""
    return wait_for("one ready leader among %s" % ", ".join(hosts),
                    lambda: (lambda h: h if h and is_ready(target, h) else None)(one_leader(target, hosts)),
                    timeout)


def linearizable_read_ok(target, host):
    """True when `host` serves a linearizable read (it needs a leader it can reach)."""
    try:
        return requests.get(target.api_url(host) + "/api/v1/namespaces/" + WRITE_NAMESPACE,
                            headers=target.headers(), timeout=3.0, verify=target.verify()).status_code == 200
    except requests.RequestException:
        return False


def wait_caught_up(target, host, reference_hosts, timeout):
    """Seconds until `host` has applied at least the revision the reference hosts had when we began."""
    revisions = [s["revision"] for s in (replica_state(target, h) for h in reference_hosts) if s]
    goal = max(revisions) if revisions else 0
    _, waited = wait_for("%s catches up to revision %d" % (host, goal),
                         lambda: (lambda s: s and s.get("revision", -1) >= goal and is_ready(target, host))(
                             replica_state(target, host)), timeout)
    return waited


def same_digest(target, hosts, timeout):
    """Wait until every host reports the same revision and store digest (quiet cluster)."""
    def check():
        seen = set()
        for host in hosts:
            try:
                state = requests.get(target.api_url(host) + "/shepherd/v1/replica", params={"digest": "1"},
                                     headers=target.headers(), timeout=PROBE_TIMEOUT,
                                     verify=target.verify()).json()
            except (requests.RequestException, ValueError):
                return None
            seen.add((state.get("revision"), state.get("digest")))
        return seen if len(seen) == 1 else None
    return wait_for("every replica at the same revision and digest", check, timeout)


# ---- the background writer ----

class Writer:
    """Creates ConfigMaps with unique values, one after another, through the failover
    client, and remembers which were acknowledged (201) and when. `check()` reads them
    all back with a linearizable list and names any lost or changed one."""

    def __init__(self, target, drill, interval=0.05, max_writes=20000):
        self.client = target.client(timeout=2.0, retry_deadline=4.0)
        self.run_id = "%s-%s" % (drill, uuid.uuid4().hex[:8])
        self.interval = interval
        self.max_writes = max_writes
        self.acked = {}              # name -> value
        self.ack_times = []          # monotonic time of each ack
        self.failed = 0              # ended with an error: not acknowledged (maybe applied)
        self.errors = {}             # error text -> count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drill-writer", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(15)
        if self._thread.is_alive():
            raise DrillFailed("the background writer did not stop within 15s")

    def _run(self):
        seq = 0
        while not self._stop.is_set() and seq < self.max_writes:
            seq += 1
            name = "%s-%05d" % (self.run_id, seq)
            value = uuid.uuid4().hex
            body = {"metadata": {"name": name, "labels": {"drill-run": self.run_id}}, "data": {"value": value}}
            try:
                self.client.create("configmaps", body, namespace=WRITE_NAMESPACE)
                self.acked[name] = value
                self.ack_times.append(time.monotonic())
            except (ClientError, OSError) as exc:
                self.failed += 1
                key = "%s %s" % (type(exc).__name__, getattr(exc, "code", "") or "")
                self.errors[key.strip()] = self.errors.get(key.strip(), 0) + 1
            self._stop.wait(self.interval)

    def acks_after(self, moment):
        return sum(1 for t in self.ack_times if t > moment)

    def first_ack_after(self, moment, timeout):
        """Seconds from `moment` to the first acknowledged write after it (waits up to timeout)."""
        def first():
            later = [t for t in self.ack_times if t > moment]
            return later[0] if later else None
        when, _ = wait_for("a write acknowledged after the fault", first, timeout, interval=0.05)
        return when - moment

    def gap_around(self, moment):
        """Longest time without an acknowledged write, from the last ack before `moment`
        (the fault) until now: the write outage the fault caused."""
        times = list(self.ack_times)
        before = [t for t in times if t <= moment]
        times = [t for t in times if t >= (before[-1] if before else moment)]
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)

    def check(self, report, timeout=30.0):
        """Every acknowledged ConfigMap is there with its value; raises DrillFailed otherwise."""
        deadline = time.monotonic() + timeout
        reply = None
        while reply is None:
            try:
                reply = self.client.list("configmaps", namespace=WRITE_NAMESPACE,
                                         label_selector="drill-run=%s" % self.run_id)
            except (ApiError, ClientError) as exc:
                if time.monotonic() >= deadline:
                    raise DrillFailed("cannot read the written ConfigMaps back: %s" % exc) from exc
                time.sleep(0.5)
        found = {item["metadata"]["name"]: (item.get("data") or {}).get("value") for item in reply.get("items") or []}
        lost = sorted(n for n in self.acked if n not in found)
        changed = sorted(n for n, v in self.acked.items() if n in found and found[n] != v)
        report.figure("writes acknowledged", len(self.acked))
        report.figure("writes not acknowledged (errors)", self.failed)
        report.figure("objects found (acked + applied-but-unacked)", len(found))
        if self.errors:
            report.step("write errors: %s" % ", ".join("%s x%d" % kv for kv in sorted(self.errors.items())))
        if lost or changed:
            raise DrillFailed("%d acknowledged write(s) lost (%s), %d changed (%s)" % (
                len(lost), ", ".join(lost[:5]), len(changed), ", ".join(changed[:5])))
        if not self.acked:
            raise DrillFailed("no write was acknowledged during the drill")
        report.step("read back all %d acknowledged ConfigMaps with their values" % len(self.acked))

    def close(self):
        self.client.close()
