"""Garbage collection and event pruning on a real 3-replica cluster.

- deleting a deployment (background, the default) deletes its pods; with
  propagationPolicy Orphan they stay, without their owner reference;
- dependents of other kinds of owners go too, a dependent with a live second owner
  only loses the dead reference, and dependents created with a live owner are never
  touched; deleting a namespace deletes everything in it;
- events stay bounded: at most event_max (oldest first) and none older than event_ttl.
"""
import concurrent.futures
import importlib.util
import time

import pytest

from shepherd_ha.model.times import now_rfc3339

from .helpers import PODS, Watch, call, collection_revision, ensure_namespace, expect, rv_of, start_cluster, unique, wait_for

pytestmark = pytest.mark.integration

EVENT_MAX, EVENT_TTL = 40, 30.0
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"
SERVICES = "/api/v1/namespaces/{ns}/services"
EVENTS = "/api/v1/namespaces/{ns}/events"
HAVE_DEPLOYMENTS = importlib.util.find_spec("shepherd_ha.controllers.deployments") is not None


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    cluster = start_cluster(tmp_path_factory.mktemp("gc"), server_options={"event_max": EVENT_MAX,
                                                                          "event_ttl": EVENT_TTL})
    try:
        yield cluster.url(cluster.ids[1])
    finally:
        cluster.stop_all()


def ref(owner):
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def owned_pod(name, owners, labels=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"gc": "test"}, "ownerReferences": [ref(o) for o in owners]},
            "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}


def service(name):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"gc-owner": name}, "ports": [{"port": 80}]}}


def pods(url, prefix, ns="default"):
    return {p["metadata"]["name"]: p for p in expect(call("GET", url + PODS.format(ns=ns)), 200)["items"]
            if p["metadata"]["name"].startswith(prefix)}


def deployment(name, replicas):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}}


def deployment_with_pods(url, name, replicas):
    """A deployment and its `replicas` pods: made by the deployment controller when it
    exists, else by hand with the deployment as owner."""
    owner = expect(call("POST", url + DEPLOYMENTS.format(ns="default"), json=deployment(name, replicas)), 201)
    if HAVE_DEPLOYMENTS:
        wait_for("%d pods of %s" % (replicas, name), lambda: len(pods(url, name + "-")) == replicas, 20, 0.1)
    else:
        for i in range(replicas):
            expect(call("POST", url + PODS.format(ns="default"),
                        json=owned_pod("%s-%d" % (name, i), [owner], {"app": name})), 201)
    found = pods(url, name + "-")
    assert len(found) == replicas
    owners = {owner["metadata"]["uid"]}
    if HAVE_DEPLOYMENTS:     # Deployment -> ReplicaSet -> pods
        sets = expect(call("GET", url + "/apis/apps/v1/namespaces/default/replicasets"), 200)["items"]
        owners = {r["metadata"]["uid"] for r in sets
                  if any(ref["uid"] == owner["metadata"]["uid"] for ref in r["metadata"].get("ownerReferences") or [])}
        assert len(owners) == 1
    assert all(any(r["uid"] in owners for r in p["metadata"]["ownerReferences"]) for p in found.values())
    return owner, found


def test_deleting_a_deployment_deletes_its_pods(url):
    name = unique("gcd")
    _, before = deployment_with_pods(url, name, 4)
    expect(call("DELETE", url + DEPLOYMENTS.format(ns="default") + "/" + name), 200)
    wait_for("the deployment's pods deleted", lambda: not pods(url, name + "-"), 10)


