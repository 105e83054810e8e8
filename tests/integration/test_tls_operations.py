"""Issue 17's operations on a TLS cluster (the default), on real replica processes: adding
and removing a replica (its own certificate, the client files following), --join asking
the members over verified HTTPS, the membership API's checks of a new replica's URL, the
cluster-id check of clients and agents over HTTPS, snapshot save through the kubeconfig,
restore into a cluster with a CA of its own started with `local up`, and a rolling restart."""
import http.server
import os
import socket
import ssl
import subprocess
import sys
import threading
import types
import urllib.parse

import pytest
import requests
import yaml
from cryptography import x509

from agent.cluster_check import other_cluster
from ctl.main import main as sheepctl
from shepherd_ha.api.replica_credentials import ReplicaCredentials
from shepherd_ha.cli import join, local_members
from shepherd_ha.cli.local_cluster import LocalCluster
from shepherd_ha.cli.rolling_restart import roll
from shepherd_ha.client import ApiError, Client
from shepherd_ha.cluster_identity import new_cluster_id
from shepherd_ha.options import ConfigError
from shepherd_ha.tls import kubeconfig, pki
from shepherd_ha.tls.outbound import Outbound

from .helpers import Cluster, free_base_port

pytestmark = pytest.mark.integration

NS = "default"


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, request):
    c = Cluster(tmp_path_factory.mktemp("tlsops"), replicas=3, auth=True, tls=True)
    request.addfinalizer(c.stop_all)
    c.start()
    return c


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory):
    return pki.create_ca(str(tmp_path_factory.mktemp("other-ca")))


def _served(url, ca_file):
    """The certificate the server at `url` shows (verified against ca_file)."""
    parts = urllib.parse.urlsplit(url)
    ctx = ssl.create_default_context(cafile=ca_file)
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=parts.hostname) as tls:
            return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True))


def _client_files(lc):
    with open(os.path.join(lc.dir, "config")) as fh:
        config = yaml.safe_load(fh)
    with open(lc.kubeconfig_path) as fh:
        kube = kubeconfig.read(yaml.safe_load(fh), lc.kubeconfig_path)
    return config, kube


def _quiet(_line):
    pass


def test_add_replica_issues_its_certificate_and_remove_replica_drops_it_from_the_client_files(tls_cluster):
    lc = tls_cluster.lc
    ident = local_members.add_replica(lc, progress=_quiet)
    member = lc.replica(ident)
    try:
        assert member["api"].startswith("https://127.0.0.1:"), member
        cert = pki.read_certificate(os.path.join(lc.dir, ident, "tls.crt"))
        assert cert.issuer == pki.read_certificate(lc.ca_file).subject
        dns, ips = pki.subject_alt_names(cert)
        assert ident in dns and "127.0.0.1" in ips, (dns, ips)
        assert _served(member["api"], lc.ca_file).serial_number == cert.serial_number, \
            "the new replica serves its own certificate, not the template's"
        config, kube = _client_files(lc)
        assert config["servers"] == lc.api_urls() and member["api"] in config["servers"]
        assert kube["servers"] == lc.api_urls() and kube["cluster_id"] == lc.cluster_id()
        # The others reach it over verified TLS (the cluster view asks every peer).
        view = requests.get(lc.api_urls()[0] + "/shepherd/v1/cluster", headers=lc.auth_headers(),
                            verify=lc.ca_file, timeout=10).json()
        row = next(r for r in view["replicas"] if r["id"] == ident)
        assert row["reachable"], row
        with Client([member["api"]], timeout=5.0, **lc.client_options()) as client:
            assert client.list("configmaps", namespace=NS)["items"] is not None
        # The peers written for the next start carry https URLs.
        with open(os.path.join(lc.dir, "r1", "server.yaml")) as fh:
            assert "%s@%s/%s" % (ident, member["raft"], member["api"]) in yaml.safe_load(fh)["peers"]
    finally:
        local_members.remove_replica(lc, ident, progress=_quiet)
    config, kube = _client_files(lc)
    assert member["api"] not in config["servers"] and member["api"] not in kube["servers"]
    assert sorted(config["servers"]) == sorted(lc.api_urls()) and len(config["servers"]) == 3


def test_join_asks_the_members_over_https_verified_against_the_cluster_ca(tls_cluster, other_ca):
    lc = tls_cluster.lc
    with open(os.path.join(lc.dir, "raft-password")) as fh:
        password = fh.read().strip()
    peer_token = ReplicaCredentials(password, lc.spec()["raft_salt"]).peer_token     # what --join shows
    members = join.ask(lc.api_urls(), peer_token, timeout=10, outbound=Outbound(tls=True, ca_file=lc.ca_file))
    assert sorted(m["id"] for m in members) == sorted(lc.ids())
    assert all(m["api"].startswith("https://") for m in members), members
    with pytest.raises(ConfigError) as err:
        join.ask(lc.api_urls()[:1], peer_token, timeout=0.5, outbound=Outbound(tls=True, ca_file=other_ca.cert_path))
    assert "TLS: certificate verify failed" in str(err.value), err.value


def test_the_membership_api_wants_an_https_url_for_a_new_replica_on_a_tls_cluster(tls_cluster):
    lc = tls_cluster.lc
    reply = requests.post(lc.api_urls()[0] + "/shepherd/v1/members", headers=lc.auth_headers(), verify=lc.ca_file,
                          json={"id": "r9", "raft": "127.0.0.1:1", "api": "http://127.0.0.1:2"}, timeout=10)
    assert reply.status_code == 422 and "https://" in reply.json()["message"], reply.text


