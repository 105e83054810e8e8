"""Node lifecycle and endpoints on a real 3-replica cluster, nodes registered through the
API and their leases renewed by the test, with short settings (grace period 2 s,
eviction timeout 1 s, lease interval 0.5 s):

- a node that stops renewing goes NotReady (Ready=Unknown, NodeNotReady event), its
  pods leave the endpoints' ready addresses, then its pods are deleted (Evicted
  events) and, when the deployment controller runs, recreated on the other nodes;
  the healthy nodes stay Ready all along;
- a node that renews again becomes Ready (NodeLeaseRenewed, NodeReady event);
- endpoints list the IPs of ready pods (others as not ready), follow readiness, and
  go with their service.
"""
import importlib.util
import threading
import time
import uuid

import pytest

from .helpers import POD, PODS, call, describe, expect, start_cluster, unique, wait_for

pytestmark = pytest.mark.integration

GRACE, EVICTION, LEASE_INTERVAL = 2.0, 1.0, 0.5
OPTIONS = {"node_grace_period": GRACE, "pod_eviction_timeout": EVICTION, "node_lease_interval": LEASE_INTERVAL,
           "orphan_pod_grace": 1.0}
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
MERGE = {"Content-Type": "application/merge-patch+json"}
NODES = "/api/v1/nodes"
SERVICES = "/api/v1/namespaces/default/services"
ENDPOINTS = "/api/v1/namespaces/default/endpoints"
EVENTS = "/api/v1/namespaces/default/events"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
HAVE_DEPLOYMENTS = importlib.util.find_spec("shepherd_ha.controllers.deployments") is not None


def node_body(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"}},
            "spec": {"unschedulable": False},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "addresses": [{"type": "InternalIP", "address": "192.0.2.10"}],
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Registered",
                                       "message": "registered by the test",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


class LeaseRenewer:
    """Renews the leases of the nodes in `alive` every LEASE_INTERVAL / 2 s on a
    background thread (any replica that answers), for at most `limit` seconds."""

    def __init__(self, urls, limit=300.0):
        self.urls = list(urls)
        self.alive = set()
        self.limit = limit
        self.errors = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lease-renewer", daemon=True)

    def add(self, name):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": name, "namespace": "kube-node-lease"},
                 "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                          "renewTime": "2026-01-01T00:00:00.000000Z"}}
        expect(call("POST", self.urls[0] + LEASES, json=lease), 201)
        self.alive.add(name)

    def _run(self):
        deadline = time.monotonic() + self.limit
        n = 0
        while not self.stop.wait(LEASE_INTERVAL / 2) and time.monotonic() < deadline:
            n += 1
            for name in sorted(self.alive):
                body = {"spec": {"renewTime": "2026-01-01T00:00:00.%06dZ" % (n % 1000000), "leaseTransitions": n}}
                for attempt in range(len(self.urls)):
                    url = self.urls[(n + attempt) % len(self.urls)]
                    try:
                        resp = call("PATCH", url + LEASES + "/" + name, headers=MERGE, json=body, timeout=2)
                    except Exception as exc:   # noqa: BLE001 - next replica
                        self.errors.append(repr(exc))
                        continue
                    if resp.status_code == 200:
                        break
                    self.errors.append(describe(resp))


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("nodes"), server_options=OPTIONS)
    renewer = LeaseRenewer([cluster.url(i) for i in cluster.ids])
    try:
        url = cluster.url(cluster.ids[0])
        for name in ("n1", "n2", "n3"):
            expect(call("POST", url + NODES, json=node_body(name)), 201)
            renewer.add(name)
        renewer.thread.start()
        yield {"cluster": cluster, "url": url, "renewer": renewer}
    finally:
        renewer.stop.set()
        renewer.thread.join(5.0)
        cluster.stop_all()


def get(url, path):
    resp = call("GET", url + path)
    return resp.json() if resp.status_code == 200 else None


def ready_condition(obj):
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond
    return None


def node_ready(url, name):
    cond = ready_condition(get(url, NODES + "/" + name))
    return cond and cond["status"]


def events_for(url, name, reason):
    return [e for e in get(url, EVENTS)["items"]
            if e["involvedObject"].get("name") == name and e["reason"] == reason]


def make_pod(url, name, node, labels, ip=None, ready=True):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nginx:1.25",
                                                       "ports": [{"name": "http", "containerPort": 8080}]}]}}
    created = expect(call("POST", url + PODS.format(ns="default"), json=body), 201)
    if ip:
        set_pod_status(url, name, ip, ready)
    return created


