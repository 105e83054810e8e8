"""One identity per node on real replica processes, with a real `shepherd-agent`
(hollow runtime) running on its own token (issue 14, finding 3).

The agent's own work goes through: registration, lease renewal, node status, the pod
watch (fieldSelector spec.nodeName), pod status, Events, the final delete after a
graceful stop; every action of the security review is 403 for a node token; a node
token made with `shepherd-ha token create` while the replicas run works at once;
RBAC changed at runtime applies to the next request; `sheepctl auth can-i` answers
what the server applies."""
import json
import subprocess
import sys
import time

import pytest

from .helpers import Cluster, call, pod

pytestmark = pytest.mark.integration

AGENT_ARGS = ["--lease-interval", "1", "--status-interval", "2", "--backoff-base", "1"]
RBAC = "/apis/rbac.authorization.k8s.io/v1"
MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("nodeid"), auth=True,
                server_options={"node_lease_interval": 1.0, "node_grace_period": 8.0})
    try:
        c.start()
        c.lc.add_agent("rbac-n1", runtime="hollow", extra_args=AGENT_ARGS)
        c.lc.start_agent("rbac-n1")
        yield c
    finally:
        c.lc.stop_agents()
        c.stop_all()


def bearer(token, **extra):
    return dict({"Authorization": "Bearer " + token}, **extra)


def admin(c):
    return bearer(c.lc.token())


def wait(fn, timeout, what):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except (OSError, ValueError, KeyError) as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError("timed out waiting for %s (last error %s)" % (what, last))


def get(c, path, headers, ident="r1"):
    resp = call("GET", c.url(ident) + path, headers=headers)
    return resp.json() if resp.status_code == 200 else None


def agent_log(c, name):
    with open(c.lc.agent_log(name)) as fh:
        return fh.read()


def test_the_agent_does_all_its_work_on_its_own_token(cluster):
    c, h = cluster, admin(cluster)
    node = wait(lambda: get(c, "/api/v1/nodes/rbac-n1", h), 30, "the agent registers its node")
    assert node["metadata"]["name"] == "rbac-n1"
    lease_path = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/rbac-n1"
    first = wait(lambda: get(c, lease_path, h), 15, "the agent creates its lease")["spec"]["renewTime"]
    wait(lambda: get(c, lease_path, h)["spec"]["renewTime"] != first, 15, "the agent renews its lease")
    wait(lambda: (get(c, "/api/v1/nodes/rbac-n1", h).get("status") or {}).get("conditions"), 15,
         "the agent posts node status")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "nid-settings"}, "data": {"MODE": "x"}}
    assert call("POST", c.url("r1") + "/api/v1/namespaces/default/configmaps", json=cm, headers=h).status_code == 201
    body = pod("nid-web", image="shepherd/busybox:1", node="rbac-n1")
    body["spec"]["containers"][0]["envFrom"] = [{"configMapRef": {"name": "nid-settings"}}]
    assert call("POST", c.url("r2") + "/api/v1/namespaces/default/pods", json=body, headers=h).status_code == 201
    # the pod watch delivered it, the agent ran it and reported its status
    wait(lambda: (get(c, "/api/v1/namespaces/default/pods/nid-web", h).get("status") or {}).get("phase")
         == "Running", 30, "the agent reports the pod Running")
    events = wait(lambda: [e for e in get(c, "/api/v1/namespaces/default/events", h)["items"]
                           if (e.get("involvedObject") or {}).get("name") == "nid-web"], 15, "the agent's events")
    assert events
    # graceful delete: the agent stops it, then deletes it for good with its own token
    assert call("DELETE", c.url("r3") + "/api/v1/namespaces/default/pods/nid-web", headers=h).status_code == 200
    wait(lambda: call("GET", c.url("r1") + "/api/v1/namespaces/default/pods/nid-web",
                      headers=h).status_code == 404, 30, "the agent's final delete")
    log = agent_log(c, "rbac-n1")
    assert "forbidden" not in log.lower() and " 403" not in log, log[-3000:]


