"""The agent verifies the replicas' log grants (agent/log_access.py, api/replica_credentials.py)."""
import pytest

from agent.log_access import CLOCK_SKEW_SECONDS, KEY_REFRESH_SECONDS, CannotCheck, LogAccess
from shepherd_ha.api.replica_credentials import LOG_GRANT_SECONDS, ReplicaCredentials
from shepherd_ha.client import NoReplicaReachable

PASSWORD = "correct-horse-battery-staple-42"
OURS = ReplicaCredentials(PASSWORD, "00" * 16)
ROTATED = ReplicaCredentials(PASSWORD + "-rotated", "00" * 16)


@pytest.fixture
def world():
    now, mono, fetched = [1000.0], [50.0], []
    keys = [OURS.log_grant_key]

    def fetch():
        fetched.append(mono[0])
        if isinstance(keys[0], Exception):
            raise keys[0]
        return keys[0]
    access = LogAccess([], "n1", "node-token", clock=lambda: now[0], monotonic=lambda: mono[0], fetch_key=fetch)
    return access, now, mono, fetched, keys


def grant(creds=OURS, node="n1", namespace="default", pod="web", container="app", at=1000.0, uid="u1"):
    return creds.log_grant(node, namespace, pod, container, uid, now=at)


def test_a_grant_opens_exactly_its_container_on_its_node(world):
    access, *_ = world
    assert access.may_read(grant(), "default", "web", "app") is None
    assert access.pod_uid(grant()) == "u1"
    for other, wanted in ((grant(node="n2"), "node"), (grant(namespace="kube"), "namespace"),
                          (grant(pod="db"), "pod"), (grant(container="sidecar"), "container")):
        assert wanted in access.may_read(other, "default", "web", "app")


def test_no_grant_a_token_or_a_tampered_grant_is_refused(world):
    access, *_ = world
    assert "no log grant" in access.may_read(None, "default", "web", "app")
    assert "no log grant" in access.may_read("Bearer " + OURS.peer_token, "default", "web", "app")
    good = grant()
    scheme, _, value = good.partition(" ")
    version, body, signature = value.split(".")
    forged = "%s %s.%s.%s" % (scheme, version, grant(pod="db").split(".")[1], signature)
    assert "not signed" in access.may_read(forged, "default", "db", "app")
    assert "malformed" in access.may_read(scheme + " v1.!!!.???", "default", "web", "app")


def test_expired_and_far_future_grants_are_refused(world):
    access, now, *_ = world
    now[0] = 1000.0 + LOG_GRANT_SECONDS + CLOCK_SKEW_SECONDS + 1
    assert "expired" in access.may_read(grant(), "default", "web", "app")
    now[0] = 1000.0
    far = grant(at=1000.0 + 3600)
    assert "too far ahead" in access.may_read(far, "default", "web", "app")


def test_the_key_is_fetched_once_and_again_after_a_rotation(world):
    access, now, mono, fetched, keys = world
    assert access.may_read(grant(), "default", "web", "app") is None
    assert access.may_read(grant(), "default", "web", "app") is None
    assert len(fetched) == 1
    keys[0] = ROTATED.log_grant_key            # the Raft secret was rotated
    assert "not signed" in access.may_read(grant(ROTATED), "default", "web", "app")   # too soon to refetch
    mono[0] += KEY_REFRESH_SECONDS
    assert access.may_read(grant(ROTATED), "default", "web", "app") is None
    assert len(fetched) == 2


def test_without_any_key_the_agent_cannot_check(world):
    access, _, _, _, keys = world
    keys[0] = NoReplicaReachable(["http://127.0.0.1:1"], "connection refused")
    with pytest.raises(CannotCheck):
        access.may_read(grant(), "default", "web", "app")


def test_credentials_depend_on_password_and_salt_and_cost_a_scrypt():
    other_salt = ReplicaCredentials(PASSWORD, "11" * 16)
    assert len({OURS.peer_token, ROTATED.peer_token, other_salt.peer_token}) == 3
    assert len({OURS.log_grant_key, ROTATED.log_grant_key, other_salt.log_grant_key}) == 3
    import hashlib
    import hmac
    old_oracle = hmac.new(PASSWORD.encode(), b"shepherd-ha replica status token v1", hashlib.sha256).hexdigest()
    assert OURS.peer_token != old_oracle
    from shepherd_ha.api import replica_credentials
    assert replica_credentials.SCRYPT["n"] >= 2 ** 15


def test_during_a_rotation_grants_of_either_key_verify(world):
    access, _, _, _, keys = world
    keys[0] = [ROTATED.log_grant_key, OURS.log_grant_key]
    assert access.may_read(grant(ROTATED), "default", "web", "app") is None
    assert access.may_read(grant(OURS), "default", "web", "app") is None


def test_credentials_list_what_a_rotating_replica_accepts():
    rotating = ReplicaCredentials(PASSWORD + "-rotated", "00" * 16, also_accepted=[PASSWORD])
    assert rotating.peer_token == ROTATED.peer_token
    assert rotating.accepted_peer_tokens == [ROTATED.peer_token, OURS.peer_token]
    assert rotating.log_grant_keys == [ROTATED.log_grant_key, OURS.log_grant_key]


def test_the_key_comes_only_from_replicas_of_the_agents_cluster():
    """The agent's key fetch says its cluster id (api/cluster_check.py answers 421 to
    another cluster's callers), so another cluster's replicas cannot hand it their key."""
    import threading

    from flask import Flask
    from werkzeug.serving import make_server

    from agent.log_access import _fetch_key
    from shepherd_ha.api import cluster_check
    from shepherd_ha.api.errors import ApiError, error_response
    from shepherd_ha.log_grants import KEY_PATH

    app = Flask("t")
    app.register_error_handler(ApiError, error_response)
    cluster_check.install(app, "a" * 32)
    app.add_url_rule(KEY_PATH, "key", lambda: {"algorithm": "Ed25519", "keys": [OURS.log_grant_key]})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = "http://127.0.0.1:%d" % server.server_port
        assert _fetch_key([url], "node-token", "a" * 32) == [OURS.log_grant_key]
        with pytest.raises(Exception, match="(?i)cluster"):
            _fetch_key([url], "node-token", "b" * 32)
    finally:
        server.shutdown()
        thread.join(5)
