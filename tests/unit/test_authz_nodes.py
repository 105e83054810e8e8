"""A node's own identity through the real app: what NodeRestriction lets it do (the
agent's operations) and what it refuses (finding 3 of issue 14: the shared node token
listed every ConfigMap, deleted a namespace, created a hostPath pod, patched another
node's status)."""
import json

import pytest

from authz_kit import FsmReplica, app_client, bearer

N1, N2 = "system:node:n1", "system:node:n2"
MERGE = {"Content-Type": "application/merge-patch+json"}


def pod(name, node=None, namespace="default", **spec):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": dict({"containers": [{"name": "app", "image": "busybox"}]}, **spec)}
    if node:
        body["spec"]["nodeName"] = node
    return body


def node_obj(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}


def lease(name):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"}}


def cm(name, namespace="default"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {"k": "v"}}


@pytest.fixture
def cluster():
    replica = FsmReplica()
    for n in ("n1", "n2"):
        replica.put("nodes", node_obj(n))
    replica.put("configmaps", cm("used-by-volume"))
    replica.put("configmaps", cm("used-by-env"))
    replica.put("configmaps", cm("used-by-envfrom"))
    replica.put("configmaps", cm("used-elsewhere"))
    replica.put("configmaps", cm("unused"))
    replica.put("pods", pod("mine", "n1", volumes=[{"name": "v", "configMap": {"name": "used-by-volume"}}],
                            containers=[{"name": "app", "image": "busybox",
                                         "envFrom": [{"configMapRef": {"name": "used-by-envfrom"}}],
                                         "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {
                                             "name": "used-by-env", "key": "k"}}}]}]))
    replica.put("pods", pod("theirs", "n2", volumes=[{"name": "v", "configMap": {"name": "used-elsewhere"}}]))
    replica.put("pods", pod("pending"))
    client = app_client(replica, {N1: ["system:nodes"], N2: ["system:nodes"], "admin": ["system:masters"],
                                  "shared": ["system:nodes"]})
    return replica, client


def forbidden(resp, *words):
    assert resp.status_code == 403, (resp.status_code, resp.get_data(as_text=True))
    body = resp.json
    assert body["kind"] == "Status" and body["reason"] == "Forbidden"
    for w in words:
        assert w in body["message"], body["message"]
    return body["message"]


# ---- finding 3: each action of the review, refused for a node's own token ----

def test_a_node_cannot_list_configmaps(cluster):
    _, c = cluster
    msg = forbidden(c.get("/api/v1/configmaps", headers=bearer(N1)))
    assert msg.startswith('configmaps is forbidden: User "system:node:n1" cannot list resource "configmaps" '
                          'in API group "" at the cluster scope')
    forbidden(c.get("/api/v1/namespaces/default/configmaps", headers=bearer(N1)), 'in the namespace "default"')


def test_a_node_cannot_delete_a_namespace(cluster):
    replica, c = cluster
    msg = forbidden(c.delete("/api/v1/namespaces/default", headers=bearer(N1)))
    assert msg == ('namespaces "default" is forbidden: User "system:node:n1" cannot delete resource "namespaces" '
                   'in API group "" in the namespace "default"')
    assert replica.fsm.get("namespaces", None, "default") is not None
    assert replica.fsm.get("pods", "default", "mine") is not None


def test_a_node_cannot_create_a_pod(cluster):
    replica, c = cluster
    body = pod("root", "n1", hostNetwork=True, volumes=[{"name": "root", "hostPath": {"path": "/"}}])
    forbidden(c.post("/api/v1/namespaces/default/pods", json=body, headers=bearer(N1)), "cannot create")
    assert replica.fsm.get("pods", "default", "root") is None


