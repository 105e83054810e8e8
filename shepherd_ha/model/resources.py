"""The resource kinds the API serves: names, paths, scope and subresources."""
from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    plural: str             # path segment and store key: "pods"
    kind: str               # "Pod"
    api_version: str        # "v1" or "apps/v1"
    namespaced: bool
    subresources: tuple = ()
    short_names: tuple = ()
    categories: tuple = ()  # "all": what `kubectl get all` lists
    verbs: tuple = ()       # () = every verb api/objects.py serves; read-only kinds name theirs

    @property
    def group(self):
        """The API group: "" for the core group (v1)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self):
        return self.api_version.rpartition("/")[2]

    @property
    def singular(self):
        return self.kind.lower()

    @property
    def list_kind(self):
        return self.kind + "List"

    @property
    def has_status(self):
        return "status" in self.subresources

    def collection_path(self, namespace=None):
        """URL path of the collection; namespace None means all namespaces."""
        prefix = "/api/v1" if self.api_version == "v1" else "/apis/" + self.api_version
        if self.namespaced and namespace:
            return "%s/namespaces/%s/%s" % (prefix, namespace, self.plural)
        return "%s/%s" % (prefix, self.plural)

    def object_path(self, name, namespace=None, subresource=None):
        path = "%s/%s" % (self.collection_path(namespace), name)
        return path + "/" + subresource if subresource else path


RESOURCES = {r.plural: r for r in (
    Resource("namespaces", "Namespace", "v1", False, ("finalize",), ("ns",)),
    Resource("nodes", "Node", "v1", False, ("status",), ("no",)),
    Resource("pods", "Pod", "v1", True, ("status", "log", "eviction"), ("po",), ("all",)),
    Resource("services", "Service", "v1", True, (), ("svc",), ("all",)),
    Resource("endpoints", "Endpoints", "v1", True, (), ("ep",)),
    Resource("events", "Event", "v1", True, (), ("ev",)),
    # Configuration as key/value strings; also the registers of the chaos suite and the drills.
    Resource("configmaps", "ConfigMap", "v1", True, (), ("cm",)),
    # Confidential key/values (base64 data): delivered to pods as env vars and tmpfs files;
    # encrypted in the Raft log when the server has --encryption-key-file.
    Resource("secrets", "Secret", "v1", True, (), ()),
    Resource("deployments", "Deployment", "apps/v1", True, ("status", "scale"), ("deploy",), ("all",)),
    # A deployment's pods of one template (`<deployment>-<pod-template-hash>`), and its revision
    # history (`deployment.kubernetes.io/revision`): what `kubectl rollout history|undo` read.
    Resource("replicasets", "ReplicaSet", "apps/v1", True, ("status", "scale"), ("rs",), ("all",)),
    # Node heartbeats: one small Lease per node, renewed often (cheap writes).
    Resource("leases", "Lease", "coordination.k8s.io/v1", True, (), ()),
    # The revision history of older servers (migrated to ReplicaSets by the deployment controller).
    Resource("controllerrevisions", "ControllerRevision", "apps/v1", True, (), ()),
    # Who may do what (api/authz/rbac.py reads them from the replica's copy of the store).
    Resource("roles", "Role", "rbac.authorization.k8s.io/v1", True, (), ()),
    Resource("clusterroles", "ClusterRole", "rbac.authorization.k8s.io/v1", False, (), ()),
    Resource("rolebindings", "RoleBinding", "rbac.authorization.k8s.io/v1", True, (), ()),
    Resource("clusterrolebindings", "ClusterRoleBinding", "rbac.authorization.k8s.io/v1", False, (), ()),
)}

_BY_KIND = {r.kind: r for r in RESOURCES.values()}


def resource_for_kind(kind):
    """The Resource of a manifest's `kind`, or None."""
    return _BY_KIND.get(kind)


def lookup(name):
    """Resolve what a person types (pods, pod, po, Pod) to a Resource, or None."""
    key = (name or "").lower()
    for r in RESOURCES.values():
        if key in (r.plural, r.singular) or key in r.short_names:
            return r
    return None
