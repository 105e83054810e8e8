"""TLS on real replica processes and a real agent (hollow runtime): every listener speaks
HTTPS from the cluster CA, clients verify it, a wrong CA or plain HTTP is refused, the
replicas reach each other and the agents over verified TLS, and the real kubectl reads
/readyz, /healthz and /metrics with DIR/kubeconfig."""
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.parse

import pytest
import requests
from cryptography import x509

from ctl.main import main as sheepctl
from shepherd_ha.client import Client, NoReplicaReachable
from shepherd_ha.tls import pki

from .helpers import Cluster, wait_for

pytestmark = pytest.mark.integration

NS = "default"


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, request):
    c = Cluster(tmp_path_factory.mktemp("tls"), replicas=3, auth=True, tls=True)
    request.addfinalizer(lambda: (c.lc.stop_agents(5), c.stop_all()))
    c.start()
    return c


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    return pki.create_ca(str(tmp_path_factory.mktemp("other-ca")))


def admin(c, **kw):
    return Client(c.lc.api_urls(), timeout=5.0, retry_deadline=15.0, **dict(c.lc.client_options(), **kw))


def test_every_replica_serves_https_from_the_cluster_ca(tls_cluster):
    for url in tls_cluster.lc.api_urls():
        assert url.startswith("https://127.0.0.1:")
        reply = requests.get(url + "/readyz", verify=tls_cluster.lc.ca_file, timeout=5)
        assert reply.status_code == 200, reply.text


def test_a_client_with_another_ca_is_refused_at_once_and_told_why(tls_cluster, other_ca):
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(tls_cluster.lc.api_urls()[0] + "/readyz", verify=other_ca.cert_path, timeout=5)
    started = time.monotonic()
    with pytest.raises(NoReplicaReachable) as err:
        admin(tls_cluster, ca_file=other_ca.cert_path).list("configmaps", namespace=NS)
    assert time.monotonic() - started < 5, "a wrong CA does not heal by waiting out the retry deadline"
    assert "certificate" in str(err.value) and "CA" in str(err.value)


def test_plain_http_to_the_tls_port_gets_a_clean_400_saying_to_use_https(tls_cluster):
    url = tls_cluster.lc.api_urls()[0].replace("https://", "http://")
    reply = requests.get(url + "/readyz", timeout=5)
    assert reply.status_code == 400
    assert "TLS" in reply.text and "https://" in reply.text
    # and the replica still serves TLS afterwards
    assert requests.get(tls_cluster.lc.api_urls()[0] + "/healthz", verify=tls_cluster.lc.ca_file,
                        timeout=5).status_code == 200


def test_writes_reads_and_watches_over_tls(tls_cluster):
    client = admin(tls_cluster)
    try:
        listed = client.list("configmaps", namespace=NS)
        events = client.watch("configmaps", namespace=NS, resource_version=listed["metadata"]["resourceVersion"])
        made = client.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tls-cm"},
                                            "data": {"k": "v"}}, namespace=NS)
        assert client.get("configmaps", "tls-cm", namespace=NS)["data"] == {"k": "v"}
        first = next(e for e in events if e["type"] != "BOOKMARK")
        assert first["type"] == "ADDED" and first["object"]["metadata"]["uid"] == made["metadata"]["uid"]
        events.close()
    finally:
        client.close()


def test_replicas_see_each_other_over_verified_tls(tls_cluster):
    view = requests.get(tls_cluster.lc.api_urls()[0] + "/shepherd/v1/cluster", verify=tls_cluster.lc.ca_file,
                        headers=tls_cluster.lc.auth_headers(), timeout=5).json()
    assert len(view["replicas"]) == 3
    assert all(r["reachable"] for r in view["replicas"]), view


