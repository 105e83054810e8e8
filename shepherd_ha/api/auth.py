"""Bearer-token authentication for the API.

Turned on by `--token-file` (off, the API answers anyone who can reach it: fine on
loopback, root on every node otherwise, since a pod may mount the node's disk).
The file is Kubernetes' static token file format, one user per line:

    token,user,uid[,"group1,group2"]

It is re-read when it changes (token_reload.py): a token added by `shepherd-ha token
create --node NAME` works at once. What an authenticated user may do is decided by
api/authz/ (system:masters everything; a node's own identity system:node:NAME in
group system:nodes what Kubernetes' NodeRestriction allows; everyone else what RBAC
grants, the group shepherd:view bound to the role view). /healthz, /readyz and
/version answer without a token, as in Kubernetes, so probes and load balancers need none.

Replicas show a peer token when they ask each other for their status (the cluster
view): derived from the Raft password and the cluster's salt through scrypt
(api/replica_credentials.py), so it is no cheap oracle for the password; it may only
read replica status and the member list, and goes only to the API URLs in --peers
(and in --join, to ask for the members). Agents
are shown signed log grants instead, never a token.
"""
import csv
import dataclasses
import hashlib
import re

from flask import request

from shepherd_ha.options import ConfigError

from .errors import ApiError
from .token_reload import ReloadingTokenTable

GROUP_ADMIN = "system:masters"
GROUP_NODES = "system:nodes"
GROUP_VIEW = "shepherd:view"
WRITE_GROUPS = frozenset((GROUP_ADMIN, GROUP_NODES))
READ_GROUPS = WRITE_GROUPS | {GROUP_VIEW}
READ_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
ANONYMOUS_PATHS = frozenset(("/healthz", "/readyz", "/version", "/version/"))
MIN_TOKEN_LENGTH = 16
REPLICA_USER = "system:replica"
# The peer token reads replica status and the member list (a joining replica's --join,
# a follower's cluster view), nothing else; GROUP_VIEW keeps it to reads.
_REPLICA_PATHS = re.compile(r"/shepherd/v1/replica|/shepherd/v1/members")


@dataclasses.dataclass(frozen=True)
class User:
    name: str
    uid: str
    groups: tuple
    paths: object = None          # a compiled pattern the whole path must match, or None: any path

    def may(self, method, path=None):
        if self.paths is not None and (path is None or not self.paths.fullmatch(path)):
            return False
        allowed = READ_GROUPS if method in READ_METHODS else WRITE_GROUPS
        return any(g in allowed for g in self.groups)


def _digest(token):
    # Look tokens up by their hash: a timing difference then tells nothing about the token.
    return hashlib.sha256(token.encode()).digest()


class TokenTable:
    def __init__(self, users_by_token=None):
        self._users = {_digest(t): u for t, u in (users_by_token or {}).items()}

    def __len__(self):
        return len(self._users)

    def add(self, token, user):
        self._users[_digest(token)] = user

    def authenticate(self, token):
        return self._users.get(_digest(token))


def parse_token_lines(lines, source):
    """{token: User} from the lines of a token file; ConfigError names the line."""
    users = {}
    for number, row in enumerate(csv.reader(lines), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        where = "%s line %d" % (source, number)
        if len(row) < 3 or len(row) > 4:
            raise ConfigError('%s: expected token,user,uid[,"group1,group2"], found %d field(s)' % (where, len(row)))
        token, name, uid = (field.strip() for field in row[:3])
        groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) == 4 else ()
        if len(token) < MIN_TOKEN_LENGTH or any(c.isspace() for c in token):
            raise ConfigError("%s: the token must be at least %d characters without spaces (e.g. from "
                              "`openssl rand -hex 16`)" % (where, MIN_TOKEN_LENGTH))
        if not name:
            raise ConfigError("%s: the user name is empty" % where)
        if token in users:
            raise ConfigError("%s: this token is already given to user %s" % (where, users[token].name))
        users[token] = User(name, uid, groups)
    if not users:
        raise ConfigError("%s holds no tokens: add lines token,user,uid,\"groups\" or drop --token-file" % source)
    return users


def load_token_file(path, peer_token=None):
    """The table for --token-file (re-read when the file changes), plus the replicas' status
    token(s) (replica_credentials: a str, or a list of them while the Raft secret is rotated)."""
    return ReloadingTokenTable(path, lambda: _read_token_file(path, peer_token))


def _read_token_file(path, peer_token):
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:     # -sig: a BOM is not part of a token
            users = parse_token_lines(fh, path)
    except OSError as exc:
        raise ConfigError("cannot read --token-file %s: %s" % (path, exc.strerror))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError("--token-file %s is not a UTF-8 file of lines token,user,uid,\"groups\": %s"
                          % (path, exc))
    table = TokenTable(users)
    for token in [peer_token] if isinstance(peer_token, str) else (peer_token or ()):
        table.add(token, User(REPLICA_USER, REPLICA_USER, (GROUP_VIEW,), _REPLICA_PATHS))
    return table


def _bearer_token(header):
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


CHALLENGE = {"WWW-Authenticate": 'Bearer realm="shepherd-ha"'}


def check(table, authorization, method, path):
    """The User a request authenticates as (None on an anonymous path), or ApiError 401/403."""
    if path in ANONYMOUS_PATHS:
        return None
    token = _bearer_token(authorization)
    if token is None:
        raise ApiError(401, "this API needs a bearer token: pass sheepctl --token (or SHEPHERD_TOKEN, or "
                       "`token:` in the config file `shepherd-ha local up` writes), or send "
                       "'Authorization: Bearer TOKEN'", "Unauthorized", headers=CHALLENGE)
    user = table.authenticate(token)
    if user is None:
        raise ApiError(401, "the bearer token is not in this replica's --token-file: check the token, "
                       "or ask the cluster's admin for one", "Unauthorized", headers=CHALLENGE)
    # The replicas' own token may call its paths only; everyone else is authorized by
    # api/authz/ (RBAC, node rules) once the request reaches the app.
    if user.paths is not None and not user.may(method, path):
        raise ApiError(403, "user %s may not %s %s" % (user.name, method, path), "Forbidden")
    return user


def body_gate(table):
    """For the server (api/http_server.py): the same check on a request's headers, before
    its body is read, so an unauthenticated body is never stored."""
    def gate(method, path, headers):
        try:
            check(table, headers.get("AUTHORIZATION"), method, path)
        except ApiError as err:
            return err
        return None
    return gate


def install(app, table):
    """Check every request but the anonymous ones before it reaches a handler."""

    @app.before_request
    def authenticate():
        user = check(table, request.headers.get("Authorization"), request.method, request.path)
        if user is None:
            return
        if user.paths is not None:        # the replicas' own token: its paths only (authz/ decides the rest)
            request.environ["shepherd.restricted"] = True
        request.environ["shepherd.user"] = user.name
        request.environ["shepherd.groups"] = user.groups      # flow control classifies by them
