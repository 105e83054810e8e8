"""The pods/eviction subresource (policy/v1 Eviction), what `kubectl drain` posts for
every pod it moves off a node (discovery advertises it, so drain uses it rather than
plain deletes).

An eviction is a graceful delete of the pod with the Eviction's deleteOptions (grace
period, preconditions, dryRun). Kubernetes refuses an eviction with 429 when a
PodDisruptionBudget would be violated; this server serves no PodDisruptionBudgets, so
no eviction is ever refused for that reason (docs/api.md says so).
"""
from .bodies import json_object_body
from .errors import ApiError

GROUP_VERSIONS = ("policy/v1", "policy/v1beta1")


def evict(objects, target):
    """POST .../pods/NAME/eviction: 201 with a Status Success, as Kubernetes answers."""
    body = json_object_body()
    if body.get("kind", "Eviction") != "Eviction" or body.get("apiVersion", "policy/v1") not in GROUP_VERSIONS:
        raise ApiError(400, "pods/eviction takes a policy/v1 Eviction, not %s %s"
                       % (body.get("apiVersion"), body.get("kind")))
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise ApiError(400, "Eviction metadata must be an object")
    if meta.get("name") not in (None, "", target.name):
        raise ApiError(400, "the Eviction names pod %r, but the URL is for pod %r" % (meta.get("name"), target.name))
    if meta.get("namespace") not in (None, "", target.namespace):
        raise ApiError(400, "the Eviction is for namespace %r, but the URL is for namespace %r"
                       % (meta.get("namespace"), target.namespace))
    options = body.get("deleteOptions")
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise ApiError(400, "Eviction deleteOptions must be an object (DeleteOptions)")
    objects.delete_with(target, options)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