def set_pod_status(url, name, ip, ready):
    current = expect(call("GET", url + POD.format(ns="default", name=name)), 200)
    current["status"] = {"phase": "Running", "podIP": ip,
                         "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    expect(call("PUT", url + POD.format(ns="default", name=name) + "/status", json=current), 200)


def endpoint_ips(url, name):
    ep = get(url, ENDPOINTS + "/" + name)
    if ep is None:
        return None
    ready = sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("addresses") or [])
    not_ready = sorted(a["ip"] for s in ep.get("subsets") or [] for a in s.get("notReadyAddresses") or [])
    return ready, not_ready


def test_endpoints_list_ready_pods_with_ips(env):
    url = env["url"]
    app = unique("ep")
    expect(call("POST", url + SERVICES, json={"apiVersion": "v1", "kind": "Service", "metadata": {"name": app},
                                              "spec": {"selector": {"app": app},
                                                       "ports": [{"name": "web", "port": 80, "targetPort": "http"}]}}),
           201)
    make_pod(url, app + "-a", "n1", {"app": app}, ip="10.1.0.1", ready=True)
    make_pod(url, app + "-b", "n3", {"app": app}, ip="10.1.0.2", ready=False)
    make_pod(url, app + "-c", "n3", {"app": app})                          # no IP yet
    make_pod(url, app + "-x", "n1", {"app": "other"}, ip="10.1.0.9", ready=True)
    wait_for("endpoints with a ready and a not-ready address",
             lambda: endpoint_ips(url, app) == (["10.1.0.1"], ["10.1.0.2"]), 10)
    ep = get(url, ENDPOINTS + "/" + app)
    svc = get(url, SERVICES + "/" + app)
    assert ep["metadata"]["ownerReferences"][0]["uid"] == svc["metadata"]["uid"]
    assert ep["subsets"][0]["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    [address] = ep["subsets"][0]["addresses"]
    assert address["nodeName"] == "n1" and address["targetRef"]["name"] == app + "-a"

    # Readiness and IPs flow through; an unchanged pod does not rewrite the endpoints.
    set_pod_status(url, app + "-b", "10.1.0.2", True)
    set_pod_status(url, app + "-c", "10.1.0.3", True)
    wait_for("all three ready", lambda: endpoint_ips(url, app) == (["10.1.0.1", "10.1.0.2", "10.1.0.3"], []), 10)
    rv = get(url, ENDPOINTS + "/" + app)["metadata"]["resourceVersion"]
    set_pod_status(url, app + "-x", "10.1.0.9", False)       # a pod the service does not select
    set_pod_status(url, app + "-a", "10.1.0.1", True)        # same status: a no-op
    time.sleep(1.0)
    assert get(url, ENDPOINTS + "/" + app)["metadata"]["resourceVersion"] == rv, "rewritten without a change"

    expect(call("DELETE", url + POD.format(ns="default", name=app + "-a")), 200)
    wait_for("the deleted pod gone from the endpoints",
             lambda: endpoint_ips(url, app) == (["10.1.0.2", "10.1.0.3"], []), 10)
    expect(call("DELETE", url + SERVICES + "/" + app), 200)
    wait_for("endpoints deleted with their service", lambda: endpoint_ips(url, app) is None, 10)


def pods_on(url, node, prefix):
    return sorted(p["metadata"]["name"] for p in get(url, PODS.format(ns="default"))["items"]
                  if p["spec"].get("nodeName") == node and p["metadata"]["name"].startswith(prefix))


def test_node_that_stops_renewing_goes_not_ready_its_pods_go_and_it_comes_back(env):
    url, renewer = env["url"], env["renewer"]
    app = unique("nl")
    expect(call("POST", url + SERVICES, json={"apiVersion": "v1", "kind": "Service", "metadata": {"name": app},
                                              "spec": {"selector": {"app": app}, "ports": [{"port": 8080}]}}), 201)
    for i, node in enumerate(("n1", "n2", "n3"), start=1):
        make_pod(url, "%s-%s" % (app, node), node, {"app": app}, ip="10.2.0.%d" % i, ready=True)
    wait_for("three ready endpoints", lambda: endpoint_ips(url, app) == (["10.2.0.1", "10.2.0.2", "10.2.0.3"], []), 10)
    deploy = None
    if HAVE_DEPLOYMENTS:
        deploy = unique("spread")
        expect(call("POST", url + DEPLOYMENTS, json={
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": deploy},
            "spec": {"replicas": 6, "selector": {"matchLabels": {"app": deploy}},
                     "template": {"metadata": {"labels": {"app": deploy}},
                                  "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}}), 201)
        wait_for("6 deployment pods bound, some on n2",
                 lambda: sum(len(pods_on(url, n, deploy)) for n in ("n1", "n2", "n3")) == 6 and pods_on(url, "n2", deploy),
                 20, interval=0.2)
    healthy_before = {n: ready_condition(get(url, NODES + "/" + n)) for n in ("n1", "n3")}

    renewer.alive.discard("n2")
    stopped = time.monotonic()
    wait_for("n2 Ready=Unknown", lambda: node_ready(url, "n2") == "Unknown", GRACE + 5)
    went_unknown = time.monotonic() - stopped
    assert went_unknown >= GRACE - LEASE_INTERVAL - 0.2, "NotReady after %.2fs, before the grace period" % went_unknown
    cond = ready_condition(get(url, NODES + "/n2"))
    assert cond["reason"] == "NodeStatusUnknown" and "not renewed for" in cond["message"], cond
    [event] = events_for(url, "n2", "NodeNotReady")
    assert event["type"] == "Warning"

    # Its pods are deleted after the eviction timeout: the endpoints lose it, an Evicted event each.
    wait_for("n2's pods evicted", lambda: not pods_on(url, "n2", app) and not pods_on(url, "n2", deploy or app),
             EVICTION + 5)
    assert call("GET", url + POD.format(ns="default", name=app + "-n2")).status_code == 404
    evicted = events_for(url, app + "-n2", "Evicted")
    assert evicted and evicted[0]["message"].startswith("node n2 not ready for"), evicted
    assert pods_on(url, "n1", app) == [app + "-n1"] and pods_on(url, "n3", app) == [app + "-n3"]
    wait_for("endpoints without n2's pod", lambda: endpoint_ips(url, app) == (["10.2.0.1", "10.2.0.3"], []), 10)
    if deploy:
        wait_for("6 deployment pods again, none on n2",
                 lambda: (len(pods_on(url, "n1", deploy)) + len(pods_on(url, "n3", deploy)) == 6
                          and not pods_on(url, "n2", deploy)
                          and all(p["spec"].get("nodeName") for p in get(url, PODS.format(ns="default"))["items"]
                                  if p["metadata"]["name"].startswith(deploy))),
                 20, interval=0.2)

    # The healthy nodes were never touched.
    for n, before in healthy_before.items():
        assert ready_condition(get(url, NODES + "/" + n)) == before, "node %s changed" % n

    # n2 renews again: Ready.
    renewer.alive.add("n2")
    wait_for("n2 Ready again", lambda: node_ready(url, "n2") == "True", 5)
    cond = ready_condition(get(url, NODES + "/n2"))
    assert cond["reason"] == "NodeLeaseRenewed", cond
    assert events_for(url, "n2", "NodeReady")
    if deploy:
        expect(call("DELETE", url + DEPLOYMENTS + "/" + deploy), 200)
    expect(call("DELETE", url + SERVICES + "/" + app), 200)


def test_a_node_registered_without_a_lease_gets_a_grace_period_then_goes_not_ready(env):
    url = env["url"]
    name = "bare-" + uuid.uuid4().hex[:6]
    expect(call("POST", url + NODES, json=node_body(name)), 201)
    created = time.monotonic()
    wait_for("%s Ready=Unknown" % name, lambda: node_ready(url, name) == "Unknown", GRACE + 5)
    assert time.monotonic() - created >= GRACE - 0.2
    expect(call("DELETE", url + NODES + "/" + name), 200)


def test_pods_of_a_deleted_node_are_collected(env):
    url = env["url"]
    expect(call("POST", url + NODES, json=node_body("n-gone")), 201)
    env["renewer"].add("n-gone")
    make_pod(url, "on-gone-1", "n-gone", {"app": "gone"})
    make_pod(url, "on-gone-2", "n-gone", {"app": "gone"})
    env["renewer"].alive.discard("n-gone")
    expect(call("DELETE", url + NODES + "/n-gone"), 200)
    wait_for("pods of the deleted node n-gone deleted",
             lambda: not [p for p in get(url, PODS.format(ns="default"))["items"]
                          if p["spec"].get("nodeName") == "n-gone"], timeout=15)
    assert len(events_for(url, "on-gone-1", "NodeGone")) == 1
    for name in ("n1", "n2", "n3"):
        assert node_ready(url, name) == "True"
