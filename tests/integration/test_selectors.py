"""Label and field selectors on lists, across all namespaces and in one namespace.

This module has its own cluster, so every pod in it is one created here and the
expected sets below are exact.
"""
import pytest

from .helpers import PODS, Watch, assert_no_internal_errors, call, deployment, ensure_namespace, expect, pod

pytestmark = pytest.mark.integration

A, B = "sel-a", "sel-b"
MERGE = {"Content-Type": "application/merge-patch+json"}

# (namespace, name, labels, nodeName, phase)
PODSET = [
    (A, "p1", {"app": "web", "tier": "fe"}, "node-1", "Running"),
    (A, "p2", {"app": "db", "tier": "be"}, "node-2", "Pending"),
    (A, "p3", {"app": "web"}, None, "Succeeded"),
    (B, "p1", {"app": "web", "tier": "be"}, "node-1", "Running"),
    (B, "p4", {"app": "cache"}, None, "Pending"),
    (B, "p5", {"env": "prod"}, "node-2", "Failed"),
]
ALL = {"%s/%s" % (p[0], p[1]) for p in PODSET}


@pytest.fixture(scope="module")
def url(cluster):
    url = cluster.url(cluster.ids[1])
    for ns in (A, B):
        ensure_namespace(url, ns)
    for ns, name, labels, node, phase in PODSET:
        expect(call("POST", url + PODS.format(ns=ns), json=pod(name, labels, node=node)), 201)
        if phase != "Pending":
            expect(call("PATCH", url + PODS.format(ns=ns) + "/" + name + "/status", headers=MERGE,
                        json={"status": {"phase": phase}}), 200)
    return url


def _names(url, path, **params):
    body = expect(call("GET", url + path, params=params), 200)
    assert body["kind"] == "PodList"
    # Only our two namespaces: pods a controller makes for the deployments below live elsewhere.
    return {"%s/%s" % (o["metadata"]["namespace"], o["metadata"]["name"]) for o in body["items"]
            if o["metadata"]["namespace"] in (A, B)}


LABEL_CASES = [
    ("app=web", {"sel-a/p1", "sel-a/p3", "sel-b/p1"}),
    ("app==web", {"sel-a/p1", "sel-a/p3", "sel-b/p1"}),
    ("app!=web", {"sel-a/p2", "sel-b/p4", "sel-b/p5"}),          # != also matches pods without the label
    ("app in (web,db)", {"sel-a/p1", "sel-a/p2", "sel-a/p3", "sel-b/p1"}),
    ("app notin (web,db)", {"sel-b/p4", "sel-b/p5"}),
    ("tier", {"sel-a/p1", "sel-a/p2", "sel-b/p1"}),
    ("!tier", {"sel-a/p3", "sel-b/p4", "sel-b/p5"}),
    ("app=web,tier=be", {"sel-b/p1"}),
    ("app=web,!tier", {"sel-a/p3"}),
    ("tier in (fe,be),app!=db", {"sel-a/p1", "sel-b/p1"}),
    (" app = web , tier notin ( fe ) ", {"sel-a/p3", "sel-b/p1"}),
    ("env=prod", {"sel-b/p5"}),
    ("app=nothing", set()),
    ("", ALL),
]

FIELD_CASES = [
    ("metadata.name=p1", {"sel-a/p1", "sel-b/p1"}),
    ("metadata.name==p2", {"sel-a/p2"}),
    ("metadata.name!=p1", ALL - {"sel-a/p1", "sel-b/p1"}),
    ("metadata.namespace=sel-b", {"sel-b/p1", "sel-b/p4", "sel-b/p5"}),
    ("metadata.namespace!=sel-b", {"sel-a/p1", "sel-a/p2", "sel-a/p3"}),
    ("spec.nodeName=node-1", {"sel-a/p1", "sel-b/p1"}),
    ("spec.nodeName=", {"sel-a/p3", "sel-b/p4"}),              # unscheduled
    ("spec.nodeName!=", {"sel-a/p1", "sel-a/p2", "sel-b/p1", "sel-b/p5"}),
    ("status.phase=Running", {"sel-a/p1", "sel-b/p1"}),
    ("status.phase!=Pending", {"sel-a/p1", "sel-a/p3", "sel-b/p1", "sel-b/p5"}),
    ("status.phase=Running,metadata.namespace=sel-a", {"sel-a/p1"}),
    ("spec.nodeName=node-2,status.phase=Failed", {"sel-b/p5"}),
]


