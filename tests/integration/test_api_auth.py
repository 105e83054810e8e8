"""Bearer tokens on a real 3-replica cluster (replicas run with --token-file).

Without a token only /healthz, /readyz and /version answer; a viewer reads but may not
write; the admin token of the client config `local up` writes works through sheepctl
and through any replica; the cluster view still reaches every replica (replicas ask
each other with a token derived from the Raft password)."""
import os
import subprocess
import sys

import pytest
import yaml

from shepherd_ha.client import Client
from shepherd_ha.client.errors import ApiError

from .helpers import Cluster, call, pod

pytestmark = pytest.mark.integration

VIEWER = "v" * 32


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("auth"), auth=True)
    with open(c.lc.token_file, "a") as fh:
        fh.write('%s,viewer,viewer,"shepherd:view"\n' % VIEWER)
    try:
        c.start()
        yield c
    finally:
        c.stop_all()


def bearer(token):
    return {"Authorization": "Bearer " + token}


def test_without_a_token_only_health_answers(cluster):
    url = cluster.url(cluster.ids[1])
    for path in ("/healthz", "/readyz", "/version"):
        assert call("GET", url + path).status_code == 200, path
    for method, path in (("GET", "/api/v1/namespaces/default/pods"), ("GET", "/metrics"),
                         ("GET", "/shepherd/v1/replica"), ("POST", "/api/v1/namespaces/default/pods")):
        resp = call(method, url + path, json=pod("nope"))
        assert resp.status_code == 401, (method, path, resp.text)
        assert resp.json()["reason"] == "Unauthorized" and resp.headers["WWW-Authenticate"].startswith("Bearer")
    resp = call("GET", url + "/api/v1/namespaces/default/pods", headers=bearer("w" * 32))
    assert resp.status_code == 401 and "--token-file" in resp.json()["message"]
    # nothing was written by the refused create
    admin = bearer(cluster.lc.token())
    assert call("GET", url + "/api/v1/namespaces/default/pods/nope", headers=admin).status_code == 404


def test_a_viewer_reads_and_may_not_write(cluster):
    url = cluster.url(cluster.ids[0])
    assert call("GET", url + "/api/v1/namespaces/default/pods", headers=bearer(VIEWER)).status_code == 200
    resp = call("POST", url + "/api/v1/namespaces/default/pods", headers=bearer(VIEWER), json=pod("viewer-pod"))
    assert resp.status_code == 403 and resp.json()["message"] == (
        'pods is forbidden: User "viewer" cannot create resource "pods" in API group "" in the namespace "default"')
    assert call("GET", url + "/api/v1/namespaces/default/pods/viewer-pod",
                headers=bearer(cluster.lc.token())).status_code == 404


def test_the_admin_token_writes_through_every_replica_and_the_cluster_view_is_whole(cluster):
    with open(os.path.join(cluster.lc.dir, "config")) as fh:
        config = yaml.safe_load(fh)
    assert config["token"] == cluster.lc.token()
    assert oct(os.stat(os.path.join(cluster.lc.dir, "config")).st_mode & 0o777) == "0o600"
    with Client(list(cluster.urls.values()), token=config["token"]) as client:
        for i, ident in enumerate(cluster.ids):
            client.servers = [cluster.url(ident)]
            client.create("pods", pod("admin-%d" % i), namespace="default")
        view = client.request("GET", "/shepherd/v1/cluster")
    assert sorted(r["id"] for r in view["replicas"] if r["reachable"]) == sorted(cluster.ids), view
    assert view["leader"] in cluster.ids
    with Client(list(cluster.urls.values())) as anonymous:
        with pytest.raises(ApiError) as err:
            anonymous.get("pods", "admin-0", namespace="default")
    assert err.value.code == 401


def sheepctl(*args, env=None):
    env = dict({k: v for k, v in os.environ.items() if k not in ("SHEPHERD_SERVERS", "SHEPHERD_TOKEN",
                                                               "SHEPHERD_CONFIG")}, **(env or {}))
    out = subprocess.run([sys.executable, "-m", "ctl"] + list(args), capture_output=True, text=True, timeout=60,
                         env=env)
    return out.returncode, out.stdout + out.stderr


def test_sheepctl_uses_the_config_token_and_says_what_to_do_without_one(cluster):
    config = os.path.join(cluster.lc.dir, "config")
    code, text = sheepctl("--config", config, "cluster", "status")
    assert code == 0, text
    assert text.count("leader") >= 1 and all(ident in text for ident in cluster.ids)
    url = cluster.url(cluster.ids[2])
    code, text = sheepctl("--server", url, "get", "pods")
    assert code != 0 and "token" in text, text
    code, text = sheepctl("--server", url, "--token", VIEWER, "get", "pods")
    assert code == 0, text
    code, text = sheepctl("--server", url, "get", "pods", env={"SHEPHERD_TOKEN": VIEWER})
    assert code == 0, text
    code, text = sheepctl("--server", url, "--token", VIEWER, "delete", "pod", "admin-0")
    assert code != 0 and 'User "viewer" cannot delete resource "pods"' in text, text
