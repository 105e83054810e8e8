"""What a node's own identity (user system:node:NAME, group system:nodes) may do:
Kubernetes' Node authorizer and NodeRestriction admission plugin in one place.

A node may
  - read every Node (routes and DNS need them); create, update and patch its own
    Node and its status;
  - get, create, update, patch and delete its own Lease in kube-node-lease;
  - get the pods bound to it (spec.nodeName == NAME; a get of a missing pod is let
    through to answer 404), list and watch pods only with fieldSelector
    spec.nodeName=NAME, update and patch their status, delete them (the agent's
    final delete after a graceful stop);
  - create, get, update and patch Events; read Services and Endpoints;
  - get only the ConfigMaps and Secrets a pod bound to it uses (volumes, projected
    sources, envFrom, env valueFrom, imagePullSecrets);
  - get the replicas' public log-grant key (GET /shepherd/v1/log-grant-key: the agent
    verifies the replicas' signed log grants with it; agent/log_access.py).
Anything else is no opinion here (RBAC decides, and grants nodes nothing by
default); a write aimed at another node's objects is refused outright (DENY), as
the admission plugin does. A "not bound here" answer is only given after a
linearizable read, so a replica whose copy lags never refuses a node its own pod.
"""
from shepherd_ha.log_grants import KEY_PATH as LOG_GRANT_KEY_PATH

ALLOW, DENY, NO_OPINION = "allow", "deny", "no-opinion"
NODE_USER_PREFIX = "system:node:"
LEASE_NAMESPACE = "kube-node-lease"
READS = ("get", "list", "watch")
_WRITES_OF_OWN = ("create", "update", "patch")


def node_name(user, groups):
    """The node a user is, or None: Kubernetes' convention system:node:NAME in system:nodes."""
    if user.startswith(NODE_USER_PREFIX) and "system:nodes" in groups and len(user) > len(NODE_USER_PREFIX):
        return user[len(NODE_USER_PREFIX):]
    return None


def _body_name(body):
    meta = body.get("metadata") if isinstance(body, dict) else None
    return meta.get("name") if isinstance(meta, dict) else None


def _bound_to(pod, node):
    return isinstance(pod, dict) and (pod.get("spec") or {}).get("nodeName") == node


def selects_node(field_selector, node):
    """True when a field selector restricts to spec.nodeName=node (other terms may follow)."""
    terms = [t.strip().replace("==", "=") for t in (field_selector or "").split(",")]
    return ("spec.nodeName=" + node) in terms


def references(pod, resource):
    """Names of the ConfigMaps (resource "configmaps") or Secrets ("secrets") a pod uses."""
    spec = pod.get("spec") if isinstance(pod, dict) else None
    if not isinstance(spec, dict):
        return set()
    cm = resource == "configmaps"
    names = set()

    def add(ref, key):
        if isinstance(ref, dict) and isinstance(ref.get(key), str):
            names.add(ref[key])
    for volume in _dicts(spec.get("volumes")):
        add(volume.get("configMap") if cm else volume.get("secret"), "name" if cm else "secretName")
        for source in _dicts((volume.get("projected") or {}).get("sources") if isinstance(volume.get("projected"), dict) else None):
            add(source.get("configMap" if cm else "secret"), "name")
    for container in _dicts(spec.get("containers")) + _dicts(spec.get("initContainers")):
        for env_from in _dicts(container.get("envFrom")):
            add(env_from.get("configMapRef" if cm else "secretRef"), "name")
        for env in _dicts(container.get("env")):
            value_from = env.get("valueFrom")
            if isinstance(value_from, dict):
                add(value_from.get("configMapKeyRef" if cm else "secretKeyRef"), "name")
    if not cm:
        for ref in _dicts(spec.get("imagePullSecrets")):
            add(ref, "name")
    return names