def test_a_new_replica_whose_certificate_the_cluster_ca_did_not_sign_is_refused(tls_cluster, other_ca, tmp_path):
    """The leader probes a new replica's /version over the cluster CA before adding it."""
    lc = tls_cluster.lc
    cert, key = pki.issue_files(other_ca, str(tmp_path), "impostor", "r9", ["r9", "127.0.0.1", "localhost"],
                                server=True, client=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _VersionR9)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        api = "https://127.0.0.1:%d" % server.server_address[1]
        reply = requests.post(lc.api_urls()[1] + "/shepherd/v1/members", headers=lc.auth_headers(),
                              verify=lc.ca_file, json={"id": "r9", "raft": "127.0.0.1:1", "api": api}, timeout=30)
        assert reply.status_code == 409, reply.text
        assert "fails TLS verification against the cluster CA" in reply.json()["message"], reply.text
        assert sorted(m["id"] for m in local_members.members(lc)["members"]) == sorted(lc.ids())
    finally:
        server.shutdown()
        server.server_close()


class _VersionR9(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"replica": "r9"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_followers_cluster_view_has_the_leaders_progress_over_tls(tls_cluster):
    lc = tls_cluster.lc
    leader = lc.leader()
    follower = next(i for i in lc.ids() if i != leader)
    view = requests.get(lc.replica(follower)["api"] + "/shepherd/v1/cluster", headers=lc.auth_headers(),
                        verify=lc.ca_file, timeout=10).json()
    assert view["leader"] == leader and all(r["reachable"] for r in view["replicas"]), view
    assert view["membership"]["progressKnown"] and view["membership"]["seenBy"] == leader, view["membership"]


def test_another_clusters_client_and_agent_are_refused_over_https(tls_cluster, tmp_path):
    lc = tls_cluster.lc
    theirs = new_cluster_id()
    with Client(lc.api_urls()[1:2], timeout=5.0, **dict(lc.client_options(), cluster_id=theirs)) as client:
        with pytest.raises(ApiError) as err:
            client.list("pods", namespace=NS)
    assert err.value.code == 421 and "another cluster" in str(err.value)
    # A real agent configured for another cluster stops at start, having asked over verified HTTPS.
    done = subprocess.run([sys.executable, "-m", "agent.main", "--servers", ",".join(lc.api_urls()), "--runtime",
                           "hollow", "--node-name", "tlsops-wrong", "--cluster-id", theirs, "--ca-file", lc.ca_file,
                           "--state-dir", str(tmp_path / "agent-state")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "this agent's config names cluster %s" % theirs in done.stderr, \
        done.stdout + done.stderr
    agent = types.SimpleNamespace(servers=lc.api_urls(), cluster_id=theirs, ca_file=lc.ca_file)
    assert "this agent's config names cluster %s" % theirs in (other_cluster(agent) or "")
    assert other_cluster(types.SimpleNamespace(servers=lc.api_urls(), cluster_id=lc.cluster_id(),
                                               ca_file=lc.ca_file)) is None


def test_snapshot_over_tls_restores_into_a_cluster_with_a_ca_of_its_own(tls_cluster, tmp_path, capsys):
    lc = tls_cluster.lc
    with Client(lc.api_urls(), timeout=5.0, **lc.client_options()) as client:
        client.create("configmaps", {"metadata": {"name": "tls-snap"}, "data": {"k": "v"}}, namespace=NS)
    path = str(tmp_path / "tls.snap")
    assert sheepctl(["--kubeconfig", lc.kubeconfig_path, "cluster", "snapshot", "save", path]) == 0, \
        capsys.readouterr()
    directory = str(tmp_path / "restored")
    done = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "restore", "--snapshot", path, "--dir",
                           directory, "--replicas", "1", "--base-port", str(free_base_port(1))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    new = LocalCluster(directory)
    assert new.tls and new.api_urls()[0].startswith("https://")
    assert "new cluster CA" in done.stdout and "Raft password, tokens and CA" in done.stdout, done.stdout
    new_ca, old_ca = pki.read_certificate(new.ca_file), pki.read_certificate(lc.ca_file)
    assert new_ca.public_key().public_numbers() != old_ca.public_key().public_numbers(), "a CA of its own"
    with open(os.path.join(directory, "r1", "server.yaml")) as fh:
        server = yaml.safe_load(fh)
    assert server["tls_cert_file"] == os.path.join(os.path.abspath(directory), "r1", "tls.crt")
    try:
        up = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "local", "up", "--dir", directory,
                             "--agents", "0"], capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stdout + up.stderr
        with Client(new.api_urls(), timeout=5.0, **new.client_options()) as client:
            assert client.get("configmaps", "tls-snap", namespace=NS)["data"] == {"k": "v"}
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(new.api_urls()[0] + "/readyz", verify=lc.ca_file, timeout=5)
        capsys.readouterr()
        assert sheepctl(["--kubeconfig", new.kubeconfig_path, "get", "configmaps", "tls-snap"]) == 0
        assert "tls-snap" in capsys.readouterr().out
        config, kube = _client_files(new)
        assert config["cluster_id"] == kube["cluster_id"] == new.cluster_id() != lc.cluster_id()
    finally:
        new.stop_all(timeout=5.0)


def test_local_roll_over_tls(tls_cluster):
    lc = tls_cluster.lc
    pids = {i: lc.pid(i) for i in lc.ids()}
    lines = []
    result = roll(lc, timeout=60.0, progress=lines.append)
    text = "\n".join(lines)
    assert sorted(result["order"]) == sorted(lc.ids()) and all(lc.pid(i) not in (None, pids[i]) for i in lc.ids())
    assert result["acked"] > 5 and result["failed"] == 0, text
    for url in lc.api_urls():
        assert requests.get(url + "/readyz", verify=lc.ca_file, timeout=5).status_code == 200
