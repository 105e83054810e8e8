"""Delete ops as every writer (API, controllers) must build them.

Pods bound to a node are deleted gracefully: the FSM only marks them terminating
(deletionTimestamp, deletionGracePeriodSeconds) and the node's agent stops the
containers (SIGTERM, the grace period, SIGKILL) before deleting the pod for good
with `force`. A namespace is only marked Terminating: the namespace controller
deletes what is in it as single deletes would, then finalizes it (controllers/
namespaces.py). Everything else, and forced deletes, go at once.
"""
from shepherd_ha.model.times import now_rfc3339

from . import commands

def delete_op(resource, namespace, name, precondition=None, force=False, grace=None,
              propagation_policy=None):
    """A delete op. Pods go gracefully unless `force` (or grace 0); `grace` None means
    the pod's own terminationGracePeriodSeconds, read by the FSM from the stored pod."""
    op = commands.delete(resource, namespace, name, precondition or None, propagation_policy or None,
                         deletionTimestamp=now_rfc3339())
    if resource == "namespaces":
        op["terminate"] = True
    if resource == "pods" and not force and (grace is None or int(grace) > 0):
        op["graceful"] = {"deletionTimestamp": now_rfc3339(),
                          "gracePeriodSeconds": None if grace is None else int(grace)}
    return op


def delete_object_op(resource, obj, force=False, grace=None):
    """Delete `obj` as read, guarded by its uid (a re-created namesake is left alone)."""
    meta = obj["metadata"]
    return delete_op(resource, meta.get("namespace"), meta["name"], {"uid": meta.get("uid")}, force, grace)
