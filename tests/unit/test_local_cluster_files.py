"""The files `shepherd-ha local up` writes that hold the Raft password are private from the start."""
import os
import stat

import pytest

from shepherd_ha.cli.local_cluster import LocalCluster, LocalClusterError, find_base_port, write_private
from shepherd_ha.store import raft_secrets


def test_password_and_spec_are_owner_only_even_with_an_open_umask(tmp_path):
    old = os.umask(0)
    try:
        cluster = LocalCluster(str(tmp_path / "c"))
        cluster.create(3, find_base_port(3))
        cluster.add_agent("node-1", runtime="hollow")      # rewrites the spec
    finally:
        os.umask(old)
    for name in ("raft-password", "cluster.yaml"):
        assert stat.S_IMODE(os.stat(tmp_path / "c" / name).st_mode) == 0o600, name
    password = (tmp_path / "c" / "raft-password").read_text().strip()
    assert cluster.spec()["raft_password"] == password
    raft_secrets.check_password(password)                  # a generated one passes the hand-given bar
    salt = cluster.spec()["raft_salt"]
    assert len(raft_secrets.salt_bytes(salt)) >= 16
    other = LocalCluster(str(tmp_path / "d"))
    other.create(3, find_base_port(3))
    assert other.spec()["raft_salt"] != salt and other.spec()["raft_password"] != password


def test_write_private_tightens_an_existing_file(tmp_path):
    path = tmp_path / "secret"
    path.write_text("old")
    os.chmod(path, 0o644)
    write_private(str(path), "new")
    assert path.read_text() == "new" and stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_cluster_with_auth_gets_private_tokens_wired_to_servers_agents_and_client(tmp_path):
    import yaml
    from shepherd_ha.api import auth
    cluster = LocalCluster(str(tmp_path / "c"))
    cluster.create(3, find_base_port(3), auth=True)
    agent_config = cluster.add_agent("node-1", runtime="hollow")
    root = tmp_path / "c"
    cluster.add_agent("node-2", runtime="hollow")
    for name in ("tokens.csv", "config", "agents/node-1/token", "agents/node-2/token"):
        assert stat.S_IMODE(os.stat(root / name).st_mode) == 0o600, name
    tokens = auth.load_token_file(str(root / "tokens.csv"))
    admin = tokens.authenticate(cluster.token())
    assert admin.groups == (auth.GROUP_ADMIN,)
    # each node its own identity (Kubernetes' system:node:NAME in system:nodes), no shared node token
    for node in ("node-1", "node-2"):
        user = tokens.authenticate((root / "agents" / node / "token").read_text().strip())
        assert user.name == "system:node:" + node and user.groups == (auth.GROUP_NODES,)
    assert cluster.node_token("node-1") != cluster.node_token("node-2")
    assert not (root / "node-token").exists()
    assert yaml.safe_load((root / "config").read_text())["token"] == cluster.token()
    for ident in cluster.ids():
        assert yaml.safe_load((root / ident / "server.yaml").read_text())["token_file"] == str(root / "tokens.csv")
    with open(agent_config) as fh:
        assert yaml.safe_load(fh)["token_file"] == str(root / "agents" / "node-1" / "token")
    cluster.add_agent("node-1", runtime="hollow")        # re-adding keeps the node's token
    assert tokens.authenticate((root / "agents" / "node-1" / "token").read_text().strip()).name == "system:node:node-1"
    assert cluster.auth_headers() == {"Authorization": "Bearer " + cluster.token()}

    plain = LocalCluster(str(tmp_path / "p"))
    plain.create(3, find_base_port(3))
    assert plain.token() is None and plain.auth_headers() == {} and not os.path.exists(plain.token_file)
    assert "token" not in yaml.safe_load((tmp_path / "p" / "config").read_text())


