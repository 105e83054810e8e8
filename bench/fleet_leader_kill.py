"""A leader SIGKILLed while a hollow fleet runs (bench_scale.py --kill-leader): issue 13's
"nothing acknowledged lost, the new leader's controllers converge" at fleet scale.

While a writer creates ConfigMaps (each with its own Idempotency-Key, round-robin over
the replicas, acknowledged = 201) and the controllers are busy with a new Deployment (a
tenth of the fleet's pods, created 3 s before), the leader's server is SIGKILLed, a new
leader must take over (its controllers active), and the victim is started again. Then
every acknowledged ConfigMap must exist on every replica, every fleet Deployment must own
exactly its replicas in pods (none lost or made twice across the failover), and all of
them must be Running within the convergence timeout.
"""
import json
import threading
import time
import uuid

import requests

import common
from common import KeepAlive, progress

NS = "default"
CONFIGMAPS = "/api/v1/namespaces/%s/configmaps" % NS
PODS = "/api/v1/namespaces/%s/pods" % NS


class AckedWriter(threading.Thread):
    """ConfigMap creates at `rate` per second until stopped; names of the acknowledged ones."""

    def __init__(self, urls, tag, rate=10.0):
        super().__init__(name="acked-writer", daemon=True)
        self.urls, self.tag, self.period = list(urls), tag, 1.0 / rate
        self.acked, self.unknown, self.refused = [], 0, 0
        self.acked_at = []            # monotonic time of each acknowledgement
        self._halt = threading.Event()

    def run(self):
        conns = [KeepAlive(u, 5.0) for u in self.urls]
        n = 0
        while not self._halt.is_set():
            started = time.monotonic()
            name = "kill-%s-%d" % (self.tag, n)
            body = json.dumps({"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": name, "labels": {"kill-run": self.tag}},
                               "data": {"n": str(n)}}).encode()
            headers = {"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex}
            try:
                code, _ = conns[n % len(conns)].request("POST", CONFIGMAPS, body, headers)
            except Exception:  # noqa: BLE001 - outcome unknown: it may or may not exist
                code = None
            if code == 201:
                self.acked.append(name)
                self.acked_at.append(time.monotonic())
            elif code is None or code >= 500:
                self.unknown += 1
            else:
                self.refused += 1
            n += 1
            self._halt.wait(max(0.0, self.period - (time.monotonic() - started)))
        for c in conns:
            c.close()

    def stop(self):
        self._halt.set()
        self.join(30)


def _leader_state(urls, exclude=None, patience=0.0):
    """The leader as the replicas report it, asking each in turn for up to `patience`
    seconds: the leader's own /shepherd/v1/replica when it answers, else a follower's
    word for it ({"id", "term", "reportedBy"}, no controller state). Under load the
    leader's own report can take longer than the 5 s asked for (a 1,000-node fleet and a
    new 3,000-pod Deployment), while its followers still name it."""
    deadline = time.monotonic() + patience
    while True:
        named = None
        for url in urls:
            state = common.get_json(url, "/shepherd/v1/replica", 5.0)
            if not state:
                continue
            if state.get("role") == "leader" and state.get("id") != exclude:
                return state
            if state.get("leader") and state.get("leader") != exclude and named is None:
                named = {"id": state["leader"], "term": state.get("term"), "reportedBy": state.get("id")}
        if named is not None:
            return named
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.2)


def _wait_ready(url, patience):
    """Seconds until the replica's /readyz answers 200 (it knows a leader and has applied
    what is committed), or None. Not LocalCluster.wait_ready: that also wants the leader's
    own report within 0.5 s, which a leader under the fleet does not give."""
    started = time.monotonic()
    while time.monotonic() - started < patience:
        try:
            if requests.get(url + "/readyz", timeout=5).status_code == 200:
                return time.monotonic() - started
        except requests.RequestException:
            pass
        time.sleep(0.5)
    return None


def _exact_counts(url, deployments, patience):
    """{name: (pods not being deleted, replicas)}, counted again until every Deployment
    has exactly its replicas or `patience` s passed: while falsely NotReady nodes lose
    their pods, a count taken once catches replacements not yet created."""
    deadline = time.monotonic() + patience
    while True:
        counts = {}
        for name, replicas in deployments:
            items = _list(url, PODS, "app=" + name)
            counts[name] = (None if items is None else
                            sum(1 for p in items if not (p.get("metadata") or {}).get("deletionTimestamp")), replicas)
        if all(have == want for have, want in counts.values()) or time.monotonic() >= deadline:
            return counts
        time.sleep(2)


def _list(url, path, selector, timeout=60):
    data = common.get_json(url, "%s?labelSelector=%s" % (path, selector), timeout=timeout)
    return None if data is None else data.get("items") or []


