"""The store's command language: every command and op the Raft log carries is built
here, and `shape_error` says what is wrong with one that is not well formed (the FSM
asks before applying, so a bad command is refused with that message, never applied
in part).

Commands (plain dicts, pickled into the Raft log; `version` is the log format):
  write    {"type": "write", "version": 2, "key": str|None, "epoch": [term, replica]|None,
            "ops": [op, ...], "digest": str?}  ops applied atomically: all or none; a key
            remembered with another digest (the request it answered) is refused, 422
  group    {"type": "group", "version": 2, "commands": [command, ...]}
            independent commands sharing one log entry (group commit); one result each
  claim    {"type": "claim", "version": 2, "term": int, "replica": str}   controller epoch
  barrier  {"type": "barrier", "version": 2}                             read marker
  network  {"type": "network", "version": 2, "clusterCIDR": str, "nodeCIDRMaskSize": int,
            "epoch": [term, replica]|None}   the pod network's plan, set once (store/pod_cidrs.py)
  members  {"type": "members", "version": 2, "set": [{"id", "raft", "api"}, ...], "remove": [id, ...]}
            the replica table (ids and API URLs of the Raft members; store/membership.py)
  service_network {"type": "service_network", "version": 2, "cidr": str, "epoch": [term, replica]|None}
            the range cluster IPs are allocated from (the leader's --service-cidr)
Ops:
  create   {"op": "create", "resource": plural, "object": obj}
  update   {"op": "update", "resource": plural, "namespace": ns, "name": name, "object": obj,
            "subresource": "status"|"binding"?, "precondition": {"resourceVersion"?, "uid"?}?}
           "binding" (pods, version 2): `object` is {"spec": {"nodeName": node}, "status": status};
           one change sets both, as Kubernetes' pods/binding subresource does (bind(); the
           scheduler's op inside the store: the API serves no pods/binding)
           "finalize" (namespaces, version 3): `object` is {"spec": {"finalizers": [str, ...]}};
           sets only spec.finalizers, as Kubernetes' namespaces/finalize; a Terminating
           namespace left without finalizers of either kind is deleted with what is left in it
  delete   {"op": "delete", "resource": plural, "namespace": ns, "name": name,
            "precondition"?, "propagationPolicy"?, "deletionTimestamp"?, "graceful"?, "terminate"?}
           "terminate" (namespaces, version 3): mark the namespace Terminating and leave its
           contents to the namespace controller; a namespace delete without it (logged by
           versions 1 and 2) deletes everything in the namespace at once, as it did then
           "graceful" {"deletionTimestamp": when asked, "gracePeriodSeconds": int|None}: a
           pod on a node is only marked; from version 4 its deletionTimestamp is when the
           grace period ends, as in Kubernetes (store/grace_periods.py), before it was the
           request's time
Optional fields are left out when unset (the FSM reads them with .get). A command
logged before the version field existed has none: it is version 1. Version 2 added the
binding update, version 3 the namespace lifecycle (finalize, terminate), version 4 a pod's
deadline as its deletionTimestamp; the FSM applies all four (a log written by an older
version replays as it did).
"""
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.service_network import parse_service_cidr

VERSION = 4            # the newest command format: what this code writes
# what it applies (1: before the binding update, 2: before namespace lifecycle, 3: before
# a pod's deletionTimestamp was its deadline)
APPLIED_VERSIONS = (1, 2, 3, 4)
LIFECYCLE_FORMAT = 3        # from this format: namespaces follow Kubernetes' lifecycle
GRACE_DEADLINE_FORMAT = 4   # from this format: a pod's deletionTimestamp is its deadline
SUBRESOURCES = ("status", "binding", "finalize")


# ---- commands ----

def write(ops, key=None, epoch=None, digest=None):
    """An atomic write of `ops`; `key` makes a retry idempotent, `epoch` fences a controller,
    `digest` (of the client's request) ties the key to one request."""
    command = {"type": "write", "version": VERSION, "key": key, "epoch": None if epoch is None else list(epoch),
               "ops": list(ops)}
    if digest is not None:
        command["digest"] = digest
    return command


