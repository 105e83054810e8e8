"""Cluster identity (shepherd_ha/cluster_identity.py): the id a data dir keeps, the Raft
cipher refusing another cluster's messages, the API's 421, and where `local up` writes it."""
import logging

import pytest
import yaml
from flask import Flask

from agent import config as agent_config
from agent.main import build_parser
from shepherd_ha import cluster_identity as ci
from shepherd_ha.api import cluster_check
from shepherd_ha.api.app import create_app
from shepherd_ha.cli.local_cluster import LocalCluster, find_base_port
from shepherd_ha.client import Client
from shepherd_ha.store.raft_cipher import InvalidToken, RaftCipher

A = "a" * 32
B = "b" * 32
SALT = "5a" * 16


def test_a_new_data_dir_keeps_the_configured_id_and_refuses_another_later(tmp_path):
    data = tmp_path / "data"
    assert ci.resolve_replica_id(str(data), A, "pw") == A
    assert (data / "cluster-id").read_text().strip() == A
    assert ci.resolve_replica_id(str(data), A, "pw") == A
    assert ci.resolve_replica_id(str(data), None, "pw") == A          # the data dir remembers it
    with pytest.raises(ci.IdentityError, match="belongs to cluster %s, but --cluster-id says %s" % (A, B)):
        ci.resolve_replica_id(str(data), B, "pw")


def test_an_old_data_dir_adopts_the_id_derived_from_the_password_and_says_so(tmp_path, caplog):
    old = tmp_path / "old"
    old.mkdir()
    (old / "raft.journal").write_bytes(b"x")
    with caplog.at_level(logging.WARNING, logger="shepherd_ha.cluster_identity"):
        adopted = ci.resolve_replica_id(str(old), None, "the-password")
    assert adopted == ci.derived_cluster_id("the-password") != ci.derived_cluster_id("another")
    assert len(adopted) == 32 and adopted == ci.check_format(adopted, "x")
    assert "has no cluster id" in caplog.text and adopted in caplog.text
    other = tmp_path / "other"
    assert ci.resolve_replica_id(str(other), None, "the-password") == adopted   # every replica alike


def test_malformed_ids_are_refused(tmp_path):
    for bad in ("", "xyz", "A" * 32, "a" * 31, "a" * 33):
        with pytest.raises(ci.IdentityError, match="32 lowercase hex"):
            ci.resolve_replica_id(str(tmp_path / "d"), bad, "pw")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / "cluster-id").write_text("garbage\n")
    with pytest.raises(ci.IdentityError, match="garbage"):
        ci.resolve_replica_id(str(tmp_path / "e"), None, "pw")


def test_raft_messages_of_another_cluster_are_refused_naming_both_ids(caplog):
    ours, same, theirs = RaftCipher("pw", SALT, A), RaftCipher("pw", SALT, A), RaftCipher("pw", SALT, B)
    assert same.decrypt(ours.encrypt_at_time(b"append", 5)) == b"append"
    token = theirs.encrypt_at_time(b"append", 5)
    with caplog.at_level(logging.ERROR, logger="shepherd_ha.store.raft_cipher"):
        with pytest.raises(InvalidToken, match="belong to cluster %s, this replica to cluster %s" % (B, A)):
            ours.decrypt(token)
        with pytest.raises(InvalidToken):
            ours.decrypt(token)
    assert caplog.text.count("refused a Raft connection") == 1, "logged once a minute per foreign cluster"
    # The id is authenticated: a message rewritten to claim our id fails the tag.
    forged = bytearray(token)
    forged[21:37] = bytes.fromhex(A)
    with pytest.raises(InvalidToken, match="authentication"):
        ours.decrypt(bytes(forged))


def _app(cluster_id):
    app = Flask("t")
    cluster_check.install(app, cluster_id)
    from shepherd_ha.api.errors import ApiError, error_response
    app.register_error_handler(ApiError, error_response)
    app.add_url_rule("/api/v1/pods", "pods", lambda: "ok")
    app.add_url_rule("/version", "version", lambda: "v")
    return app.test_client()


def test_the_api_answers_421_to_a_caller_of_another_cluster():
    client = _app(A)
    assert client.get("/api/v1/pods").status_code == 200                          # no header: older clients
    assert client.get("/api/v1/pods", headers={ci.HEADER: A}).status_code == 200
    wrong = client.get("/api/v1/pods", headers={ci.HEADER: B})
    assert wrong.status_code == 421
    body = wrong.get_json()
    assert body["reason"] == "WrongCluster"
    assert "names cluster %s, but this is cluster %s" % (B, A) in body["message"]
    assert client.get("/version", headers={ci.HEADER: B}).status_code == 200     # how a caller finds out


def test_version_answers_the_cluster_id():
    class Stub:
        id, cluster_id = "r1", A
    assert create_app(Stub()).test_client().get("/version").get_json()["clusterId"] == A


def test_clients_send_their_cluster_id():
    assert Client(["http://h:1"], cluster_id=A)._headers()[ci.HEADER] == A
    assert ci.HEADER not in Client(["http://h:1"])._headers()


def test_agent_config_takes_a_cluster_id_and_checks_its_form():
    def settings(*extra):
        args = build_parser().parse_args(["--servers", "http://h:1", "--node-name", "n1"] + list(extra))
        return agent_config.settings(agent_config.resolve(args, environ={}))
    assert settings("--cluster-id", A).cluster_id == A
    assert settings().cluster_id is None
    with pytest.raises(agent_config.ConfigError, match="32 lowercase hex"):
        settings("--cluster-id", "nope")


def test_local_up_writes_one_id_into_every_replica_agent_and_client_config(tmp_path):
    cluster = LocalCluster(str(tmp_path / "c"))
    cluster.create(3, find_base_port(3))
    cluster.add_agent("node-1", runtime="hollow")
    ident = cluster.cluster_id()
    assert len(ident) == 32 and ident == cluster.spec()["cluster_id"]
    for r in cluster.ids():
        assert yaml.safe_load((tmp_path / "c" / r / "server.yaml").read_text())["cluster_id"] == ident
    assert yaml.safe_load((tmp_path / "c" / "agents" / "node-1" / "agent.yaml").read_text())["cluster_id"] == ident
    assert yaml.safe_load((tmp_path / "c" / "config").read_text())["cluster_id"] == ident
    other = LocalCluster(str(tmp_path / "d"))
    other.create(1, find_base_port(1))
    assert other.cluster_id() != ident


def test_sheepctl_takes_the_cluster_id_from_its_config_file_only_with_its_servers(tmp_path):
    from ctl import config as ctl_config
    path = tmp_path / "config"
    path.write_text("servers: [http://h:1]\ncluster_id: %s\n" % A)
    assert ctl_config.resolve(config_arg=str(path), env={}).cluster_id == A
    # Servers named elsewhere: the file's cluster id is not theirs.
    assert ctl_config.resolve(server_arg="http://other:1", config_arg=str(path), env={}).cluster_id is None


def test_a_replica_of_a_release_before_cluster_ids_is_refused_and_named(caplog):
    import struct
    old = struct.pack(">BQ12s", 1, 5, bytes(12)) + b"ciphertext and tag"
    with caplog.at_level(logging.ERROR, logger="shepherd_ha.store.raft_cipher"):
        with pytest.raises(InvalidToken, match="message version 1"):
            RaftCipher("pw", SALT, A).extract_timestamp(old)
    assert "a release before cluster ids" in caplog.text
