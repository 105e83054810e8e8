#!/usr/bin/env python3
"""Controller failover: how soon the controllers work again after the leader is SIGKILLed
during a scale-up.

A fresh 3-replica LocalCluster in a temp dir, --nodes nodes registered through the API
(their leases renewed by a background thread so they stay Ready). Each round, in a
namespace of its own:

- a writer thread creates unowned, unbound pods at --rate pods/s (failing over between
  replicas), so the scheduler always has something to bind;
- a deployment is scaled from 0 to --scale replicas, and as soon as the request is
  acknowledged the leader is SIGKILLed (LocalCluster.kill): the scale-up is in
  progress (the deployment controller creating pods, the scheduler binding them);
- a watch on pods (every namespace) is open on both survivors from before the kill,
  and both survivors' /shepherd/v1/replica are polled every 5 ms.

Measured from the SIGKILL:
- elected: the first poll where a survivor reports role leader with a higher term;
- active: the first poll where it reports its controllers active with a newer epoch
  (its revision then is R);
- first write: the arrival of the first watch event with revision > R that only a
  controller makes (a pod bound to a node, or a pod created by the deployment); every
  write after R is in the new epoch (old-epoch writes are refused), so this is the new
  leader's controllers at work. Events are timestamped on arrival; the polls make
  "elected" late by up to ~5 ms, which shortens "elected -> first write" by as much.

Then the killed replica is restarted and the round's namespace deleted. Target: first
controller write at most 1 s after the new leader's election. Prints each round, the
median and the max.
"""
import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import say  # noqa: E402

TARGET = 1.0
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
MERGE = {"Content-Type": "application/merge-patch+json"}


