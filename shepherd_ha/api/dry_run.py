"""dryRun=All: a write is parsed, validated, defaulted and checked against the
committed state like any other, then answered as if done, and nothing is submitted:
no command reaches the Raft log. What the FSM would refuse (a missing object or
namespace, a name taken, a stale resourceVersion) is refused here from a
linearizable read, with the FSM's codes."""
import copy
import ipaddress

from flask import g, request

from shepherd_ha.model.namespaces import terminating_refusal
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.store.commands import VERSION
from shepherd_ha.store.finalizer_rules import finalizer_verdict
from shepherd_ha.store.fsm import FOREGROUND_FINALIZER, describe_object
from shepherd_ha.store.grace_periods import grace_seconds, terminating_metadata
from shepherd_ha.store.namespace_lifecycle import namespace_update, terminated_namespace
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store.server_metadata import SERVER_METADATA
from shepherd_ha.store.service_allocation import AllocationError, allocate

from .errors import ApiError, unavailable
from .write_options import invalid_option


def from_options(options):
    """DeleteOptions may carry dryRun in the body (kubectl delete --dry-run=server does)."""
    values = options.get("dryRun")
    if values is None:
        return
    if not isinstance(values, list):
        values = [values]
    _check(values)
    g.dry_run_in_body = bool(values)


def requested():
    """True for dryRun=All (in the query, or in a DELETE's options); 422 for any other
    value (Kubernetes knows only All)."""
    values = request.args.getlist("dryRun")
    _check(values)
    return bool(values) or g.get("dry_run_in_body", False)


def _check(values):
    for value in values:
        if value != "All":
            raise invalid_option(_kind(), "dryRun", "Unsupported value: %r: supported values: \"All\" "
                                 "(kubectl --dry-run=server)" % value)


def _kind():
    return {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}.get(request.method,
                                                                                         "DeleteOptions")


def simulate(replica, op):
    """The result the FSM would give for one write op, computed from reads only."""
    try:
        return _simulate(replica, op)
    except Unavailable as exc:
        raise unavailable(exc)


def _get(replica, resource, namespace, name):
    obj, _ = replica.get(resource, namespace if RESOURCES[resource].namespaced else None, name, True)
    return obj


def _simulate(replica, op):
    resource = op["resource"]
    info = RESOURCES[resource]
    if op["op"] == "create":
        obj = copy.deepcopy(op["object"])
        meta = obj["metadata"]
        if info.namespaced:
            ns = _get(replica, "namespaces", None, meta["namespace"])
            if ns is None:
                raise ApiError(404, 'namespace "%s" not found: create it first' % meta["namespace"])
            if ns["metadata"].get("deletionTimestamp"):
                message, details = terminating_refusal(resource, meta["name"], meta["namespace"])
                raise ApiError(403, message, details=details)
        if _get(replica, resource, meta.get("namespace"), meta["name"]) is not None:
            raise ApiError(409, '%s "%s" already exists' % (resource, meta["name"]), "AlreadyExists")
        meta["generation"] = 1
        _check_service_allocation(replica, resource, obj, None)
        return {"code": 201, "object": obj}
    current = _get(replica, resource, op.get("namespace"), op["name"])
    if current is None:
        raise ApiError(404, '%s "%s" not found' % (resource, op["name"]),
                       details={"name": op["name"], "kind": resource})
    _check_precondition(op, current)
    if op["op"] == "delete":
        return {"code": 200, "object": _deleted(op, resource, current)}
    updated = _updated(info, op, current)
    refusal, _ = finalizer_verdict(resource, describe_object(resource, op.get("namespace"), op["name"]),
                                   current, updated, VERSION)
    if refusal:      # the store's 422; an update that removes the last finalizer is answered as made
        raise ApiError(422, refusal, "Invalid")
    if op.get("subresource") != "status":
        _check_service_allocation(replica, resource, updated, current)
    return {"code": 200, "object": updated}