def _dicts(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


class NodeRestriction:
    """decide(node, attrs, body) -> (ALLOW | DENY | NO_OPINION, reason). `reader` has the
    replica's get(resource, namespace, name, consistent) -> (obj, revision) and
    list(resource, namespace, consistent) -> (items, revision); `body()` gives the
    parsed request body (creates only)."""

    def __init__(self, reader):
        self.reader = reader

    def decide(self, node, attrs, body=lambda: None):
        if not attrs.is_resource:
            if attrs.path == LOG_GRANT_KEY_PATH and attrs.verb == "get":
                return ALLOW, ""
            return NO_OPINION, "a node has no access to the path %s" % attrs.path
        verb, sub = attrs.verb, attrs.subresource
        if attrs.api_group == "coordination.k8s.io" and attrs.resource == "leases":
            return self._lease(node, attrs, body)
        if attrs.api_group != "":
            return NO_OPINION, ""
        if attrs.resource == "nodes":
            return self._node(node, attrs, body)
        if attrs.resource == "pods":
            return self._pod(node, attrs)
        if attrs.resource == "events" and verb in ("create", "get", "update", "patch") and not sub:
            return ALLOW, ""
        if attrs.resource in ("services", "endpoints") and verb in READS and not sub:
            return ALLOW, ""
        if attrs.resource in ("configmaps", "secrets") and verb == "get" and not sub:
            if self._used_by_bound_pod(node, attrs.resource, attrs.namespace, attrs.name):
                return ALLOW, ""
            return NO_OPINION, "no pod bound to node %s uses it" % node
        return NO_OPINION, ""

    def _node(self, node, attrs, body):
        if attrs.verb in READS and attrs.subresource in ("", "status"):
            return ALLOW, ""
        if attrs.verb == "create" and not attrs.subresource:
            name = _body_name(body())
            if name == node:
                return ALLOW, ""
            return DENY, 'node "%s" may create only its own Node object, not %r' % (node, name)
        if attrs.verb in ("update", "patch") and attrs.subresource in ("", "status"):
            if attrs.name == node:
                return ALLOW, ""
            return DENY, 'node "%s" is not allowed to modify node "%s"' % (node, attrs.name)
        return NO_OPINION, ""

    def _lease(self, node, attrs, body):
        if attrs.namespace != LEASE_NAMESPACE or attrs.verb not in ("get", "delete") + _WRITES_OF_OWN \
                or attrs.subresource:
            return NO_OPINION, ""
        name = _body_name(body()) if attrs.verb == "create" else attrs.name
        if name == node:
            return ALLOW, ""
        return DENY, 'node "%s" may use only its own Lease "%s" in %s, not %r' % (node, node, LEASE_NAMESPACE, name)

    def _pod(self, node, attrs):
        verb, sub = attrs.verb, attrs.subresource
        if verb in ("list", "watch") and not sub:
            if selects_node(attrs.field_selector, node):
                return ALLOW, ""
            return NO_OPINION, "a node may %s only the pods bound to it: add fieldSelector=spec.nodeName=%s" \
                % (verb, node)
        if (verb == "get" and sub in ("", "status")) or (verb == "delete" and not sub) \
                or (verb in ("update", "patch") and sub == "status"):
            bound = self._pod_bound(node, attrs.namespace, attrs.name)
            if bound is not False:       # bound here, or missing (the handler answers 404)
                return ALLOW, ""
            if verb == "get":
                return NO_OPINION, "the pod is not bound to node %s" % node
            return DENY, 'node "%s" can only %s pods with spec.nodeName set to itself' % (
                node, "delete" if verb == "delete" else "update the status of")
        return NO_OPINION, ""

    def _pod_bound(self, node, namespace, name):
        """True (bound to node), False (bound elsewhere or unbound), None (no such pod)."""
        pod, _ = self.reader.get("pods", namespace, name, False)
        if _bound_to(pod, node):
            return True
        pod, _ = self.reader.get("pods", namespace, name, True)      # before refusing: the truth
        if pod is None:
            return None
        return _bound_to(pod, node)

    def _used_by_bound_pod(self, node, resource, namespace, name):
        for consistent in (False, True):
            pods, _ = self.reader.list("pods", namespace, consistent)
            if any(_bound_to(p, node) and name in references(p, resource) for p in pods):
                return True
        return False
