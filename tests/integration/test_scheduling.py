"""The scheduler on a real 3-replica cluster, nodes registered through the API (with
Ready conditions, and leases the test renews so the node lifecycle controller keeps
them Ready).

- 6 pods without an owner (and without requests) spread 2/2/2 over 3 equal nodes
  (least-allocated scoring counts what the scheduler has bound, pass after pass);
  each gets PodScheduled=True and a Scheduled event.
- a pod too big for every node gets PodScheduled=False with the reasons counted per
  node, and a FailedScheduling event; it is bound once a node with room is added.
- cordon, then drain through sheepctl: owned pods are evicted, the cordoned node gets
  no new pods.

Owner spreading is covered by the unit tests: here the deployment and garbage
collection controllers (running on the same leader) would act on owned pods.
"""
import collections
import contextlib
import threading
import time

import pytest

from . import helpers
from .helpers import PODS, call, describe, ensure_namespace, expect, pod, unique

pytestmark = pytest.mark.integration

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
MERGE = {"Content-Type": "application/merge-patch+json"}
WAIT = 20.0           # seconds any scheduling outcome may take to show up


def node_body(name, cpu="4", memory="8Gi", pods="110", ready="True"):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "spec": {"unschedulable": False},
            "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": pods},
                       "allocatable": {"cpu": cpu, "memory": memory, "pods": pods},
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "conditions": [{"type": "Ready", "status": ready, "reason": "Test",
                                       "message": "registered by the test",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


class LeaseRenewer:
    """Renews the leases of the registered nodes every second on a background thread,
    for at most `limit` seconds (and stops when the test's context ends)."""

    def __init__(self, url, limit=240.0):
        self.url = url
        self.names = []
        self.limit = limit
        self.errors = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def add(self, name):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": name, "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                          "renewTime": "2026-01-01T00:00:00.000000Z"}}
        expect(call("POST", self.url + LEASES, json=lease), 201)
        self.names.append(name)

    def _run(self):
        deadline = time.monotonic() + self.limit
        n = 0
        while not self.stop.wait(1.0) and time.monotonic() < deadline:
            n += 1
            for name in list(self.names):
                try:
                    resp = call("PATCH", self.url + LEASES + "/" + name, headers=MERGE, timeout=5,
                                json={"spec": {"renewTime": "2026-01-01T00:00:%02d.000000Z" % (n % 60),
                                               "leaseTransitions": n}})
                    if resp.status_code != 200:
                        self.errors.append(describe(resp))
                except Exception as exc:   # noqa: BLE001 - recorded, the test decides
                    self.errors.append(repr(exc))

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5.0)


@pytest.fixture(scope="module")
def env(cluster):
    url = cluster.url(cluster.ids[0])
    ensure_namespace(url, "kube-node-lease")
    with LeaseRenewer(url) as renewer:
        for name in ("sched-1", "sched-2", "sched-3"):
            expect(call("POST", url + "/api/v1/nodes", json=node_body(name)), 201)
            renewer.add(name)
        yield {"url": url, "renewer": renewer, "cluster": cluster}
    assert not renewer.errors[:3], renewer.errors[:3]


def get_pod(url, ns, name):
    return expect(call("GET", url + PODS.format(ns=ns) + "/" + name), 200)


def wait_for(what, check, timeout=WAIT):
    return helpers.wait_for(what, check, timeout, interval=0.1)


def scheduled_condition(p):
    for c in (p.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return c
    return None


def events_for(url, ns, name, reason):
    items = expect(call("GET", url + "/api/v1/namespaces/%s/events" % ns), 200)["items"]
    return [e for e in items if e["involvedObject"].get("name") == name and e["reason"] == reason]


def test_six_pods_spread_two_per_node(env):
    url = env["url"]
    ns = unique("spread")
    ensure_namespace(url, ns)
    names = ["p%d" % i for i in range(6)]
    for name in names:
        expect(call("POST", url + PODS.format(ns=ns), json=pod(name)), 201)

    def all_bound():
        items = expect(call("GET", url + PODS.format(ns=ns)), 200)["items"]
        placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in items}
        return placed if len(placed) == 6 and all(placed.values()) else None
    placed = wait_for("binding of 6 pods", all_bound)
    assert collections.Counter(placed.values()) == {"sched-1": 2, "sched-2": 2, "sched-3": 2}, placed
    for name in names:
        p = get_pod(url, ns, name)
        assert scheduled_condition(p)["status"] == "True", p
        [event] = events_for(url, ns, name, "Scheduled")
        assert event["message"] == "Successfully assigned %s/%s to %s" % (ns, name, placed[name])
        assert event["type"] == "Normal"


def test_unschedulable_pod_says_why_and_is_bound_when_a_node_with_room_appears(env):
    url = env["url"]
    ns = unique("unsched")
    ensure_namespace(url, ns)
    expect(call("POST", url + "/api/v1/nodes", json=node_body("sched-down", memory="64Gi", ready="False")), 201)
    big = pod("big")
    big["spec"]["containers"][0]["resources"] = {"requests": {"memory": "16Gi", "cpu": "500m"}}
    expect(call("POST", url + PODS.format(ns=ns), json=big), 201)
    message = "0/4 nodes available: 3 Insufficient memory, 1 node(s) were NotReady"

    def says_why():
        c = scheduled_condition(get_pod(url, ns, "big"))
        return c if c and c["status"] == "False" and c["message"] == message else None
    cond = wait_for("PodScheduled=False with the reasons", says_why)
    assert cond["reason"] == "Unschedulable"
    [event] = wait_for("a FailedScheduling event", lambda: events_for(url, ns, "big", "FailedScheduling"))
    assert (event["type"], event["message"]) == ("Warning", message)
    rv = get_pod(url, ns, "big")["metadata"]["resourceVersion"]
    time.sleep(1.5)    # retries that learn nothing new (resyncs, lease renewals) write nothing
    again = get_pod(url, ns, "big")
    assert again["metadata"]["resourceVersion"] == rv
    assert events_for(url, ns, "big", "FailedScheduling")[0]["count"] == 1
    assert not again["spec"].get("nodeName")

    expect(call("POST", url + "/api/v1/nodes", json=node_body("sched-big", memory="32Gi")), 201)
    env["renewer"].add("sched-big")
    bound = wait_for("binding to the new node", lambda: get_pod(url, ns, "big")["spec"].get("nodeName"))
    assert bound == "sched-big"
    assert scheduled_condition(get_pod(url, ns, "big"))["status"] == "True"
    expect(call("DELETE", url + "/api/v1/nodes/sched-down"), 200)