def test_a_new_cluster_has_a_ca_certificates_for_every_replica_and_agent_and_a_kubeconfig(tmp_path):
    import yaml
    from shepherd_ha.tls import pki
    cluster = LocalCluster(str(tmp_path / "c"))
    cluster.create(2, find_base_port(2), auth=True)
    agent_config = yaml.safe_load(open(cluster.add_agent("node-1", runtime="hollow")))
    root = tmp_path / "c"
    assert cluster.tls and cluster.api_urls()[0].startswith("https://127.0.0.1:")
    assert stat.S_IMODE(os.stat(root / "ca.key").st_mode) == 0o600
    for ident in cluster.ids():
        server = yaml.safe_load(open(root / ident / "server.yaml"))
        assert stat.S_IMODE(os.stat(server["tls_private_key_file"]).st_mode) == 0o600
        assert server["client_ca_file"] == server["cluster_ca_file"] == str(root / "ca.crt")
        assert "insecure_http" not in server
        assert all("https://" in peer for peer in server["peers"].split(","))
        dns, ips = pki.subject_alt_names(pki.read_certificate(server["tls_cert_file"]))
        assert ident in dns and "localhost" in dns and "127.0.0.1" in ips
    assert agent_config["ca_file"] == str(root / "ca.crt")
    dns, ips = pki.subject_alt_names(pki.read_certificate(agent_config["tls_cert_file"]))
    assert "node-1" in dns and "127.0.0.1" in ips
    config = yaml.safe_load(open(root / "config"))
    assert config["certificate-authority"] == "ca.crt" and config["servers"] == cluster.api_urls()
    kube = yaml.safe_load(open(root / "kubeconfig"))
    assert kube["users"][0]["user"]["token"] == cluster.token()
    assert stat.S_IMODE(os.stat(root / "kubeconfig").st_mode) == 0o600
    assert cluster._legacy_flags() == []


def test_the_kubeconfig_has_a_context_per_replica_that_the_python_client_follows(tmp_path):
    """The Python client and client-go take one server per context: a context per replica
    lets them go to another replica by name; the current context and sheepctl's failover
    list are unchanged."""
    import kubernetes
    from shepherd_ha.tls import kubeconfig
    cluster = LocalCluster(str(tmp_path / "c"))
    cluster.create(3, find_base_port(3), auth=True)
    path = cluster.kubeconfig_path
    contexts, current = kubernetes.config.list_kube_config_contexts(config_file=path)
    assert current["name"] == "shepherd"
    assert [c["name"] for c in contexts] == ["shepherd", "shepherd-r1", "shepherd-r2", "shepherd-r3"]
    for ident, url in zip(cluster.ids(), cluster.api_urls()):
        config = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=path, context="shepherd-" + ident,
                                           client_configuration=config)
        assert config.host == url
        assert config.api_key["BearerToken"] == "Bearer " + cluster.token()
        assert open(config.ssl_ca_cert, "rb").read() == open(cluster.ca_file, "rb").read()
    import yaml
    data = yaml.safe_load(open(path))
    assert kubeconfig.read(data, path)["servers"] == cluster.api_urls()
    one = kubeconfig.read(data, path, context="shepherd-r2")
    assert one["servers"] == [cluster.api_urls()[1]] and one["cluster_id"] == cluster.cluster_id()
    assert one["token"] == cluster.token()


def test_plain_http_only_when_asked_and_old_clusters_keep_it(tmp_path):
    import yaml
    cluster = LocalCluster(str(tmp_path / "plain"))
    cluster.create(1, find_base_port(1), tls=False)
    assert not cluster.tls and cluster.ca_file is None and cluster.api_urls()[0].startswith("http://")
    assert yaml.safe_load(open(tmp_path / "plain" / "r1" / "server.yaml"))["insecure_http"] is True
    assert not (tmp_path / "plain" / "ca.key").exists() and not (tmp_path / "plain" / "kubeconfig").exists()
    spec = cluster.spec()
    del spec["tls"]                        # a cluster made before TLS existed
    cluster._write_spec(spec)
    assert cluster._legacy_flags() == ["--insecure-http"]