def test_kubectl_reads_health_and_metrics_with_the_kubeconfig(tls_cluster):
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is missing: scripts/setup-test-tools.sh installs it"
    kubeconfig = tls_cluster.lc.kubeconfig_path
    assert os.stat(kubeconfig).st_mode & 0o777 == 0o600
    for path, expect in (("/readyz", "ok"), ("/healthz", "ok"), ("/metrics", "shepherd_")):
        proc = subprocess.run([kubectl, "--kubeconfig", kubeconfig, "get", "--raw", path],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, (path, proc.stdout[-500:], proc.stderr[-500:])
        assert expect in proc.stdout, (path, proc.stdout[:300])


def test_sheepctl_takes_the_kubeconfig_and_the_config(tls_cluster, capsys):
    for args in (["--kubeconfig", tls_cluster.lc.kubeconfig_path], ["--config", os.path.join(tls_cluster.lc.dir,
                                                                                            "config")]):
        assert sheepctl(args + ["get", "configmaps"]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert sheepctl(["--kubeconfig", tls_cluster.lc.kubeconfig_path, "--certificate-authority",
                     "/nonexistent-ca.crt", "get", "configmaps"]) != 0
    assert "does not exist" in capsys.readouterr().err


def _running_pod(client, name, node):
    client.create("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                           "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox:1"}]}},
                  namespace=NS)
    wait_for("pod %s running on %s" % (name, node),
             lambda: (client.get("pods", name, namespace=NS).get("status") or {}).get("phase") == "Running", 30)


def _log(c, pod):
    return requests.get(c.lc.api_urls()[1] + "/api/v1/namespaces/%s/pods/%s/log" % (NS, pod),
                        headers=c.lc.auth_headers(), verify=c.lc.ca_file, timeout=10)


def test_pod_logs_come_from_the_agent_over_tls_and_a_wrong_agent_is_refused(tls_cluster, other_ca):
    lc = tls_cluster.lc
    lc.add_agent("tls-good", "hollow")
    bad_config = lc.add_agent("tls-badca", "hollow")
    # tls-badca's log server shows a certificate from another CA (its API client still trusts ours)
    adir = os.path.dirname(bad_config)
    pki.issue_files(other_ca, adir, "tls", "system:node:tls-badca", ["tls-badca", "127.0.0.1"])
    lc.start_agent("tls-good")
    lc.start_agent("tls-badca")
    client = admin(tls_cluster)
    try:
        wait_for("both agents Ready", lambda: all(r["node"] == "Ready" for r in lc.agent_status()
                                                   if r["name"].startswith("tls-")), 30)
        _running_pod(client, "logs-good", "tls-good")
        _running_pod(client, "logs-bad", "tls-badca")
        good = _log(tls_cluster, "logs-good")
        assert good.status_code == 200, good.text
        assert good.headers.get("Shepherd-Node") == "tls-good"
        bad = _log(tls_cluster, "logs-bad")
        assert bad.status_code == 503 and "TLS" in bad.json()["message"], bad.text
        # A Node steered to another listener of the cluster (tls-good's log server, valid from our CA)
        # is refused before the replica's token leaves: that certificate names another node.
        good_port = client.get("nodes", "tls-good")["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        lc.stop_agent("tls-badca")
        client.patch("nodes", "tls-badca", {"status": {"daemonEndpoints": {"kubeletEndpoint": {"Port": good_port}}}},
                     subresource="status")
        steered = _log(tls_cluster, "logs-bad")
        assert steered.status_code == 503, steered.text
        assert "not for this node" in steered.json()["message"], steered.text
    finally:
        client.close()


def _served_serial(url, ca_file):
    """The serial number of the certificate the server at `url` shows (verified against ca_file)."""
    parts = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context(cafile=ca_file)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=parts.hostname) as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_certificates_rotate_with_a_restart_one_replica_at_a_time(tls_cluster):
    from shepherd_ha.cli.cluster_tls import reissue
    lc = tls_cluster.lc
    url = lc.replica("r3")["api"]
    old = _served_serial(url, lc.ca_file)
    assert "r3" in reissue(lc)
    assert _served_serial(url, lc.ca_file) == old          # the running replica keeps its certificate
    lc.stop("r3")
    lc.start("r3")
    tls_cluster.wait_ready(ids=["r3"])
    assert _served_serial(url, lc.ca_file) != old          # the restarted one serves the new certificate
    client = admin(tls_cluster)
    try:
        assert client.list("configmaps", namespace=NS)["items"] is not None
    finally:
        client.close()

def test_api_workers_share_the_tls_port(tmp_path):
    c = Cluster(tmp_path / "workers", replicas=1, tls=True, server_options={"api_workers": 2})
    try:
        c.start()
        url = c.lc.api_urls()[0]
        for i in range(40):          # a fresh connection each time: the kernel spreads them over the workers
            reply = requests.post(url + "/api/v1/namespaces/default/configmaps", verify=c.lc.ca_file, timeout=10,
                                  json={"metadata": {"name": "w%d" % i}, "data": {"i": str(i)}})
            assert reply.status_code == 201, reply.text
        items = requests.get(url + "/api/v1/namespaces/default/configmaps", verify=c.lc.ca_file, timeout=10).json()
        assert {"w%d" % i for i in range(40)} <= {o["metadata"]["name"] for o in items["items"]}
    finally:
        c.stop_all()