def group(commands):
    return {"type": "group", "version": VERSION, "commands": list(commands)}


def claim(term, replica):
    return {"type": "claim", "version": VERSION, "term": term, "replica": replica}


def barrier():
    return {"type": "barrier", "version": VERSION}


def network(cluster_cidr, node_mask, epoch=None):
    """Set the cluster CIDR the FSM cuts into one block per node (set once; the same again is a no-op)."""
    return {"type": "network", "version": VERSION, "clusterCIDR": cluster_cidr, "nodeCIDRMaskSize": node_mask,
            "epoch": None if epoch is None else list(epoch)}


def members(set_=(), remove=()):
    """Record replicas (id, Raft address, API URL) and forget others by id."""
    return {"type": "members", "version": VERSION,
            "set": [{"id": m["id"], "raft": m["raft"], "api": m.get("api")} for m in set_],
            "remove": list(remove)}


def service_network(cidr, epoch=None):
    return {"type": "service_network", "version": VERSION, "cidr": cidr,
            "epoch": None if epoch is None else list(epoch)}


# ---- ops ----

def create(resource, obj):
    return {"op": "create", "resource": resource, "object": obj}


def update(resource, namespace, name, obj, precondition=None, subresource=None, **extra):
    op = {"op": "update", "resource": resource, "namespace": namespace, "name": name, "object": obj}
    return _with(op, precondition=precondition, subresource=subresource, **extra)


def bind(namespace, name, node_name, status, precondition=None):
    """A pod assigned to `node_name` with its new `status` (the PodScheduled condition),
    in one change: refused (409) if the pod is bound already or being deleted."""
    return update("pods", namespace, name, {"spec": {"nodeName": node_name}, "status": status},
                  precondition=precondition, subresource="binding")


def finalize(name, finalizers, precondition=None):
    """Namespace `name` with spec.finalizers set to `finalizers` (and nothing else changed)."""
    return update("namespaces", None, name, {"spec": {"finalizers": list(finalizers)}},
                  precondition=precondition, subresource="finalize")


def delete(resource, namespace, name, precondition=None, propagation_policy=None, **extra):
    op = {"op": "delete", "resource": resource, "namespace": namespace, "name": name}
    return _with(op, precondition=precondition, propagationPolicy=propagation_policy, **extra)


def _with(op, **optional):
    for field, value in optional.items():
        if value is not None:
            op[field] = value
    return op


# ---- the shape check ----

def shape_error(command):
    """None if `command` is well formed, else what is wrong (a sentence). A group's
    commands are checked one by one when applied (each has its own result)."""
    if not isinstance(command, dict):
        return "a command is a mapping, not %s" % type(command).__name__
    version = command.get("version", 1)
    if version not in APPLIED_VERSIONS or isinstance(version, bool):
        return ("command format version %r is not one this replica applies (%s): run the same "
                "version of Shepherd HA on every replica" % (version, ", ".join(map(str, APPLIED_VERSIONS))))
    kind = command.get("type")
    check = _COMMAND_CHECKS.get(kind) if isinstance(kind, str) else None
    if check is None:
        return "unknown command type %r (known: %s)" % (command.get("type"), ", ".join(sorted(_COMMAND_CHECKS)))
    return check(command)


def _check_write(command):
    key, epoch, ops = command.get("key"), command.get("epoch"), command.get("ops")
    if key is not None and not isinstance(key, str):
        return "a write's key is a string or None, not %s" % type(key).__name__
    if command.get("digest") is not None and not isinstance(command["digest"], str):
        return "a write's digest is a string, not %s" % type(command["digest"]).__name__
    if epoch is not None and not (isinstance(epoch, (list, tuple)) and len(epoch) == 2):
        return "a write's epoch is [term, replica] or None, not %r" % (epoch,)
    if not isinstance(ops, list) or not ops:
        return "a write needs a non-empty list of ops"
    for index, op in enumerate(ops):
        error = _op_error(op)
        if error:
            return "op %d: %s" % (index, error)
    return None