def node_body(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "spec": {"unschedulable": False},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "10000"},
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "10000"},
                       "addresses": [{"type": "InternalIP", "address": "192.0.2.1"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Bench", "message": "bench node",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


class Client:
    """requests with failover over the replicas that are up."""

    def __init__(self, urls):
        self.urls = list(urls)
        self.down = set()
        self.session = threading.local()

    def _session(self):
        if not hasattr(self.session, "s"):
            self.session.s = requests.Session()
        return self.session.s

    def request(self, method, path, deadline_s=15.0, ok=(200, 201), **kwargs):
        headers = dict(kwargs.pop("headers", {}) or {})
        headers.setdefault("Idempotency-Key", uuid.uuid4().hex)
        deadline = time.monotonic() + deadline_s
        i = 0
        last = None
        while time.monotonic() < deadline:
            live = [u for u in self.urls if u not in self.down] or self.urls
            url = live[i % len(live)]
            i += 1
            try:
                resp = self._session().request(method, url + path, headers=headers, timeout=1.0, **kwargs)
            except requests.RequestException as exc:
                last = exc
                time.sleep(0.01)
                continue
            if resp.status_code in ok or resp.status_code == 409 and method == "POST":
                return resp
            last = "%d %s" % (resp.status_code, resp.text[:200])
            if resp.status_code != 503:
                raise RuntimeError("%s %s: %s" % (method, path, last))
            time.sleep(0.01)
        raise RuntimeError("%s %s: no answer within %.0f s (%s)" % (method, path, deadline_s, last))


class Renewer(threading.Thread):
    def __init__(self, client, names, period=2.0):
        super().__init__(name="renewer", daemon=True)
        self.client, self.names, self.period = client, names, period
        self.stop = threading.Event()

    def run(self):
        n = 0
        while not self.stop.wait(self.period):
            n += 1
            for name in self.names:
                try:
                    self.client.request("PATCH", LEASES + "/" + name, headers=dict(MERGE), deadline_s=5.0, json={
                        "spec": {"renewTime": "2026-01-01T00:00:00.%06dZ" % n, "leaseTransitions": n}})
                except RuntimeError:
                    pass


class PodWriter(threading.Thread):
    """Creates unbound pods at `rate`/s in `namespace` until stopped."""

    def __init__(self, client, namespace, rate):
        super().__init__(name="pod-writer", daemon=True)
        self.client, self.namespace, self.interval = client, namespace, 1.0 / rate
        self.stop = threading.Event()
        self.created = 0

    def run(self):
        next_at = time.monotonic()
        while not self.stop.is_set():
            name = "w-%05d" % self.created
            try:
                self.client.request("POST", "/api/v1/namespaces/%s/pods" % self.namespace, deadline_s=5.0, json={
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                             "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}})
                self.created += 1
            except RuntimeError:
                pass
            next_at = max(next_at + self.interval, time.monotonic() - 1.0)
            self.stop.wait(max(0.0, next_at - time.monotonic()))


class PodWatch(threading.Thread):
    """A watch on all pods from `revision`; events land in `events` as (arrival, event)."""

    def __init__(self, url, revision):
        super().__init__(name="watch", daemon=True)
        self.url, self.revision = url, revision
        self.events = []
        self.resp = None
        self.error = None

    def run(self):
        try:
            self.resp = requests.get(self.url + "/api/v1/pods", stream=True, timeout=(2, 70), params={
                "watch": "1", "resourceVersion": str(self.revision), "timeoutSeconds": "60"})
            for line in self.resp.iter_lines():
                if line.strip():
                    self.events.append((time.monotonic(), json.loads(line)))
        except Exception as exc:   # noqa: BLE001 - the stream ends when we close it
            self.error = exc

    def close(self):
        try:
            if self.resp is not None:
                self.resp.close()
        except Exception:   # noqa: BLE001
            pass


def is_controller_write(event):
    obj = event.get("object") or {}
    if event.get("type") == "MODIFIED" and (obj.get("spec") or {}).get("nodeName"):
        return True                          # a binding (the scheduler)
    if event.get("type") == "ADDED" and (obj.get("metadata") or {}).get("ownerReferences"):
        return True                          # a pod the deployment controller created
    return False


def poll_failover(urls, old_term, t_kill, timeout=10.0):
    """(t_elected, t_active, revision at active, new leader url) by polling every 5 ms."""
    t_elected = t_active = revision = leader = None
    deadline = t_kill + timeout
    while time.monotonic() < deadline and t_active is None:
        for url in urls:
            state = common.get_json(url, "/shepherd/v1/replica", timeout=0.2)
            now = time.monotonic()
            if not state or state.get("role") != "leader" or state.get("term", 0) <= old_term:
                continue
            if t_elected is None:
                t_elected, leader = now, url
            ctl = state.get("controllers") or {}
            if ctl.get("active") and (ctl.get("epoch") or [0])[0] > old_term and state["epoch"] == ctl["epoch"]:
                t_active, revision, leader = now, state["revision"], url
                break
        time.sleep(0.005)
    return t_elected, t_active, revision, leader


def first_write_after(watches, revision, t_kill, wait=5.0):
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        hits = [(t, e) for w in watches for t, e in list(w.events)
                if t > t_kill and e.get("type") != "BOOKMARK"
                and int(e["object"]["metadata"]["resourceVersion"]) > revision and is_controller_write(e)]
        if hits:
            t, e = min(hits, key=lambda h: (int(h[1]["object"]["metadata"]["resourceVersion"]), h[0]))
            # the earliest arrival of that revision on either watch
            first_rv = int(e["object"]["metadata"]["resourceVersion"])
            t = min(t2 for t2, e2 in hits if int(e2["object"]["metadata"]["resourceVersion"]) == first_rv)
            what = "binding" if e["type"] == "MODIFIED" else "deployment pod"
            return t, what
        time.sleep(0.01)
    return None, None


def run_round(bc, client, k, args):
    ns = "fo-%02d-%s" % (k, uuid.uuid4().hex[:4])
    client.request("POST", "/api/v1/namespaces", json={"metadata": {"name": ns}})
    client.request("POST", "/apis/apps/v1/namespaces/%s/deployments" % ns, json={
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "scale"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "scale"}},
                 "template": {"metadata": {"labels": {"app": "scale"}},
                              "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                                       "resources": {"requests": {"cpu": "10m"}}}]}}}})
    writer = PodWriter(client, ns, args.rate)
    writer.start()
    time.sleep(1.0)                       # bindings flowing under the current leader
    leaders = {u: s for u, s in common.replica_states(bc.urls(), 0.5).items() if s and s["role"] == "leader"}
    old_url, old = max(leaders.items(), key=lambda kv: kv[1]["term"])
    victim = old["id"]
    survivors = [u for u in bc.urls() if u != old_url]
    revision = max(s["revision"] for s in common.replica_states(survivors, 0.5).values() if s)
    watches = [PodWatch(u, revision) for u in survivors]
    for w in watches:
        w.start()
    time.sleep(0.3)
    client.down = {old_url}
    client.request("PATCH", "/apis/apps/v1/namespaces/%s/deployments/scale" % ns, headers=dict(MERGE),
                   json={"spec": {"replicas": args.scale}})
    t_kill = time.monotonic()
    bc.cluster.kill(victim)
    t_elected, t_active, active_rev, new_url = poll_failover(survivors, old["term"], t_kill)
    t_write, what = first_write_after(watches, active_rev, t_kill) if active_rev is not None else (None, None)
    writer.stop.set()
    writer.join(10)
    for w in watches:
        w.close()
    row = {"round": k, "victim": victim, "term": old["term"],
           "elected": None if t_elected is None else t_elected - t_kill,
           "active": None if t_active is None else t_active - t_kill,
           "write": None if t_write is None else t_write - t_kill,
           "what": what}
    row["elected_to_write"] = (t_write - t_elected) if t_write is not None and t_elected is not None else None
    # Restart the victim, tidy up, wait until the cluster is whole again.
    bc.cluster.start(victim)
    bc.cluster.wait_ready(60, ids=bc.ids())
    client.down = set()
    client.request("DELETE", "/api/v1/namespaces/" + ns)
    time.sleep(args.settle)
    return row


def fmt(seconds):
    return "-" if seconds is None else "%.3f" % seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--nodes", type=int, default=5)
    parser.add_argument("--rate", type=float, default=40.0, help="unbound pods created per second")
    parser.add_argument("--scale", type=int, default=50, help="deployment replicas the scale-up asks for")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds between rounds")
    parser.add_argument("--keep", action="store_true", help="keep the cluster files")
    args = parser.parse_args()
    common.exit_on_sigterm()
    say("controller failover benchmark: %d rounds, SIGKILL the leader during a deployment scale-up to %d "
        "while %.0f unbound pods/s arrive, %d nodes" % (args.rounds, args.scale, args.rate, args.nodes))
    common.print_machine()
    common.print_background_load()
    rows = []
    with common.BenchCluster(3, keep=args.keep) as bc:
        client = Client(bc.urls())
        names = ["node-%02d" % i for i in range(args.nodes)]
        for name in names:
            client.request("POST", "/api/v1/nodes", json=node_body(name))
            client.request("POST", LEASES, json={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                 "metadata": {"name": name, "namespace": "kube-node-lease"},
                                                 "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}})
        renewer = Renewer(client, names)
        renewer.start()
        try:
            for k in range(1, args.rounds + 1):
                row = run_round(bc, client, k, args)
                rows.append(row)
                say("  round %2d: killed %s (term %d): elected %s s, controllers active %s s, first controller "
                    "write (%s) %s s after the kill = %s s after the election"
                    % (k, row["victim"], row["term"], fmt(row["elected"]), fmt(row["active"]), row["what"] or "none",
                       fmt(row["write"]), fmt(row["elected_to_write"])))
        finally:
            renewer.stop.set()
    say()
    say("results (seconds):")
    headers = ["", "kill->elected", "kill->controllers active", "kill->first write", "elected->first write"]
    stats = []
    for label, fn in (("median", statistics.median), ("max", max)):
        line = [label]
        for key in ("elected", "active", "write", "elected_to_write"):
            values = [r[key] for r in rows if r[key] is not None]
            line.append(fmt(fn(values)) if values else "-")
        stats.append(line)
    common.table(headers, stats)
    missing = sum(1 for r in rows if r["elected_to_write"] is None)
    values = [r["elected_to_write"] for r in rows if r["elected_to_write"] is not None]
    worst = max(values) if values else None
    say()
    common.target_line("first controller write after the election (max)", "%s s" % fmt(worst), "<= %.1f s" % TARGET,
                       worst is not None and worst <= TARGET and not missing)
    if missing:
        say("  %d round(s) saw no controller write within 5 s of the new epoch" % missing)


if __name__ == "__main__":
    main()