def _deleted(op, resource, current):
    """The object as the store's delete answers it (store/fsm.py _op_delete): a namespace
    marked Terminating (or refused), a pod on a node marked with its deadline, an object
    with finalizers (foregroundDeletion added for Foreground) marked deleted, anything
    else as it was (it goes)."""
    obj = copy.deepcopy(current)
    if op.get("terminate"):
        refusal, marked = terminated_namespace(obj, op.get("deletionTimestamp"))
        if refusal:
            raise ApiError(refusal[0], refusal[2], refusal[1])
        return marked or obj
    graceful = op.get("graceful")
    seconds = grace_seconds(graceful, obj) if graceful and resource == "pods" else 0
    if seconds > 0 and (obj.get("spec") or {}).get("nodeName"):
        obj["metadata"] = terminating_metadata(obj["metadata"], graceful["deletionTimestamp"], seconds,
                                               VERSION) or obj["metadata"]
        return obj
    finalizers = list(obj["metadata"].get("finalizers") or [])
    if op.get("propagationPolicy") == "Foreground" and resource != "namespaces" \
            and FOREGROUND_FINALIZER not in finalizers:
        finalizers.append(FOREGROUND_FINALIZER)
    if finalizers:
        obj["metadata"].setdefault("deletionTimestamp", op.get("deletionTimestamp"))
        obj["metadata"]["finalizers"] = finalizers
    return obj


# Any address passes the range checks: the FSM's --service-cidr is not known here, so a
# dry run refuses what the allocator would for a taken cluster IP or node port, a changed
# cluster IP, bad clusterIPs/ipFamilies; its answer shows no allocated address.
_ANY_ADDRESS = ipaddress.IPv4Network("0.0.0.0/0")


def _check_service_allocation(replica, resource, obj, current):
    if resource != "services":
        return
    meta = obj["metadata"]
    stored, _ = replica.list("services", None, True)
    others = [s for s in stored if (s["metadata"].get("namespace"), s["metadata"]["name"]) !=
              (meta.get("namespace"), meta["name"])]
    try:
        allocate(obj, current, others, _ANY_ADDRESS)
    except AllocationError as exc:
        raise ApiError(422, 'Service "%s" is invalid: %s: %s' % (meta["name"], exc.field, exc.message), "Invalid")


def _check_precondition(op, current):
    pre = op.get("precondition") or {}
    rv, uid = pre.get("resourceVersion"), pre.get("uid")
    if rv not in (None, "") and str(rv) != current["metadata"].get("resourceVersion"):
        raise ApiError(409, "%s was modified (resourceVersion %s, you sent %s); read it again and re-apply "
                       "your change" % (op["name"], current["metadata"].get("resourceVersion"), rv), "Conflict")
    if uid not in (None, "") and uid != current["metadata"].get("uid"):
        raise ApiError(409, "%s has uid %s, not %s" % (op["name"], current["metadata"].get("uid"), uid), "Conflict")


def _updated(info, op, current):
    """The object as the FSM's update would store it (server metadata kept, status kept
    unless the status subresource is written, generation bumped on a spec change)."""
    incoming = copy.deepcopy(op["object"])
    if op.get("subresource") == "status":
        obj = copy.deepcopy(current)
        obj["status"] = incoming.get("status")
        return obj
    if op.get("subresource") == "finalize":
        obj = copy.deepcopy(current)
        obj["spec"] = dict(obj.get("spec") if isinstance(obj.get("spec"), dict) else {},
                           finalizers=incoming["spec"]["finalizers"])
        return obj
    if info.plural == "namespaces":      # spec.finalizers and status: the store keeps its own
        incoming = namespace_update(incoming, current, op["name"])
    meta = {k: v for k, v in (incoming.get("metadata") or {}).items() if k not in SERVER_METADATA}
    meta.update({k: current["metadata"][k] for k in SERVER_METADATA if k in current["metadata"]})
    incoming["metadata"] = meta
    if info.has_status:
        if "status" in current:
            incoming["status"] = copy.deepcopy(current["status"])
        else:
            incoming.pop("status", None)
    keys = (set(incoming) | set(current)) - {"metadata", "status", "apiVersion", "kind"}
    if any(incoming.get(k) != current.get(k) for k in keys):
        meta["generation"] = current["metadata"].get("generation", 1) + 1
    return incoming