def kill_leader_under_fleet(bc, args, tag, deployments, create_deployment, wait_converged):
    """SIGKILL the leader with the fleet, a writer and the controllers busy; the result as
    a dict. deployments: [(name, replicas)] already Running; create_deployment(name,
    replicas); wait_converged(pods, since) -> seconds until `pods` are Running, or None."""
    urls = bc.urls()
    writer = AckedWriter(urls, tag)
    writer.start()
    time.sleep(7)                    # acknowledged writes before the kill
    extra = ("kill-%s" % tag, max(100, args.pods // 10))
    create_deployment(*extra)
    deployments = list(deployments) + [extra]
    progress("Deployment %s of %d pods created; the kill follows in 3 s" % extra)
    time.sleep(3)
    before = _leader_state(urls, patience=60)
    if before is None:
        writer.stop()
        return {"error": "no replica reported itself leader, or named one, within 60 s before the kill"}
    victim, term = before["id"], before["term"]
    progress("killing the leader %s (term %s%s) with SIGKILL" % (
        victim, term, ", named by %s" % before["reportedBy"] if "reportedBy" in before else ""))
    t_kill = time.monotonic()
    bc.cluster.kill(victim)
    others = [u for u, i in zip(urls, bc.ids()) if i != victim]
    new, elected, active = None, None, None
    deadline = t_kill + 60
    while time.monotonic() < deadline and active is None:
        new = _leader_state(others, exclude=victim)
        if new is not None:
            elected = elected or time.monotonic() - t_kill
            if (new.get("controllers") or {}).get("active"):
                active = time.monotonic() - t_kill
        time.sleep(0.05)
    last_ack = max((t for t in writer.acked_at if t < t_kill), default=None)
    progress("new leader %s (term %s) after %s s, its controllers active after %s s; restarting %s" % (
        new and new["id"], new and new["term"], "%.2f" % elected if elected else "-",
        "%.2f" % active if active else "-", victim))
    bc.cluster.start(victim)
    victim_ready = _wait_ready(urls[bc.ids().index(victim)], 300)
    progress("restarted %s: %s" % (victim, "ready after %.1f s" % victim_ready if victim_ready is not None
                                   else "NOT ready within 300 s"))
    time.sleep(10)                   # acknowledged writes after the victim is back
    writer.stop()
    first_ack = min((t for t in writer.acked_at if t > t_kill), default=None)
    converged = wait_converged(sum(n for _, n in deployments), t_kill)
    # Every acknowledged ConfigMap, on a linearizable list from each replica.
    missing = {}
    for url, ident in zip(urls, bc.ids()):
        items = _list(url, CONFIGMAPS, "kill-run=" + tag)
        have = None if items is None else {i["metadata"]["name"] for i in items}
        missing[ident] = None if have is None else sorted(set(writer.acked) - have)
    counts = _exact_counts(urls[0], deployments, patience=120)
    return {"victim": victim, "term": term, "new_leader": new and new["id"], "new_term": new and new["term"],
            "elected_after": elected, "controllers_active_after": active, "victim_ready_after": victim_ready,
            "write_gap": (first_ack - last_ack) if first_ack and last_ack else None,
            "acked": len(writer.acked), "unknown": writer.unknown, "refused": writer.refused,
            "missing": missing, "converged_after_kill": converged, "deployment_pods": counts}


def report(result, say):
    say("leader SIGKILLed while the fleet ran (--kill-leader)")
    if "error" in result:
        say("  %s" % result["error"])
        return False
    say("  victim %s (term %d) -> new leader %s (term %s) after %s s, its controllers active after %s s" % (
        result["victim"], result["term"], result["new_leader"], result["new_term"],
        _s(result["elected_after"]), _s(result["controllers_active_after"])))
    say("  the victim restarted: %s" % ("ready after %.1f s" % result["victim_ready_after"]
                                         if result["victim_ready_after"] is not None else "NOT ready within 300 s"))
    say("  writer: %d creates acknowledged, %d unknown (timeouts, 5xx), %d refused; gap between the last "
        "acknowledgement before the kill and the first after it: %s s" % (
            result["acked"], result["unknown"], result["refused"], _s(result["write_gap"])))
    lost = {i: m for i, m in result["missing"].items() if m}
    unread = [i for i, m in result["missing"].items() if m is None]
    say("  acknowledged creates missing: %s%s" % (
        "none on any replica" if not lost and not unread else
        "; ".join("%s: %d (%s)" % (i, len(m), ", ".join(m[:3])) for i, m in sorted(lost.items())),
        "; not readable on %s" % ", ".join(unread) if unread else ""))
    wrong = {n: c for n, c in result["deployment_pods"].items() if c[0] != c[1]}
    say("  Deployments with a pod count other than their replicas (counted until exact, up to 120 s): %s" % (
        "none (%d checked)" % len(result["deployment_pods"]) if not wrong else
        ", ".join("%s %s of %d" % (n, c[0], c[1]) for n, c in sorted(wrong.items()))))
    say("  all pods Running, the new Deployment's too (checked once the victim was back and the writer had "
        "stopped): %s" % ("%.1f s after the kill" % result["converged_after_kill"]
                          if result["converged_after_kill"] is not None else "NOT within the timeout"))
    return (not lost and not unread and not wrong and result["converged_after_kill"] is not None
            and result["victim_ready_after"] is not None)


def _s(value):
    return "%.3f" % value if value is not None else "-"