@pytest.mark.parametrize("selector,expected", LABEL_CASES, ids=[c[0] or "empty" for c in LABEL_CASES])
def test_label_selector_all_namespaces(url, selector, expected):
    assert _names(url, "/api/v1/pods", labelSelector=selector) == expected


@pytest.mark.parametrize("selector,expected", LABEL_CASES, ids=[c[0] or "empty" for c in LABEL_CASES])
def test_label_selector_one_namespace(url, selector, expected):
    assert _names(url, PODS.format(ns=A), labelSelector=selector) == {n for n in expected if n.startswith(A + "/")}


@pytest.mark.parametrize("selector,expected", FIELD_CASES, ids=[c[0] for c in FIELD_CASES])
def test_field_selector_all_namespaces(url, selector, expected):
    assert _names(url, "/api/v1/pods", fieldSelector=selector) == expected


@pytest.mark.parametrize("selector,expected", FIELD_CASES, ids=[c[0] for c in FIELD_CASES])
def test_field_selector_one_namespace(url, selector, expected):
    assert _names(url, PODS.format(ns=B), fieldSelector=selector) == {n for n in expected if n.startswith(B + "/")}


def test_label_and_field_selectors_combine(url, cluster):
    for ident in cluster.ids:      # every replica answers the same, linearizably and from local state
        for params in ({}, {"resourceVersion": "0"}):
            got = _names(cluster.url(ident), "/api/v1/pods", labelSelector="app=web",
                         fieldSelector="spec.nodeName=node-1,metadata.namespace!=sel-a", **params)
            assert got == {"sel-b/p1"}, (ident, params)


def test_selectors_on_deployments(url):
    # In namespaces of their own, so whatever a deployment controller creates stays out of the pod sets.
    for ns in ("seldep-a", "seldep-b"):
        ensure_namespace(url, ns)
        for name in ("d1", "d2"):
            body = deployment("%s-%s" % (ns, name), app=name)
            body["metadata"]["labels"] = {"team": ns}
            expect(call("POST", url + "/apis/apps/v1/namespaces/%s/deployments" % ns, json=body), 201)
    body = expect(call("GET", url + "/apis/apps/v1/deployments", params={"labelSelector": "team=seldep-b"}), 200)
    assert body["kind"] == "DeploymentList"
    assert sorted(o["metadata"]["name"] for o in body["items"]) == ["seldep-b-d1", "seldep-b-d2"]
    body = expect(call("GET", url + "/apis/apps/v1/namespaces/seldep-a/deployments",
                       params={"fieldSelector": "metadata.name=seldep-a-d2"}), 200)
    assert [o["metadata"]["name"] for o in body["items"]] == ["seldep-a-d2"]
    body = expect(call("GET", url + "/apis/apps/v1/deployments", params={"labelSelector": "team notin (seldep-a)",
                                                                         "fieldSelector": "metadata.name!=seldep-b-d1"}), 200)
    assert [o["metadata"]["name"] for o in body["items"]] == ["seldep-b-d2"]


