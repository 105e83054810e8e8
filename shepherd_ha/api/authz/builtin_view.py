"""The built-in ClusterRoles and ClusterRoleBindings (model/rbac_defaults.py), shown by
the object API's gets and lists beside the stored ones, so `sheepctl get clusterroles`
and kubectl see view, edit, admin and cluster-admin. Read-only: they are not stored,
so a delete answers 404 and a replace or patch is refused by validation (their names
are reserved). Watches do not carry them (they never change)."""
import copy

from shepherd_ha.model.rbac_defaults import BUILTIN_CLUSTER_ROLE_BINDINGS, BUILTIN_CLUSTER_ROLES

_BUILTINS = {"clusterroles": BUILTIN_CLUSTER_ROLES, "clusterrolebindings": BUILTIN_CLUSTER_ROLE_BINDINGS}
BUILT_IN_ANNOTATION = "shepherd.io/built-in"


def _shown(resource, obj):
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    meta.update(uid="built-in-%s-%s" % (resource, meta["name"]), resourceVersion="1",
                creationTimestamp="1970-01-01T00:00:00Z")
    meta["annotations"] = {BUILT_IN_ANNOTATION: "true",
                           "rbac.authorization.kubernetes.io/autoupdate": "true"}
    return obj


_SHOWN = {resource: {name: _shown(resource, obj) for name, obj in objs.items()} for resource, objs in _BUILTINS.items()}


class WithBuiltins:
    """A replica whose get and list of the two cluster RBAC kinds include the built-ins;
    everything else goes to the replica itself."""

    def __init__(self, replica):
        self._replica = replica

    def __getattr__(self, name):
        return getattr(self._replica, name)

    def get(self, resource, namespace, name, consistent=True):
        obj, revision = self._replica.get(resource, namespace, name, consistent)
        if obj is None and name in _SHOWN.get(resource, ()):
            obj = _SHOWN[resource][name]
        return obj, revision

    def list(self, resource, namespace=None, consistent=True, selection=None):
        items, revision = self._replica.list(resource, namespace, consistent, selection)
        builtins = _SHOWN.get(resource)
        if builtins:
            stored = {o["metadata"]["name"] for o in items}
            items = list(items) + [o for name, o in builtins.items() if name not in stored]
        return items, revision
