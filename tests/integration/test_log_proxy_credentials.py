"""A Node pointed at another listener collects nothing it can use (issue 14, finding 5).

On a real cluster with tokens: a Node's address and agent port are set to a listener
this test runs, and an admin asks for a pod's logs there. The listener records what
the replica sent: a log grant for that one container, no bearer token (neither the
admin's nor the replica's peer token), and the grant gets 401 from every replica.
"""
import http.server
import os
import threading

import pytest

from agent.log_access import LogAccess
from shepherd_ha.api.replica_credentials import ReplicaCredentials

from .helpers import Cluster, call, unique

pytestmark = pytest.mark.integration


class Recorder(http.server.BaseHTTPRequestHandler):
    seen = []

    def do_GET(self):
        Recorder.seen.append({"path": self.path, "headers": dict(self.headers)})
        body = b"not an agent\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def auth_cluster(tmp_path_factory, request):
    cluster = Cluster(tmp_path_factory.mktemp("logauth"), auth=True)
    request.addfinalizer(cluster.stop_all)
    cluster.start()
    return cluster


def test_a_steered_log_request_carries_no_usable_credential(auth_cluster):
    cluster = auth_cluster
    admin = cluster.lc.auth_headers()
    url = cluster.url(cluster.ids[0])
    listener = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    node_name, pod_name = unique("steered"), unique("victim")
    try:
        resp = call("POST", url + "/api/v1/nodes", headers=admin, json={"metadata": {"name": node_name}})
        assert resp.status_code == 201, resp.text
        node = resp.json()
        node["status"] = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                          "daemonEndpoints": {"kubeletEndpoint": {"Port": listener.server_address[1]}}}
        resp = call("PUT", url + "/api/v1/nodes/%s/status" % node_name, headers=admin, json=node)
        assert resp.status_code == 200, resp.text
        resp = call("POST", url + "/api/v1/namespaces/default/pods", headers=admin, json={
            "metadata": {"name": pod_name},
            "spec": {"nodeName": node_name, "containers": [{"name": "app", "image": "busybox"}]}})
        assert resp.status_code == 201, resp.text
        resp = call("GET", url + "/api/v1/namespaces/default/pods/%s/log" % pod_name, headers=admin)
        assert resp.status_code == 200 and resp.text == "not an agent\n", resp.text
    finally:
        listener.shutdown()
        listener.server_close()
    assert len(Recorder.seen) == 1, Recorder.seen
    headers = Recorder.seen[0]["headers"]
    everything = repr(Recorder.seen[0])
    with open(os.path.join(cluster.lc.dir, "raft-password")) as fh:
        password = fh.read().strip()
    credentials = ReplicaCredentials(password, cluster.lc.spec()["raft_salt"])
    node_token = cluster.lc.node_token(node_name)         # that node's own (user system:node:NAME)
    for secret in (cluster.lc.token(), node_token, password, credentials.peer_token):
        assert secret not in everything, "the listener received a credential"
    authorization = headers.get("Authorization", "")
    assert authorization.startswith("Shepherd-Log-Grant v1."), authorization
    # What it received opens nothing on any replica ...
    for ident in cluster.ids:
        for path in ("/shepherd/v1/replica", "/api/v1/namespaces/default/pods/%s" % pod_name,
                     "/api/v1/configmaps", "/api/v1/nodes"):
            for header in (authorization, "Bearer " + authorization.split(" ", 1)[1]):
                r = call("GET", cluster.url(ident) + path, headers={"Authorization": header})
                assert r.status_code == 401, (ident, path, r.status_code)
    # ... and a real agent of that node (its key fetched from the API with its node token)
    # would serve exactly that container with it, nothing else.
    access = LogAccess(list(cluster.urls.values()), node_name, node_token)
    assert access.may_read(authorization, "default", pod_name, "app") is None
    assert "pod" in access.may_read(authorization, "default", "another-pod", "app")
    assert "node" in LogAccess(list(cluster.urls.values()), "another-node", cluster.lc.node_token("another-node")
                               ).may_read(authorization, "default", pod_name, "app")
    # The replicas' own peer token still works for what it is for.
    view = call("GET", url + "/shepherd/v1/cluster", headers=admin).json()
    assert all(r["reachable"] for r in view["replicas"]), view