def test_selected_lists_and_watches_follow_relabels_and_deletes(url, cluster):
    """An API worker answers selected lists from an index of its copy of the store
    (store/selector_index.py), built on the first such list and kept change by change:
    every replica's answers follow a relabel, a status write and a delete."""
    ns = "sel-c"
    ensure_namespace(url, ns)
    path = PODS.format(ns=ns)
    for name, app, node in (("q1", "web", "node-1"), ("q2", "web", "node-2"), ("q3", "db", "node-1")):
        expect(call("POST", url + path, json=pod(name, {"app": app}, node=node)), 201)

    def seen(**params):
        answers = {}
        for ident in cluster.ids:
            for consistency in ({}, {"resourceVersion": "0"}):
                if consistency:      # local state: wait until this replica has the newest write
                    consistency = {"resourceVersion": str(_revision(cluster.url(ident), path))}
                body = expect(call("GET", cluster.url(ident) + path, params=dict(params, **consistency)), 200)
                answers[(ident, bool(consistency))] = [o["metadata"]["name"] for o in body["items"]]
        assert len({tuple(a) for a in answers.values()}) == 1, answers
        return answers[(cluster.ids[0], False)]

    assert seen(labelSelector="app=web") == ["q1", "q2"]
    assert seen(fieldSelector="spec.nodeName=node-1") == ["q1", "q3"]
    expect(call("PATCH", url + path + "/q1", headers=MERGE, json={"metadata": {"labels": {"app": "api"}}}), 200)
    expect(call("PATCH", url + path + "/q2/status", headers=MERGE, json={"status": {"phase": "Running"}}), 200)
    assert seen(labelSelector="app=web") == ["q2"]
    assert seen(labelSelector="app in (api,db)") == ["q1", "q3"]
    assert seen(labelSelector="app=web", fieldSelector="status.phase=Running") == ["q2"]
    expect(call("DELETE", url + path + "/q3", params={"gracePeriodSeconds": "0"}), 200)
    assert seen(fieldSelector="spec.nodeName=node-1") == ["q1"]
    watch = Watch(url, path, timeout=10, params={"labelSelector": "app in (api,web)"})
    try:
        assert watch.wait_for(lambda events: len(events) >= 2, 10), (watch.error, watch.events)
        assert sorted(e["object"]["metadata"]["name"] for e in watch.changes()) == ["q1", "q2"]
        assert {e["type"] for e in watch.changes()} == {"ADDED"}
    finally:
        watch.close()


def test_a_watch_of_one_nodes_pods_sees_them_and_moves_past_the_others(url, cluster):
    """A kubelet's watch (spec.nodeName=N) is woken only by changes of pods on N
    (store/watch_log.py, Interest); between them its bookmarks still move on to the
    newest revision, and a pod of N that is deleted is a DELETED event."""
    ns = "sel-d"
    ensure_namespace(url, ns)
    path = PODS.format(ns=ns)
    watch = Watch(cluster.url(cluster.ids[2]), path, timeout=20,
                  params={"fieldSelector": "spec.nodeName=node-w", "allowWatchBookmarks": "true"})
    try:
        assert watch.wait_for(lambda events: events, 10), watch.error       # open: its first bookmark
        for i in range(20):
            expect(call("POST", url + path, json=pod("other-%d" % i, {"app": "x"}, node="node-%d" % (i % 3))), 201)
        last_other = _revision(url, path)
        assert watch.wait_for(lambda events: any(e["type"] == "BOOKMARK" and int(e["object"]["metadata"]
                                                 ["resourceVersion"]) >= last_other for e in events), 10), watch.events
        expect(call("POST", url + path, json=pod("mine", {"app": "x"}, node="node-w")), 201)
        expect(call("DELETE", url + path + "/mine", params={"gracePeriodSeconds": "0"}), 200)
        assert watch.wait_for(lambda events: any(e["type"] == "DELETED" for e in events), 10), watch.events
        assert [(e["type"], e["object"]["metadata"]["name"]) for e in watch.changes()][:1] == [("ADDED", "mine")]
        assert {e["object"]["metadata"]["name"] for e in watch.changes()} == {"mine"}
    finally:
        watch.close()


def _revision(url, path):
    return int(expect(call("GET", url + path), 200)["metadata"]["resourceVersion"])


def test_no_request_was_answered_500(cluster):
    assert_no_internal_errors(cluster)