def _op_error(op):
    if not isinstance(op, dict):
        return "an op is a mapping, not %s" % type(op).__name__
    kind, resource = op.get("op"), op.get("resource")
    if kind not in ("create", "update", "delete"):
        return "unknown op %r (known: create, update, delete)" % (kind,)
    if not isinstance(resource, str) or resource not in RESOURCES:
        return "unknown resource %r" % (resource,)
    if kind == "create":
        obj = op.get("object")
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            return "a create needs an object with metadata.name"
        return None
    if not isinstance(op.get("name"), str):
        return "a%s needs the object's name" % ("n update" if kind == "update" else " delete")
    if kind == "update" and not isinstance(op.get("object"), dict):
        return "an update needs an object"
    if kind == "update" and op.get("subresource") is not None:
        sub = op["subresource"]
        if sub not in SUBRESOURCES:
            return "unknown subresource %r of an update (known: %s)" % (sub, ", ".join(SUBRESOURCES))
        if sub == "binding":
            spec, status = op["object"].get("spec"), op["object"].get("status")
            if resource != "pods" or not isinstance(spec, dict) or not isinstance(spec.get("nodeName"), str) \
                    or not spec["nodeName"] or not isinstance(status, (dict, type(None))):
                return "a binding is a pods update of {spec: {nodeName: str}, status: mapping or null}"
        if sub == "finalize":
            spec = op["object"].get("spec")
            finalizers = spec.get("finalizers") if isinstance(spec, dict) else None
            if resource != "namespaces" or not isinstance(finalizers, list) \
                    or not all(isinstance(f, str) and f for f in finalizers):
                return "a finalize is a namespaces update of {spec: {finalizers: [non-empty str, ...]}}"
    if kind == "delete" and "terminate" in op and (op["terminate"] is not True or resource != "namespaces"):
        return "terminate is only true, and only on a namespaces delete"
    for field in ("precondition", "graceful"):
        if op.get(field) is not None and not isinstance(op[field], dict):
            return "%s is a mapping, not %s" % (field, type(op[field]).__name__)
    return None


def _check_group(command):
    if not isinstance(command.get("commands"), list):
        return "a group needs a list of commands"
    return None


def _check_claim(command):
    term, replica = command.get("term"), command.get("replica")
    if not isinstance(term, int) or isinstance(term, bool) or not isinstance(replica, str):
        return "a claim needs an integer term and a replica id, not %r and %r" % (term, replica)
    return None


def _check_network(command):
    cidr, mask, epoch = command.get("clusterCIDR"), command.get("nodeCIDRMaskSize"), command.get("epoch")
    if not isinstance(cidr, str) or not isinstance(mask, int) or isinstance(mask, bool):
        return "a network command needs a clusterCIDR string and an integer nodeCIDRMaskSize, not %r and %r" \
            % (cidr, mask)
    if epoch is not None and not (isinstance(epoch, (list, tuple)) and len(epoch) == 2):
        return "a network command's epoch is [term, replica] or None, not %r" % (epoch,)
    return None


def _check_members(command):
    entries, removed = command.get("set"), command.get("remove")
    if not isinstance(entries, list) or not isinstance(removed, list):
        return "a members command needs a list to set and a list of ids to remove"
    for entry in entries:
        if not (isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("raft"), str)
                and isinstance(entry.get("api"), (str, type(None)))):
            return "a member is {id: str, raft: str, api: str|None}, not %r" % (entry,)
    if not all(isinstance(ident, str) for ident in removed):
        return "removed members are ids (strings)"
    return None


def _check_service_network(command):
    epoch = command.get("epoch")
    if epoch is not None and not (isinstance(epoch, (list, tuple)) and len(epoch) == 2):
        return "a service_network's epoch is [term, replica] or None, not %r" % (epoch,)
    try:
        parse_service_cidr(command.get("cidr"))
    except ValueError as exc:
        return "service_network: %s" % exc
    return None


_COMMAND_CHECKS = {"write": _check_write, "group": _check_group, "claim": _check_claim,
                   "barrier": lambda command: None, "network": _check_network, "members": _check_members,
                   "service_network": _check_service_network}