def test_every_finding_3_action_is_refused_for_a_node_token(cluster):
    c = cluster
    token = c.lc.node_token("rbac-n1")
    h = bearer(token)
    wait(lambda: get(c, "/api/v1/nodes/rbac-n1", admin(c)), 30, "the agent registers its node")
    # a second node, its token made while the replicas run: it works at once
    out = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "token", "create", "--node", "rbac-n2",
                          "--token-file", c.lc.token_file], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    n2 = bearer(out.stdout.strip())
    node2 = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "rbac-n2"}, "spec": {}}
    for ident in c.ids:      # each replica re-reads the token file on its own
        resp = call("GET", c.url(ident) + "/api/v1/nodes", headers=n2)
        assert resp.status_code == 200, (ident, resp.text)
    assert call("POST", c.url("r2") + "/api/v1/nodes", json=node2, headers=n2).status_code == 201
    for ident in c.ids:
        url = c.url(ident)
        resp = call("GET", url + "/api/v1/configmaps", headers=h)
        assert resp.status_code == 403, resp.text
        assert resp.json()["message"].startswith(
            'configmaps is forbidden: User "system:node:rbac-n1" cannot list resource "configmaps"')
        resp = call("DELETE", url + "/api/v1/namespaces/default", headers=h)
        assert resp.status_code == 403 and resp.json()["reason"] == "Forbidden", resp.text
        evil = pod("nid-root", node="rbac-n1", hostNetwork=True,
                   volumes=[{"name": "root", "hostPath": {"path": "/"}},
                            {"name": "sock", "hostPath": {"path": "/var/run/docker.sock"}}])
        evil["spec"]["containers"][0]["ports"] = [{"containerPort": 22, "hostPort": 22}]
        assert call("POST", url + "/api/v1/namespaces/default/pods", json=evil, headers=h).status_code == 403
        patch = json.dumps({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
        resp = call("PATCH", url + "/api/v1/nodes/rbac-n2/status", data=patch, headers=bearer(token, **MERGE))
        assert resp.status_code == 403 and 'not allowed to modify node "rbac-n2"' in resp.json()["message"]
    h_admin = admin(c)
    assert call("GET", c.url("r1") + "/api/v1/namespaces/default", headers=h_admin).status_code == 200
    assert call("GET", c.url("r1") + "/api/v1/namespaces/default/pods/nid-root", headers=h_admin).status_code == 404
    # the token deleted: it stops working at once
    out = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "token", "delete", "--node", "rbac-n2",
                          "--token-file", c.lc.token_file], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert call("GET", c.url("r3") + "/api/v1/nodes", headers=n2).status_code == 401


def test_rbac_changed_at_runtime_applies_to_the_next_request_and_can_i_says_so(cluster):
    c = cluster
    alice = "a1ice" * 8
    with open(c.lc.token_file, "a") as fh:
        fh.write('%s,alice,alice,"team-a"\n' % alice)
    url = c.url("r1")
    resp = call("GET", url + "/api/v1/namespaces/default/pods", headers=bearer(alice))
    assert resp.status_code == 403
    assert resp.json()["message"] == ('pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
                                      'in the namespace "default"')

    def can_i(*argv, token=alice):
        return subprocess.run([sys.executable, "-m", "ctl", "auth", "can-i", "--server", url, "--token", token]
                              + list(argv), capture_output=True, text=True, timeout=30)

    out = can_i("list", "pods", "-n", "default")
    assert (out.returncode, out.stdout.strip()) == (1, "no"), out.stderr
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "team-a-view", "namespace": "default"},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
               "subjects": [{"kind": "Group", "name": "team-a"}]}
    resp = call("POST", url + RBAC + "/namespaces/default/rolebindings", json=binding, headers=admin(c))
    assert resp.status_code == 201, resp.text
    # the next request on the replica that took the write
    assert call("GET", url + "/api/v1/namespaces/default/pods", headers=bearer(alice)).status_code == 200
    out = can_i("list", "pods", "-n", "default")
    assert (out.returncode, out.stdout.strip()) == (0, "yes"), out.stderr
    out = can_i("create", "pods", "-n", "default")
    assert (out.returncode, out.stdout.strip()) == (1, "no")
    out = can_i("list", "pods", "-n", "kube-system")
    assert out.returncode == 1
    out = can_i("get", "pods", "--as", "alice", "--as-group", "team-a", token=c.lc.token())
    assert (out.returncode, out.stdout.strip()) == (0, "yes"), out.stderr
    out = can_i("list", "configmaps", "--as", "system:node:rbac-n1", "--as-group", "system:nodes",
                token=c.lc.token())
    assert (out.returncode, out.stdout.strip()) == (1, "no"), out.stderr
    out = can_i("get", "pods", "--as", "admin", token=alice)
    assert out.returncode == 1 and "impersonate" in out.stderr
    # every replica applies it once its copy holds it; removing the binding revokes it
    for ident in c.ids:
        wait(lambda: call("GET", c.url(ident) + "/api/v1/namespaces/default/pods", headers=bearer(alice)).status_code
             == 200, 10, "replica %s applies the binding" % ident)
    assert call("DELETE", url + RBAC + "/namespaces/default/rolebindings/team-a-view",
                headers=admin(c)).status_code == 200
    assert call("GET", url + "/api/v1/namespaces/default/pods", headers=bearer(alice)).status_code == 403
