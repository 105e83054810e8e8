"""Pod Security admission: a pod, or a Deployment's pod template, is checked against
its namespace's Pod Security level before anything is submitted.

Refused: 403 Forbidden naming the level and what violates it, in Kubernetes' words.
A Deployment whose template would be refused is refused itself (Kubernetes only
warns for controllers), so no controller loops on pods it could never create.
The `warn` label's level adds `Warning:` headers (flask.g.warnings, sent by
objects.json_response). An update is checked only when it changes the pod spec, so
metadata and status writes on a pod admitted earlier keep working after the
namespace became stricter. The namespace is read from this worker's copy of the
store (as Kubernetes reads it from an informer's cache).
"""
from flask import g

from shepherd_ha.model import pod_security as PSS
from shepherd_ha.store.raft_node import Unavailable

from .errors import ApiError, unavailable
from .write_options import warning_value


def _pod_spec(plural, obj):
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if plural == "pods":
        return spec
    if plural in ("deployments", "replicasets") and isinstance(spec, dict):
        template = spec.get("template")
        return template.get("spec") if isinstance(template, dict) else None
    return None


def _levels(replica, namespace):
    try:
        ns, _ = replica.get("namespaces", None, namespace, False)
    except Unavailable as exc:
        raise unavailable(exc)
    return PSS.namespace_levels(ns)


def admit(replica, target, obj, current=None):
    """Raise ApiError 403 when `obj` (a pod or deployment being written to `target`)
    violates its namespace's enforced level; record warnings for the warn level.
    `current`: the stored object of an update (None on create)."""
    if target.plural not in ("pods", "deployments", "replicasets") or target.sub is not None:
        return
    spec = _pod_spec(target.plural, obj)
    if not isinstance(spec, dict):
        return
    if current is not None and _pod_spec(target.plural, current) == spec:
        return
    enforce, warn = _levels(replica, target.namespace)
    violations = PSS.check(enforce, spec)
    name = target.name or (obj.get("metadata") or {}).get("name")
    if violations:
        raise ApiError(403, PSS.forbidden_message(target.plural, name, enforce, violations), "Forbidden",
                       details={"name": name, "kind": target.plural})
    if warn is not None:
        warned = PSS.check(warn, spec)
        if warned:
            g.warnings = [PSS.warning_text(warn, warned)]     # one object per request (retries overwrite)


def warning_headers():
    """[(Warning, value)] for this request, in RFC 7234's form (299, agent '-')."""
    return [("Warning", warning_value(w)) for w in g.get("warnings", ())]
