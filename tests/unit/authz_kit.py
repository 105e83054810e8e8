"""An in-process replica over the real FSM (no Raft: commands apply at once), so the
real Flask app, object API and authorizer can be driven with a test client."""
import uuid

from shepherd_ha.api import auth
from shepherd_ha.api.app import create_app
from shepherd_ha.store import commands
from shepherd_ha.store.fsm import StoreFSM

RBAC = "rbac.authorization.k8s.io/v1"


class FsmReplica:
    cluster_id = None

    def __init__(self, namespaces=("default", "kube-node-lease", "kube-system")):
        self.fsm = StoreFSM()
        self.consistent_reads = 0
        for name in namespaces:
            self.put("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": name, "uid": "ns-" + name,
                                                 "creationTimestamp": "2026-01-01T00:00:00Z"},
                                    "spec": {}, "status": {"phase": "Active"}})

    def put(self, resource, obj):
        obj = dict(obj)
        obj["metadata"] = dict({"uid": uuid.uuid4().hex, "creationTimestamp": "2026-01-01T00:00:00Z"},
                               **obj["metadata"])
        result = self.fsm.apply(commands.write([commands.create(resource, obj)], uuid.uuid4().hex))
        assert result.get("ok"), result
        return result["results"][0]["object"]

    def sync(self, consistent):
        if consistent:
            self.consistent_reads += 1

    def get(self, resource, namespace, name, consistent=True):
        self.sync(consistent)
        return self.fsm.get(resource, namespace, name), self.fsm.revision

    def list(self, resource, namespace=None, consistent=True):
        self.sync(consistent)
        return self.fsm.list(resource, namespace), self.fsm.revision

    def revision(self):
        return self.fsm.revision

    def write(self, ops, key=None, epoch=None, timeout=None, digest=None):
        return self.fsm.apply(commands.write(ops, key or uuid.uuid4().hex, epoch, digest))

    def recall(self, key):
        return self.fsm.recall(key)


def token_for(name):
    return (name.replace(":", "-") + "-" + "t" * 32)[:48]


def app_client(replica, users):
    """A test client of the real app with tokens for users {name: groups}; tokens from token_for."""
    table = auth.TokenTable({token_for(name): auth.User(name, name, tuple(groups)) for name, groups in users.items()})
    return create_app(replica, tokens=table).test_client()


def bearer(name, **extra):
    return dict({"Authorization": "Bearer " + token_for(name)}, **extra)


def role(name, rules, namespace=None, kind="Role"):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta, "rules": rules}


def binding(name, role_name, subjects, namespace=None, role_kind="Role"):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": RBAC, "kind": "RoleBinding" if namespace else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
            "subjects": subjects}


def user(name):
    return {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name}


def group(name):
    return {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": name}