def test_a_node_cannot_patch_another_nodes_status_or_node_or_lease(cluster):
    replica, c = cluster
    patch = json.dumps({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    msg = forbidden(c.patch("/api/v1/nodes/n2/status", data=patch, headers=bearer(N1, **MERGE)))
    assert 'node "n1" is not allowed to modify node "n2"' in msg
    forbidden(c.patch("/api/v1/nodes/n2", data='{"metadata":{"labels":{"x":"y"}}}', headers=bearer(N1, **MERGE)))
    forbidden(c.post("/api/v1/nodes", json=node_obj("n3"), headers=bearer(N1)), "only its own Node")
    forbidden(c.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease("n2"),
                     headers=bearer(N1)), "only its own Lease")
    assert replica.fsm.get("leases", "kube-node-lease", "n2") is None
    forbidden(c.delete("/api/v1/nodes/n1", headers=bearer(N1)), "cannot delete")


def test_a_node_cannot_touch_pods_and_configmaps_of_other_nodes(cluster):
    replica, c = cluster
    forbidden(c.get("/api/v1/namespaces/default/pods/theirs", headers=bearer(N1)))
    forbidden(c.patch("/api/v1/namespaces/default/pods/theirs/status", data='{"status":{"phase":"Failed"}}',
                      headers=bearer(N1, **MERGE)), "spec.nodeName set to itself")
    forbidden(c.delete("/api/v1/namespaces/default/pods/theirs", headers=bearer(N1)))
    forbidden(c.delete("/api/v1/namespaces/default/pods/pending", headers=bearer(N1)))
    forbidden(c.patch("/api/v1/namespaces/default/pods/mine", data='{"metadata":{"labels":{"a":"b"}}}',
                      headers=bearer(N1, **MERGE)))
    forbidden(c.get("/api/v1/pods", headers=bearer(N1)), "fieldSelector=spec.nodeName=n1")
    forbidden(c.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn2", headers=bearer(N1)))
    for name in ("used-elsewhere", "unused"):
        forbidden(c.get("/api/v1/namespaces/default/configmaps/" + name, headers=bearer(N1)),
                  "no pod bound to node n1 uses it")
    forbidden(c.get("/api/v1/namespaces/default/pods/mine/log", headers=bearer(N1)))
    forbidden(c.get("/metrics", headers=bearer(N1)), 'cannot get path "/metrics"')
    assert (replica.fsm.get("pods", "default", "theirs").get("status") or {}).get("phase") != "Failed"


def test_a_token_shared_by_nodes_gets_nothing_and_is_told_why(cluster):
    _, c = cluster
    forbidden(c.get("/api/v1/nodes", headers=bearer("shared")), "shepherd-ha token create --node")


# ---- what the agent really does, allowed ----

def test_the_agents_own_operations_are_allowed(cluster):
    replica, c = cluster
    h = bearer(N1)
    assert c.post("/api/v1/nodes", json=node_obj("n1"), headers=h).status_code == 409     # registered already
    assert c.patch("/api/v1/nodes/n1", data='{"metadata":{"labels":{"zone":"a"}}}',
                   headers=bearer(N1, **MERGE)).status_code == 200
    assert c.patch("/api/v1/nodes/n1/status", data='{"status":{"capacity":{"cpu":"2"}}}',
                   headers=bearer(N1, **MERGE)).status_code == 200
    assert c.get("/api/v1/nodes", headers=h).status_code == 200                          # routes, DNS
    assert c.get("/api/v1/nodes/n2", headers=h).status_code == 200
    leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
    assert c.patch(leases + "/n1", data='{"spec":{}}', headers=bearer(N1, **MERGE)).status_code == 404
    assert c.post(leases, json=lease("n1"), headers=h).status_code == 201
    assert c.patch(leases + "/n1", data='{"spec":{"leaseDurationSeconds":40}}',
                   headers=bearer(N1, **MERGE)).status_code == 200
    listed = c.get("/api/v1/pods?fieldSelector=spec.nodeName%3Dn1&resourceVersion=0", headers=h)
    assert listed.status_code == 200 and [p["metadata"]["name"] for p in listed.json["items"]] == ["mine"]
    assert c.get("/api/v1/namespaces/default/pods/mine", headers=h).status_code == 200
    assert c.get("/api/v1/namespaces/default/pods/gone", headers=h).status_code == 404    # orphan cleanup
    assert c.patch("/api/v1/namespaces/default/pods/mine/status", data='{"status":{"phase":"Running"}}',
                   headers=bearer(N1, **MERGE)).status_code == 200
    for name in ("used-by-volume", "used-by-env", "used-by-envfrom"):
        assert c.get("/api/v1/namespaces/default/configmaps/" + name, headers=h).status_code == 200, name
    assert c.get("/api/v1/namespaces/default/services", headers=h).status_code == 200
    assert c.get("/api/v1/endpoints", headers=h).status_code == 200
    # the log server's key: authorized, so the answer is the handler's own 404 (no signer here), not 403
    key = c.get("/shepherd/v1/log-grant-key", headers=h)
    assert key.status_code == 404 and "signs no log grants" in key.json["message"], key.json
    assert c.get("/shepherd/v1/cluster", headers=h).status_code == 403       # and no other path
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "mine.1", "namespace": "default"},
             "involvedObject": {"kind": "Pod", "name": "mine", "namespace": "default"}, "reason": "Started",
             "message": "started", "type": "Normal", "count": 1, "source": {"component": "shepherd-agent"}}
    created = c.post("/api/v1/namespaces/default/events", json=event, headers=h)
    assert created.status_code == 201, created.json
    assert c.patch("/api/v1/namespaces/default/events/mine.1", data='{"count":2}',
                   headers=bearer(N1, **MERGE)).status_code == 200
    assert c.get("/api/v1/namespaces/default/events/mine.1", headers=h).status_code == 200
    gone = c.delete("/api/v1/namespaces/default/pods/mine", json={"gracePeriodSeconds": 0}, headers=h)
    assert gone.status_code == 200, gone.json


def test_a_pod_not_yet_seen_here_is_checked_linearizably_before_a_refusal(cluster):
    replica, c = cluster
    before = replica.consistent_reads
    forbidden(c.get("/api/v1/namespaces/default/pods/theirs", headers=bearer(N1)))
    assert replica.consistent_reads > before
    before = replica.consistent_reads
    assert c.get("/api/v1/namespaces/default/pods/mine?resourceVersion=0", headers=bearer(N1)).status_code == 200
    assert replica.consistent_reads == before        # bound here: no barrier on the agent's path


def test_a_node_may_fetch_the_log_grant_key_and_no_other_path(cluster):
    # The agent verifies the replicas' log grants with this key, fetched with its own token
    # (agent/log_access.py): refused, every `kubectl logs` would be a 503.
    _, c = cluster
    resp = c.get("/shepherd/v1/log-grant-key", headers=bearer(N1))
    assert resp.status_code == 404 and "signs no log grants" in resp.json["message"]     # authorized; no signer here
    forbidden(c.post("/shepherd/v1/log-grant-key", headers=bearer(N1)))
    forbidden(c.get("/shepherd/v1/members", headers=bearer(N1)), 'cannot get path "/shepherd/v1/members"')
    forbidden(c.get("/shepherd/v1/log-grant-key", headers=bearer("shared")), "shepherd-ha token create --node")
