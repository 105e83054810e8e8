"""Bearer-token authentication and coarse authorization for the API.

Turned on by `--token-file` (off, the API answers anyone who can reach it: fine on
loopback, root on every node otherwise, since a pod may mount the node's disk).
The file is Kubernetes' static token file format, one user per line:

    token,user,uid[,"group1,group2"]

Groups decide what a user may do:
  system:masters   everything
  system:nodes     everything (agents register nodes, report pod status, record events)
  shepherd:view    reads and watches only
Anything else is authenticated but refused (403). /healthz, /readyz and /version
answer without a token, as in Kubernetes, so probes and load balancers need none.

Replicas show a token derived from the Raft password they share when they ask each
other for their status (the cluster view) and when they fetch pod logs from an agent
(which checks it with the API, agent/log_access.py): no extra secret to distribute,
and the caller's own token never leaves the replica. That token may only read replica
status and single pods.
"""
import csv
import dataclasses
import hashlib
import hmac
import re

from flask import request

from shepherd_ha.options import ConfigError

from .errors import ApiError

GROUP_ADMIN = "system:masters"
GROUP_NODES = "system:nodes"
GROUP_VIEW = "shepherd:view"
WRITE_GROUPS = frozenset((GROUP_ADMIN, GROUP_NODES))
READ_GROUPS = WRITE_GROUPS | {GROUP_VIEW}
READ_METHODS = frozenset(("GET", "HEAD", "OPTIONS"))
ANONYMOUS_PATHS = frozenset(("/healthz", "/readyz", "/version"))
MIN_TOKEN_LENGTH = 16
REPLICA_USER = "system:replica"
_REPLICA_PATHS = re.compile(r"/shepherd/v1/replica|/shepherd/v1/members|/api/v1/namespaces/[^/]+/pods/[^/]+")
_PEER_TOKEN_CONTEXT = b"shepherd-ha replica status token v1"


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


def peer_token(raft_password):
    """The token replicas use for each other's status: derived, never stored."""
    return hmac.new(raft_password.encode(), _PEER_TOKEN_CONTEXT, hashlib.sha256).hexdigest()


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


def load_token_file(path, raft_password=None):
    """The TokenTable for --token-file, plus the replicas' own status token."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:     # -sig: a BOM is not part of a token
            users = parse_token_lines(fh, path)
    except OSError as exc:
        raise ConfigError("cannot read --token-file %s: %s" % (path, exc.strerror))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError("--token-file %s is not a UTF-8 file of lines token,user,uid,\"groups\": %s"
                          % (path, exc))
    table = TokenTable(users)
    if raft_password:
        table.add(peer_token(raft_password), User(REPLICA_USER, REPLICA_USER, (GROUP_VIEW,), _REPLICA_PATHS))
    return table


def _bearer_token():
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


CHALLENGE = {"WWW-Authenticate": 'Bearer realm="shepherd-ha"'}


def install(app, table):
    """Check every request but the anonymous ones before it reaches a handler."""

    @app.before_request
    def authenticate():
        if request.path in ANONYMOUS_PATHS:
            return
        token = _bearer_token()
        if token is None:
            raise ApiError(401, "this API needs a bearer token: pass sheepctl --token (or SHEPHERD_TOKEN, or "
                           "`token:` in the config file `shepherd-ha local up` writes), or send "
                           "'Authorization: Bearer TOKEN'", "Unauthorized", headers=CHALLENGE)
        user = table.authenticate(token)
        if user is None:
            raise ApiError(401, "the bearer token is not in this replica's --token-file: check the token, "
                           "or ask the cluster's admin for one", "Unauthorized", headers=CHALLENGE)
        if not user.may(request.method, request.path):
            need = WRITE_GROUPS if user.may("GET", request.path) else READ_GROUPS
            raise ApiError(403, "user %s (groups: %s) may not %s %s: that needs one of the groups %s"
                           % (user.name, ", ".join(user.groups) or "none", request.method, request.path,
                              ", ".join(sorted(need))), "Forbidden")
        request.environ["shepherd.user"] = user.name
        request.environ["shepherd.groups"] = user.groups      # flow control classifies by them
