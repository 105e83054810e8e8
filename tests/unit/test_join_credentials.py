"""`server --join` asks for the members with the scrypt-derived peer token, which the members
endpoint accepts (a read) and nothing else, and keeps members.json private (0600, dir 0700)."""
import json
import os
import threading
import types

import pytest
from flask import Flask
from werkzeug.serving import make_server

from shepherd_ha.api import auth, membership
from shepherd_ha.api.errors import ApiError, error_response
from shepherd_ha.api.replica_credentials import ReplicaCredentials
from shepherd_ha.cli import join
from shepherd_ha.options import ConfigError
from tests.unit.test_api_auth import ADMIN

SALT = "0f" * 16
CREDS = ReplicaCredentials("correct-horse-battery-staple-42", SALT)
MEMBERS = [{"id": "r1", "raft": "127.0.0.1:7001", "api": "http://127.0.0.1:8001"}]


class Members:
    def __init__(self):
        self.seen = []

    def __call__(self, environ, start_response):
        self.seen.append(environ.get("HTTP_AUTHORIZATION"))
        ok = environ.get("HTTP_AUTHORIZATION") == "Bearer " + CREDS.peer_token
        start_response("200 OK" if ok else "401 Unauthorized", [("Content-Type", "application/json")])
        return [json.dumps({"members": MEMBERS} if ok else {"message": "no"}).encode()]


@pytest.fixture
def members_server():
    app = Members()
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield app, "http://127.0.0.1:%d" % server.server_port
    server.shutdown()
    thread.join(5)


def test_join_shows_the_peer_token_and_writes_members_json_private(members_server, tmp_path):
    app, url = members_server
    settings = types.SimpleNamespace(data_dir=str(tmp_path / "data"), self_address="127.0.0.1:7004")
    peers, first = join.peers_to_join({"join": url, "id": "r4"}, settings, CREDS.peer_token)
    assert first and [p.raft for p in peers] == ["127.0.0.1:7001"]
    assert app.seen == ["Bearer " + CREDS.peer_token]
    saved = tmp_path / "data" / join.MEMBERS_FILE
    assert json.loads(saved.read_text()) == MEMBERS
    assert os.stat(saved).st_mode & 0o777 == 0o600 and os.stat(saved.parent).st_mode & 0o777 == 0o700


def test_join_with_another_token_is_refused_naming_the_password_and_salt(members_server, tmp_path):
    _, url = members_server
    other = ReplicaCredentials("correct-horse-battery-staple-42", "e0" * 16)      # another salt
    with pytest.raises(ConfigError, match="--raft-salt"):
        join.ask([url], other.peer_token, timeout=0.1)


class OneReplica:
    """What api/membership.py asks of a replica; changes record that they were let through."""
    changed = False

    def membership(self):
        return {"progressKnown": True, "leader": "r1", "members": MEMBERS}

    def add_member(self, *args):
        self.changed = True
        return {"members": MEMBERS}

    remove_member = add_member


def test_the_members_endpoint_lets_the_peer_token_read_but_not_change(tmp_path):
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('%s,alice,u1,"system:masters"\n' % ADMIN)
    app = Flask("t")
    auth.install(app, auth.load_token_file(str(tokens), CREDS.accepted_peer_tokens))
    app.register_error_handler(ApiError, error_response)
    replica = OneReplica()
    membership.register(app, replica)
    client = app.test_client()
    peer = {"Authorization": "Bearer " + CREDS.peer_token}
    reply = client.get("/shepherd/v1/members", headers=peer)
    assert reply.status_code == 200 and reply.json["members"] == MEMBERS
    body = {"id": "r4", "raft": "127.0.0.1:7004", "api": "http://127.0.0.1:8004", "force": True}
    assert client.post("/shepherd/v1/members", json=body, headers=peer).status_code == 403
    assert client.delete("/shepherd/v1/members/r1", headers=peer).status_code == 403
    assert not replica.changed
    other = ReplicaCredentials("correct-horse-battery-staple-42", "e0" * 16)     # another salt's token
    assert client.get("/shepherd/v1/members", headers={"Authorization": "Bearer " + other.peer_token}).status_code == 401
