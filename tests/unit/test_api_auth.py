"""API authentication: the static token file and the check made before every request."""
import pytest
from flask import Flask

from shepherd_ha.api import auth
from shepherd_ha.api.replica_credentials import ReplicaCredentials
from shepherd_ha.api.errors import ApiError, error_response
from shepherd_ha.options import ConfigError

ADMIN, NODE, VIEWER, NOBODY = "a" * 32, "n" * 32, "v" * 32, "x" * 32


def table():
    lines = ['# comment', '', '%s,alice,u1,"system:masters"' % ADMIN, '%s,system:node,u2,system:nodes' % NODE,
             '%s,bob,u3,"shepherd:view,team-a"' % VIEWER, '%s,carol,u4' % NOBODY]
    return auth.TokenTable(auth.parse_token_lines(lines, "tokens.csv"))


def test_token_lines_give_users_with_their_groups():
    users = auth.parse_token_lines(['%s,bob,u3,"shepherd:view, team-a"' % VIEWER, '%s,carol,u4' % NOBODY], "f")
    assert users[VIEWER] == auth.User("bob", "u3", ("shepherd:view", "team-a"))
    assert users[NOBODY].groups == ()


@pytest.mark.parametrize("line, problem", [
    ("%s,alice" % ADMIN, "line 1: expected token,user,uid"),
    ("short,alice,u1", "at least 16 characters"),
    ("%s,,u1" % ADMIN, "user name is empty"),
    ('%s,a,u,"g",extra' % ADMIN, "found 5 field(s)"),
])
def test_a_bad_token_line_is_refused_naming_the_line(line, problem):
    with pytest.raises(ConfigError) as err:
        auth.parse_token_lines([line], "tokens.csv")
    assert problem in str(err.value) and "tokens.csv" in str(err.value)


def test_a_token_given_twice_and_an_empty_file_are_refused():
    with pytest.raises(ConfigError, match="line 2: this token is already given to user alice"):
        auth.parse_token_lines(["%s,alice,u1" % ADMIN, "%s,bob,u2" % ADMIN], "tokens.csv")
    with pytest.raises(ConfigError, match="holds no tokens"):
        auth.parse_token_lines(["# nothing", ""], "tokens.csv")


def test_load_token_file_adds_the_replicas_status_token(tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_text('%s,alice,u1,"system:masters"\n' % ADMIN)
    loaded = auth.load_token_file(str(path), peer_token=PEER.peer_token)
    assert len(loaded) == 2
    replica = loaded.authenticate(PEER.peer_token)
    assert replica.name == auth.REPLICA_USER and not replica.may("POST", "/shepherd/v1/replica")
    # it reads replica status and the member list (--join), nothing else (agents are shown
    # log grants, not this token)
    assert replica.may("GET", "/shepherd/v1/replica") and replica.may("GET", "/shepherd/v1/members")
    for path in ("/api/v1/pods", "/api/v1/namespaces/ns/pods/web", "/api/v1/namespaces/ns/pods/web/log",
                 "/api/v1/namespaces/ns/configmaps/c", "/shepherd/v1/cluster", "/metrics",
                 "/shepherd/v1/members/r2", "/shepherd/v1/membersx", "/shepherd/v1/snapshot"):
        assert not replica.may("GET", path), path
    for method, path in (("POST", "/shepherd/v1/members"), ("DELETE", "/shepherd/v1/members/r2"),
                         ("PUT", "/shepherd/v1/members")):
        assert not replica.may(method, path), (method, path)
    with pytest.raises(ConfigError, match="cannot read --token-file"):
        auth.load_token_file(str(tmp_path / "missing.csv"))


PEER = ReplicaCredentials("correct-horse-battery-staple-42", "00" * 16)


@pytest.fixture
def client():
    app = Flask("t")
    auth.install(app, table())

    @app.errorhandler(ApiError)
    def on_error(err):
        return error_response(err)

    @app.route("/healthz")
    def healthz():
        return "ok"

    @app.route("/api/v1/pods", methods=["GET", "POST", "DELETE"])
    def pods():
        from flask import request
        return {"user": request.environ.get("shepherd.user")}
    return app.test_client()


def bearer(token):
    return {"Authorization": "Bearer " + token}


def test_health_needs_no_token_and_everything_else_does(client):
    assert client.get("/healthz").status_code == 200
    resp = client.get("/api/v1/pods")
    assert resp.status_code == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert resp.json["reason"] == "Unauthorized" and "--token" in resp.json["message"]
    for header in ({"Authorization": "Basic " + ADMIN}, {"Authorization": "Bearer "}, bearer(ADMIN[:-1] + "b")):
        assert client.get("/api/v1/pods", headers=header).status_code == 401
    assert "not in this replica's --token-file" in client.get("/api/v1/pods", headers=bearer("z" * 32)).json["message"]


def test_authentication_names_the_user_and_groups_and_leaves_the_decision_to_authz(client):
    # What each may do is api/authz/'s job (tests/unit/test_authz_*.py); here only who they are.
    for token, user in ((ADMIN, "alice"), (NODE, "system:node"), (VIEWER, "bob"), (NOBODY, "carol")):
        assert client.post("/api/v1/pods", headers=bearer(token)).json == {"user": user}


def test_the_replicas_token_is_held_to_its_paths(tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_text('%s,alice,u1,"system:masters"\n' % ADMIN)
    app = Flask("t")
    auth.install(app, auth.load_token_file(str(path), PEER.peer_token))
    app.register_error_handler(ApiError, error_response)
    app.add_url_rule("/api/v1/pods", "pods", lambda: "ok", methods=["GET"])
    resp = app.test_client().get("/api/v1/pods", headers=bearer(PEER.peer_token))
    assert resp.status_code == 403 and auth.REPLICA_USER in resp.json["message"]


def test_the_token_file_is_read_again_when_it_changes(tmp_path, caplog):
    path = tmp_path / "tokens.csv"
    path.write_text('%s,alice,u1,"system:masters"\n' % ADMIN)
    table = auth.load_token_file(str(path))
    assert table.authenticate(NODE) is None
    new = tmp_path / "tokens.new"
    new.write_text('%s,alice,u1,"system:masters"\n%s,system:node:n1,n1,"system:nodes"\n' % (ADMIN, NODE))
    new.replace(path)
    assert table.authenticate(NODE).name == "system:node:n1"
    path.write_text('%s,bob,u1\n' % VIEWER)                # a token removed stops working at once
    assert table.authenticate(NODE) is None and table.authenticate(VIEWER).name == "bob"
    path.write_text("%s,broken\n" % ADMIN + "x" * 7)       # a bad edit keeps the previous tokens
    assert table.authenticate(VIEWER).name == "bob"
    assert "cannot be used" in caplog.text


def test_a_token_file_that_is_not_text_is_a_config_error_and_a_bom_is_ignored(tmp_path):
    path = tmp_path / "tokens.csv"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ConfigError, match="not a UTF-8 file"):
        auth.load_token_file(str(path))
    path.write_bytes(("\ufeff%s,alice,u1,system:masters\n" % ADMIN).encode("utf-8"))
    assert auth.load_token_file(str(path)).authenticate(ADMIN).name == "alice"