def test_cordoned_node_gets_no_pods_and_drain_evicts(env, tmp_path):
    from ctl.main import main as sheepctl
    url = env["url"]
    servers = ",".join(env["cluster"].urls.values())
    ns = unique("drain")
    ensure_namespace(url, ns)
    # sched-big has by far the most room: pods would go there unless it is cordoned.
    out = _run_ctl(sheepctl, ["--server", servers, "cordon", "sched-big"])
    assert out == (0, "node/sched-big cordoned\n")
    for i in range(3):
        expect(call("POST", url + PODS.format(ns=ns), json=pod("c%d" % i)), 201)

    def bound_nodes():
        items = expect(call("GET", url + PODS.format(ns=ns)), 200)["items"]
        nodes = [p["spec"].get("nodeName") for p in items]
        return nodes if len(nodes) == 3 and all(nodes) else None
    assert "sched-big" not in wait_for("binding", bound_nodes)

    # drain sched-1: its owned pod is evicted; a pod without an owner blocks until --force
    owner = expect(call("POST", url + "/api/v1/namespaces/%s/services" % ns, json={
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "owner"},
        "spec": {"selector": {"app": "none"}, "ports": [{"port": 80}]}}), 201)
    owned = pod("owned", node="sched-1")
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Service", "name": "owner",
                                             "uid": owner["metadata"]["uid"], "controller": True}]
    expect(call("POST", url + PODS.format(ns=ns), json=owned), 201)
    expect(call("POST", url + PODS.format(ns=ns), json=pod("bare", node="sched-1")), 201)
    rc, text = _run_ctl(sheepctl, ["--server", servers, "drain", "sched-1"])
    assert rc == 1
    assert get_pod(url, ns, "owned")["spec"]["nodeName"] == "sched-1", "nothing evicted while refused"
    rc, text = _run_ctl(sheepctl, ["--server", servers, "drain", "sched-1", "--force"])
    assert rc == 0, text
    assert "pod/owned evicted" in text and "pod/bare evicted" in text and "node/sched-1 drained" in text
    # Pods on a node are deleted gracefully: marked terminating for the node's agent to stop
    # (no agent runs in this test, so they stay terminating).
    left = expect(call("GET", url + "/api/v1/pods", params={"fieldSelector": "spec.nodeName=sched-1"}), 200)
    assert left["items"] and all(p["metadata"].get("deletionTimestamp") for p in left["items"]), left["items"]
    node = expect(call("GET", url + "/api/v1/nodes/sched-1"), 200)
    assert node["spec"]["unschedulable"] is True
    for name in ("sched-1", "sched-big"):
        assert _run_ctl(sheepctl, ["--server", servers, "uncordon", name])[0] == 0


def _run_ctl(sheepctl, argv):
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        rc = sheepctl(argv)
    return rc, out.getvalue()


def test_events_over_the_budget_are_dropped_and_counted_while_every_pod_is_bound(make_cluster):
    cluster = make_cluster(server_options={"event_qps": 0.1, "event_burst": 3})
    url = cluster.url(cluster.ids[0])
    ensure_namespace(url, "kube-node-lease")
    ns = unique("budget")
    ensure_namespace(url, ns)
    with LeaseRenewer(url) as renewer:
        expect(call("POST", url + "/api/v1/nodes", json=node_body("budget-1", pods="110")), 201)
        renewer.add("budget-1")
        names = ["p%02d" % i for i in range(12)]
        for name in names:
            expect(call("POST", url + PODS.format(ns=ns), json=pod(name)), 201)

        def all_bound():
            items = expect(call("GET", url + PODS.format(ns=ns)), 200)["items"]
            return len(items) == 12 and all(p["spec"].get("nodeName") == "budget-1" for p in items)
        wait_for("binding of 12 pods", all_bound)
        scheduled = sum(len(events_for(url, ns, name, "Scheduled")) for name in names)
        # 3 at once, then one per 10 s: some of the 12 pods' events were dropped, none of their bindings.
        assert scheduled < 12, scheduled
        # Counted by whichever replica led when it dropped them (leadership may move).
        dropped = sum(float(line.split()[1]) for ident in cluster.ids
                      for line in call("GET", cluster.url(ident) + "/metrics").text.splitlines()
                      if line.startswith('shepherd_controller_events_dropped_total{component="shepherd-scheduler"}'))
        assert dropped >= 12 - scheduled, dropped
        reported = sum((expect(call("GET", cluster.url(ident) + "/shepherd/v1/replica"), 200)["controllers"]
                        .get("eventsDropped") or {}).get("shepherd-scheduler", 0) for ident in cluster.ids)
        assert reported == dropped, (reported, dropped)
    assert not renewer.errors[:3], renewer.errors[:3]
