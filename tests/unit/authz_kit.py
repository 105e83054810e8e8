"""RBAC objects for the authorization tests; the real app over an in-memory replica is
tests/unit/real_api.py (FsmReplica, app_client, token_for and bearer are its)."""
from real_api import bearer, flask_client, memory_replica, token_for  # noqa: F401

RBAC = "rbac.authorization.k8s.io/v1"


def FsmReplica():  # noqa: N802 - the name the authorization tests know
    return memory_replica()


def app_client(replica, users):
    """A test client of the real app with tokens for users {name: groups}; tokens from token_for."""
    return flask_client(replica, users)[0]


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
