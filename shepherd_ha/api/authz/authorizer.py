"""The authorization chain every authenticated request goes through, and its wiring.

  1. system:masters may do anything (hard-wired, as in Kubernetes: deleting a role
     never locks the admins out);
  2. a node's own identity: node_restriction.py (allow, deny, or no opinion);
  3. RBAC: the stored Roles, ClusterRoles and their bindings plus the built-in ones
     (rbac.py), read from this replica's copy of the store.
Nothing allowed it: 403 with Kubernetes' message. A write of RBAC objects must also
pass the escalation check (escalation.py). Impersonation (Impersonate-User,
Impersonate-Group, as kubectl --as/--as-group sends) needs the verb `impersonate` on
users / groups and then authorizes as that identity.

The RBAC index is rebuilt only when the RBAC objects changed: in an API worker the
mirror keeps, per resource, the revision of its last change (store/mirror.py
change_marks), so a request compares four integers. Over another replica (the
in-process one of tests) a request compares the revision with the last one seen;
only if it moved are the four RBAC collections fingerprinted (their size and highest
resourceVersion: any create or update raises the latter, a delete lowers the
former), and only if that moved is the index rebuilt. A change is thus in force for the next request this
replica serves once its copy of the store holds it.
"""
import json
import threading

from flask import request

from shepherd_ha.store.raft_node import Unavailable

from ..errors import ApiError, unavailable
from . import escalation
from .attributes import Attributes, forbidden_message, from_request
from .node_restriction import ALLOW, DENY, NodeRestriction, node_name
from .rbac import RbacIndex

GROUP_MASTERS = "system:masters"
GROUP_AUTHENTICATED = "system:authenticated"
RBAC_KINDS = ("roles", "clusterroles", "rolebindings", "clusterrolebindings")
REVIEW_PATHS = frozenset("/apis/authorization.k8s.io/v1/" + p
                         for p in ("selfsubjectaccessreviews", "selfsubjectrulesreviews"))
_SHARED_NODE_HINT = ("a node's token must be its own (user system:node:NAME in group system:nodes): "
                     "make one with `shepherd-ha token create --node NAME`")


class IndexCache:
    def __init__(self, replica):
        self.replica = replica
        self._lock = threading.Lock()
        self._revision = None
        self._fingerprint = None
        self._index = RbacIndex()
        self.rebuilds = 0

    def current(self):
        marks = getattr(self.replica, "change_marks", None)
        if marks is not None:          # an API worker's mirror knows when each kind last changed
            key = marks(RBAC_KINDS)
            if key == self._revision:
                return self._index
            with self._lock:
                if key != self._revision:
                    self._index = RbacIndex(*(self.replica.list(k, None, False)[0] for k in RBAC_KINDS))
                    self._revision = key
                    self.rebuilds += 1
                return self._index
        revision = self.replica.revision()
        if revision == self._revision:
            return self._index
        with self._lock:
            if revision != self._revision:
                lists = {kind: self.replica.list(kind, None, False)[0] for kind in RBAC_KINDS}
                fingerprint = tuple((len(items), max((_rv(o) for o in items), default=0))
                                    for items in lists.values())
                if fingerprint != self._fingerprint:
                    self._index = RbacIndex(*(lists[k] for k in RBAC_KINDS))
                    self._fingerprint = fingerprint
                    self.rebuilds += 1
                self._revision = revision
            return self._index


def _rv(obj):
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return int(value) if isinstance(value, str) and value.isdigit() else 0


class Authorizer:
    def __init__(self, replica):
        self.index = IndexCache(replica)
        self.nodes = NodeRestriction(replica)

    def authorize(self, user, groups, attrs, body=lambda: None):
        """(allowed, reason). Raises Unavailable when a needed linearizable read cannot be made."""
        if GROUP_MASTERS in groups:
            return True, "member of %s" % GROUP_MASTERS
        node = node_name(user, groups)
        node_reason = ""
        if node is not None:
            decision, node_reason = self.nodes.decide(node, attrs, body)
            if decision == ALLOW:
                return True, "Node: node %s" % node
            if decision == DENY:
                return False, node_reason
        elif "system:nodes" in groups:
            node_reason = _SHARED_NODE_HINT
        allowed, reason = self.index.current().authorize(user, groups, attrs)
        return (True, reason) if allowed else (False, node_reason)

    def rules(self, user, groups, namespace):
        return self.index.current().rules_for(user, groups, namespace)

    def role_rules(self, kind, namespace, name):
        """The rules (as stored) of a Role in `namespace` or a ClusterRole; [] if there is none."""
        key = (kind, namespace if kind == "Role" else "", name)
        return self.index.current().raw_rules.get(key) or []


def identity(authorizer):
    """(user, groups) of this request after impersonation; ApiError when refused."""
    env = request.environ
    user, groups = env["shepherd.user"], tuple(env.get("shepherd.groups") or ()) + (GROUP_AUTHENTICATED,)
    as_user = request.headers.get("Impersonate-User")
    # One header per group as kubectl sends, or comma-separated ones (sheepctl's client sends one header).
    as_groups = [g.strip() for v in request.headers.getlist("Impersonate-Group") for g in v.split(",") if g.strip()]
    if as_user is None and not as_groups:
        return user, groups
    if not as_user:
        raise ApiError(400, "Impersonate-Group needs Impersonate-User too (kubectl --as USER --as-group G)")
    wanted = [Attributes("impersonate", "users", name=as_user)] + \
             [Attributes("impersonate", "groups", name=g) for g in as_groups]
    for attrs in wanted:
        allowed, reason = authorizer.authorize(user, groups, attrs)
        if not allowed:
            raise ApiError(403, forbidden_message(user, attrs, reason), "Forbidden",
                           details={"name": attrs.name, "kind": attrs.resource})
    return as_user, tuple(as_groups) + (GROUP_AUTHENTICATED,)


def _body():
    try:
        body = json.loads(request.get_data(cache=True) or b"null")
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def install(app, replica):
    """Authorize every authenticated request (after auth.install's check); returns the Authorizer."""
    authorizer = Authorizer(replica)

    @app.before_request
    def authorize():
        env = request.environ
        if "shepherd.user" not in env or env.get("shepherd.restricted"):
            return      # anonymous path, or the replicas' own token (auth.py checks its paths)
        user, groups = identity(authorizer)
        env["shepherd.user"], env["shepherd.groups"] = user, groups
        if request.path in REVIEW_PATHS:
            return      # any authenticated user may ask what they may do (Kubernetes' system:basic-user)
        attrs = from_request(request.method, request.path, request.args)
        try:
            allowed, reason = authorizer.authorize(user, groups, attrs, _body)
        except Unavailable as exc:
            raise unavailable(exc)
        if allowed and GROUP_MASTERS not in groups:
            reason = escalation.check(authorizer, replica, user, groups, attrs, _body)
            allowed = reason is None
        if not allowed:
            details = {"name": attrs.name, "group": attrs.api_group, "kind": attrs.resource}
            raise ApiError(403, forbidden_message(user, attrs, reason), "Forbidden",
                           details={k: v for k, v in details.items() if v} or None)

    app.extensions["shepherd_authorizer"] = authorizer
    return authorizer
