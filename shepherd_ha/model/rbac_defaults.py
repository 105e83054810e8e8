"""The built-in ClusterRoles and ClusterRoleBindings (Kubernetes' user-facing roles).

Built in, not stored: the authorizer always holds them (api/authz/rbac.py), so no
cluster is ever without them (no bootstrap window, nothing to reconcile between
replicas, nothing an admin can delete by mistake and lock everyone out with); a
stored object cannot take their names (model/rbac_validation.py). To grant
something else, create your own ClusterRole or Role and bind it.
"""
READ = ["get", "list", "watch"]
WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_CORE_VIEW = ["pods", "pods/log", "pods/status", "services", "endpoints", "configmaps", "events", "namespaces"]
_APPS_VIEW = ["deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale",
              "replicasets/status", "controllerrevisions"]


def _cluster_role(name, rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "rules": rules}


def _binding(name, role, groups):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g} for g in groups]}


_VIEW = [{"apiGroups": [""], "resources": _CORE_VIEW, "verbs": READ},
         {"apiGroups": ["apps"], "resources": _APPS_VIEW, "verbs": READ},
         {"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": READ}]
# edit: view plus writes of workloads and their configuration; reads Secrets (a pod may mount them anyway).
_EDIT = _VIEW + [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": READ},
    {"apiGroups": [""], "resources": ["pods", "services", "endpoints", "configmaps", "secrets"], "verbs": WRITE},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},      # as Kubernetes' edit
    {"apiGroups": ["apps"], "resources": ["deployments", "deployments/scale", "replicasets", "replicasets/scale"],
     "verbs": WRITE},
]
# admin: edit plus the namespace's own roles and bindings.
# Every authenticated user may discover the API (as Kubernetes' system:discovery and
# system:public-info-viewer bound to system:authenticated): without it kubectl fails for
# anyone but an admin at "couldn't get current server API group list", before any RBAC
# rule of theirs is even asked.
_DISCOVERY = [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*", "/version",
                                   "/version/", "/healthz", "/livez", "/readyz"], "verbs": ["get"]}]
_ADMIN = _EDIT + [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"],
                   "verbs": READ + WRITE}]

BUILTIN_CLUSTER_ROLES = {r["metadata"]["name"]: r for r in (
    _cluster_role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                    {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
    _cluster_role("admin", _ADMIN),
    _cluster_role("edit", _EDIT),
    _cluster_role("view", _VIEW),
    _cluster_role("system:discovery", _DISCOVERY),
    # What the old group shepherd:view could read beyond `view`: the cluster's nodes,
    # leases and the replicas' status pages.
    _cluster_role("shepherd:cluster-reader", [
        {"apiGroups": [""], "resources": ["nodes", "nodes/status", "namespaces"], "verbs": READ},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": READ},
        {"apiGroups": ["rbac.authorization.k8s.io"],
         "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"], "verbs": READ},
        {"nonResourceURLs": ["/metrics", "/shepherd/v1/replica", "/shepherd/v1/cluster", "/shepherd/v1/members"],
         "verbs": ["get"]}]),
    # As in Kubernetes, every authenticated user may ask what they may do (kubectl auth can-i).
    _cluster_role("system:basic-user", [
        {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
         "verbs": ["create"]}]),
)}

BUILTIN_CLUSTER_ROLE_BINDINGS = {b["metadata"]["name"]: b for b in (
    _binding("cluster-admin", "cluster-admin", ["system:masters"]),
    _binding("shepherd:view", "view", ["shepherd:view"]),
    _binding("system:discovery", "system:discovery", ["system:authenticated"]),
    _binding("shepherd:cluster-reader", "shepherd:cluster-reader", ["shepherd:view"]),
    _binding("system:basic-user", "system:basic-user", ["system:authenticated"]),
)}