def test_orphan_delete_keeps_the_pods(url):
    name = unique("gco")
    _, before = deployment_with_pods(url, name, 3)
    expect(call("DELETE", url + DEPLOYMENTS.format(ns="default") + "/" + name, json={"propagationPolicy": "Orphan"}),
           200)
    time.sleep(2.0)       # plenty for the collector (and any controller) to act, if it were going to
    after = pods(url, name + "-")
    assert sorted(after) == sorted(before), "orphaned pods must stay"
    for pod_name, p in after.items():
        assert p["metadata"]["uid"] == before[pod_name]["metadata"]["uid"]
        if HAVE_DEPLOYMENTS:   # the ReplicaSet is orphaned and keeps its pods, as in Kubernetes
            assert p["metadata"]["ownerReferences"] == before[pod_name]["metadata"]["ownerReferences"]
            rs = expect(call("GET", url + "/apis/apps/v1/namespaces/default/replicasets/"
                             + p["metadata"]["ownerReferences"][0]["name"]), 200)
            assert not rs["metadata"].get("ownerReferences"), rs["metadata"]
        else:
            assert not p["metadata"].get("ownerReferences"), p["metadata"]
    if HAVE_DEPLOYMENTS:      # the orphaned ReplicaSet would replace the pods deleted below
        rs_name = next(iter(after.values()))["metadata"]["ownerReferences"][0]["name"]
        expect(call("DELETE", url + "/apis/apps/v1/namespaces/default/replicasets/" + rs_name,
                    json={"propagationPolicy": "Orphan"}), 200)
    for pod_name in after:
        expect(call("DELETE", url + PODS.format(ns="default") + "/" + pod_name), 200)


def test_foreground_delete_removes_the_deployment_after_its_pods(url):
    name = unique("gcf")
    _, before = deployment_with_pods(url, name, 3)
    rev, _ = collection_revision(url, PODS.format(ns="default"))
    pod_watch = Watch(url, PODS.format(ns="default"), resource_version=rev, timeout=30)
    deploy_watch = Watch(url, DEPLOYMENTS.format(ns="default"), resource_version=rev, timeout=30)
    try:
        marked = expect(call("DELETE", url + DEPLOYMENTS.format(ns="default") + "/" + name,
                             json={"propagationPolicy": "Foreground"}), 200)
        assert marked["metadata"]["deletionTimestamp"] and "foregroundDeletion" in marked["metadata"]["finalizers"]
        assert deploy_watch.wait_for(lambda evs: any(e["type"] == "DELETED" and e["object"]["metadata"]["name"] == name
                                                     for e in evs), 20), deploy_watch.events
        assert not pods(url, name + "-"), "the deployment went before its pods"
        assert pod_watch.wait_for(lambda evs: sum(e["type"] == "DELETED" for e in evs) >= 3, 10)
        pod_gone = max(rv_of(e) for e in pod_watch.changes() if e["type"] == "DELETED"
                       and e["object"]["metadata"]["name"] in before)
        deploy_gone = [rv_of(e) for e in deploy_watch.changes() if e["type"] == "DELETED"][0]
        assert deploy_gone > pod_gone, "foreground: the owner is deleted only after every pod is"
        # While its pods went, the deployment was visible, marked deleted, and made no new pods.
        marks = [e for e in deploy_watch.changes() if e["type"] == "MODIFIED"
                 and e["object"]["metadata"].get("deletionTimestamp")]
        assert marks and rv_of(marks[0]) < pod_gone
        added = [e for e in pod_watch.changes() if e["type"] == "ADDED" and e["object"]["metadata"]["name"].startswith(name)]
        assert not added, "no replacement pods while the deployment is being deleted: %r" % added
    finally:
        pod_watch.close()
        deploy_watch.close()