def test_local_certs_issues_new_certificates_from_the_same_ca(tmp_path, capsys):
    import yaml
    from shepherd_ha.cli import main as cli_main
    from shepherd_ha.tls import pki
    cluster = LocalCluster(str(tmp_path / "c"))
    cluster.create(2, find_base_port(2))
    agent = yaml.safe_load(open(cluster.add_agent("node-1", runtime="hollow")))
    server = yaml.safe_load(open(tmp_path / "c" / "r1" / "server.yaml"))
    before = {p: pki.read_certificate(p).serial_number for p in (server["tls_cert_file"], agent["tls_cert_file"])}
    ca_before = (tmp_path / "c" / "ca.crt").read_bytes()
    assert cli_main.main(["local", "certs", "--dir", str(tmp_path / "c")]) == 0
    assert "r1, r2, node-1" in capsys.readouterr().out
    assert (tmp_path / "c" / "ca.crt").read_bytes() == ca_before
    for path, serial in before.items():
        cert = pki.read_certificate(path)
        assert cert.serial_number != serial and cert.issuer == pki.read_certificate(str(tmp_path / "c" / "ca.crt")).subject
    plain = LocalCluster(str(tmp_path / "p"))
    plain.create(1, find_base_port(1), tls=False)
    assert cli_main.main(["local", "certs", "--dir", str(tmp_path / "p")]) == 1
    assert "plain HTTP" in capsys.readouterr().err
def test_a_cluster_made_before_the_salt_gets_one_on_up(tmp_path):
    import yaml
    cluster = LocalCluster(str(tmp_path / "old"))
    cluster.create(3, find_base_port(3))
    spec = cluster.spec()
    del spec["raft_salt"]
    cluster._write_spec(spec)
    for ident in cluster.ids():
        path = tmp_path / "old" / ident / "server.yaml"
        server = yaml.safe_load(path.read_text())
        del server["raft_salt"]
        path.write_text(yaml.safe_dump(server))
    assert cluster.add_raft_salt() is True
    salts = {yaml.safe_load((tmp_path / "old" / i / "server.yaml").read_text())["raft_salt"] for i in cluster.ids()}
    assert salts == {cluster.spec()["raft_salt"]} and len(raft_secrets.salt_bytes(salts.pop())) == 16
    assert cluster.add_raft_salt() is False                 # once only


def test_create_on_free_ports_moves_on_when_a_port_was_taken_meanwhile(tmp_path, monkeypatch):
    import socket

    from shepherd_ha.cli import local_cluster
    taken_base = find_base_port(1)
    holder = socket.socket()
    holder.bind(("127.0.0.1", taken_base + 1))      # replica r1's API port, bound after the search
    holder.listen()
    try:
        found = [taken_base]

        def search(replicas, low, high):
            if found:
                return found.pop()
            return find_base_port(replicas, low=low, high=high)
        monkeypatch.setattr(local_cluster, "find_base_port", search)
        cluster = LocalCluster(str(tmp_path / "c"))
        free_base = cluster.create_on_free_ports(1, tls=False)
        assert free_base != taken_base and cluster.spec()["base_port"] == free_base
        # a failure that another port cannot fix is not retried
        with pytest.raises(local_cluster.LocalClusterError, match="--replicas must be at least 1"):
            LocalCluster(str(tmp_path / "bad")).create_on_free_ports(0)
    finally:
        holder.close()


def test_a_cluster_of_its_own_networks_gives_them_to_replicas_and_agents(tmp_path):
    """`local up --cluster-cidr --service-cidr`: a second cluster on one Docker engine."""
    import argparse

    import yaml

    from shepherd_ha.cli.local import _networks
    args = argparse.Namespace(cluster_cidr="10.232.0.0/16", service_cidr="10.112.0.0/12")
    cluster = LocalCluster(str(tmp_path / "c"))
    cluster.create_on_free_ports(2, tls=False, networks=_networks(args))
    cluster.add_agent("b-1", runtime="hollow")
    for path in (tmp_path / "c" / "r1" / "server.yaml", tmp_path / "c" / "agents" / "b-1" / "agent.yaml"):
        config = yaml.safe_load(path.read_text())
        assert config["cluster_cidr"] == "10.232.0.0/16" and config["service_cidr"] == "10.112.0.0/12", path
    plain = LocalCluster(str(tmp_path / "plain"))
    plain.create_on_free_ports(1, tls=False, networks=_networks(argparse.Namespace(cluster_cidr=None,
                                                                                   service_cidr=None)))
    assert "cluster_cidr" not in yaml.safe_load((tmp_path / "plain" / "r1" / "server.yaml").read_text())
    for bad, flag in ((dict(cluster_cidr="10.232.0.1/16", service_cidr=None), "--cluster-cidr"),
                      (dict(cluster_cidr=None, service_cidr="fd00::/64"), "--service-cidr")):
        with pytest.raises(LocalClusterError, match=flag):
            _networks(argparse.Namespace(**bad))