def test_other_owners_shared_dependents_and_late_dependents(url):
    a_name, b_name = unique("gca"), unique("gcb")
    a = expect(call("POST", url + SERVICES.format(ns="default"), json=service(a_name)), 201)
    b = expect(call("POST", url + SERVICES.format(ns="default"), json=service(b_name)), 201)
    prefix = unique("dep")
    # Many dependents created concurrently while their owner exists: none may be collected.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda i: call("POST", url + PODS.format(ns="default"),
                                               json=owned_pod("%s-a%02d" % (prefix, i), [a])), range(20)))
    assert all(r.status_code == 201 for r in results)
    expect(call("POST", url + PODS.format(ns="default"), json=owned_pod(prefix + "-shared", [a, b])), 201)
    expect(call("POST", url + PODS.format(ns="default"), json=owned_pod(prefix + "-b", [b])), 201)
    time.sleep(1.0)
    assert len(pods(url, prefix)) == 22, "dependents of live owners were deleted"

    expect(call("DELETE", url + SERVICES.format(ns="default") + "/" + a_name), 200)
    wait_for("a's own dependents deleted", lambda: sorted(pods(url, prefix)) == [prefix + "-b", prefix + "-shared"], 10)
    shared = pods(url, prefix)[prefix + "-shared"]
    assert [r["uid"] for r in shared["metadata"]["ownerReferences"]] == [b["metadata"]["uid"]]

    # A dependent created after its owner is gone is collected.
    expect(call("POST", url + PODS.format(ns="default"), json=owned_pod(prefix + "-late", [a])), 201)
    wait_for("the late dependent collected", lambda: prefix + "-late" not in pods(url, prefix), 10)

    expect(call("DELETE", url + SERVICES.format(ns="default") + "/" + b_name), 200)
    wait_for("b's dependents deleted", lambda: not pods(url, prefix), 10)


def test_deleting_a_namespace_deletes_everything_in_it(url):
    ns = unique("gcns")
    ensure_namespace(url, ns)
    owner = expect(call("POST", url + SERVICES.format(ns=ns), json=service("svc")), 201)
    expect(call("POST", url + PODS.format(ns=ns), json=owned_pod("owned", [owner])), 201)
    expect(call("POST", url + PODS.format(ns=ns), json=owned_pod("plain", [])), 201)
    expect(call("DELETE", url + "/api/v1/namespaces/" + ns), 200)
    wait_for("namespace %s gone" % ns, lambda: call("GET", url + "/api/v1/namespaces/" + ns).status_code == 404, 20)
    assert call("GET", url + PODS.format(ns=ns)).json().get("items", []) == []
    assert call("GET", url + SERVICES.format(ns=ns)).json().get("items", []) == []


def event(name, seconds_ago=0.0):
    when = now_rfc3339(-seconds_ago)
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": name, "namespace": "default"},
            "reason": "Test", "message": "event %s" % name, "type": "Normal", "count": 1,
            "firstTimestamp": when, "lastTimestamp": when}


def event_names(url, ns):
    return sorted(e["metadata"]["name"] for e in expect(call("GET", url + EVENTS.format(ns=ns)), 200)["items"])


def all_events(url):
    return expect(call("GET", url + "/api/v1/events"), 200)["items"]


def test_events_stay_bounded_in_number_and_age(url):
    ns = unique("evns")
    ensure_namespace(url, ns)
    # Expired on arrival, and one that expires a few seconds from now.
    expect(call("POST", url + EVENTS.format(ns=ns), json=event("ancient", EVENT_TTL * 3)), 201)
    expect(call("POST", url + EVENTS.format(ns=ns), json=event("soon", EVENT_TTL - 3)), 201)
    wait_for("the expired event deleted", lambda: "ancient" not in event_names(url, ns), 5)
    assert "soon" in event_names(url, ns)
    wait_for("the event deleted when it expires", lambda: "soon" not in event_names(url, ns), 10)

    # Flood: 3 x the limit, oldest first; the newest survive and the total stays bounded.
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        codes = list(pool.map(lambda i: call("POST", url + EVENTS.format(ns=ns),
                                             json=event("flood-%03d" % i, seconds_ago=20 - i * 0.1)).status_code,
                              range(EVENT_MAX * 3)))
    assert codes.count(201) == EVENT_MAX * 3
    wait_for("at most %d events" % EVENT_MAX, lambda: len(all_events(url)) <= EVENT_MAX, 10)
    names = event_names(url, ns)
    newest = "flood-%03d" % (EVENT_MAX * 3 - 1)
    assert newest in names, "the newest event was pruned"
    assert "flood-000" not in names, "the oldest event survived"
    time.sleep(1.0)
    assert len(all_events(url)) <= EVENT_MAX
