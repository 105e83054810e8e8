"""Types of the status fields that controllers, agents and sheepctl read.

Only shapes and types, not meaning: a status is written by the agents and the
controllers, and a wrong type stored there (a number where a list of conditions
goes) would make every reader of it raise. Unknown fields are left alone.
"""
import ipaddress
import re

from ._checks import is_int, join
from .names import show
from .quantity import QuantityError, parse_cpu, parse_memory
from .times import parse_datetime

CONDITION_STATUSES = ("True", "False", "Unknown")
_CONDITION_TIMES = ("lastTransitionTime", "lastHeartbeatTime", "lastProbeTime", "lastUpdateTime")
_QUANTITIES = {"cpu": parse_cpu, "memory": parse_memory}
NAMESPACE_PHASES = ("Active", "Terminating")
_DEPLOYMENT_COUNTS = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                      "availableReplicas", "unavailableReplicas", "collisionCount", "fullyLabeledReplicas")


def object_list(causes, field, value, example=None):
    """A list of objects; returns (index, item) for its items that are objects."""
    if value is None:
        return ()
    if not isinstance(value, list):
        causes.add(field, "must be a list of objects%s, got %s" % (" such as " + example if example else "",
                                                                   show(value)))
        return ()
    found = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            found.append((i, item))
        else:
            causes.add("%s[%d]" % (field, i), "must be an object, got %s" % show(item))
    return found


def strings(causes, prefix, obj, keys):
    for key in keys:
        causes.string(join(prefix, key), obj.get(key))


# RFC 3339 as Go's time.RFC3339 parses it (what Kubernetes' typed clients read back).
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


def times(causes, prefix, obj, keys):
    """RFC 3339 times (null or absent allowed): a typed client reading a list back fails
    on one it cannot parse, for every object of it."""
    for key in keys:
        field = join(prefix, key)
        value = causes.string(field, obj.get(key))
        if not value:
            continue
        try:
            if not _RFC3339.match(value):
                raise ValueError(value)
            parse_datetime(value)
        except ValueError:
            causes.add(field, "must be an RFC 3339 time such as 2026-11-29T17:00:00Z, got %s" % show(value))


def conditions(causes, field, value):
    """[{type, status: True|False|Unknown, reason, message, last*Time}]"""
    for i, cond in object_list(causes, field, value, '{"type": "Ready", "status": "True"}'):
        f = "%s[%d]" % (field, i)
        causes.string(f + ".type", cond.get("type"), required=True, non_empty=True)
        state = cond.get("status")
        if isinstance(state, bool):
            causes.add(f + ".status", 'must be the string "True", "False" or "Unknown" (in quotes), got %s'
                       % show(state))
        else:
            causes.enum(f + ".status", state, CONDITION_STATUSES, required=True)
        strings(causes, f, cond, ("reason", "message"))
        times(causes, f, cond, _CONDITION_TIMES)


def _resource_list(causes, field, value):
    """capacity / allocatable: {cpu: quantity, memory: quantity, pods: count, other: quantity}."""
    for name, amount in (causes.dict(field, value) or {}).items():
        f = join(field, name)
        parse = _QUANTITIES.get(name)
        if parse is not None:
            try:
                parse(amount)
            except QuantityError as e:
                causes.add(f, str(e))
        elif name == "pods":
            if not (is_int(amount) and amount >= 0) and not (isinstance(amount, str) and amount.isdigit()):
                causes.add(f, "must be a number of pods such as 110, got %s" % show(amount))
        elif isinstance(amount, bool) or not isinstance(amount, (str, int, float)):
            causes.add(f, "must be a quantity (a string or a number), got %s" % show(amount))


def pod_status(causes, status):
    conditions(causes, "status.conditions", status.get("conditions"))
    ip = causes.string("status.podIP", status.get("podIP"))
    if ip:
        _ip(causes, "status.podIP", ip)
    for i, item in object_list(causes, "status.podIPs", status.get("podIPs")):
        ip = causes.string("status.podIPs[%d].ip" % i, item.get("ip"), required=True)
        if ip:
            _ip(causes, "status.podIPs[%d].ip" % i, ip)
    host = causes.string("status.hostIP", status.get("hostIP"))
    if host:
        _ip(causes, "status.hostIP", host)
    strings(causes, "status", status, ("reason", "message", "nominatedNodeName", "qosClass"))
    times(causes, "status", status, ("startTime",))
    for group in ("containerStatuses", "initContainerStatuses"):
        for i, cs in object_list(causes, "status." + group, status.get(group)):
            f = "status.%s[%d]" % (group, i)
            causes.string(f + ".name", cs.get("name"), required=True)
            strings(causes, f, cs, ("image", "imageID", "containerID"))
            causes.boolean(f + ".ready", cs.get("ready"))
            causes.boolean(f + ".started", cs.get("started"))
            causes.integer(f + ".restartCount", cs.get("restartCount"), 0)
            for key in ("state", "lastState"):
                for kind, detail in (causes.dict("%s.%s" % (f, key), cs.get(key)) or {}).items():
                    if causes.dict("%s.%s.%s" % (f, key, kind), detail):
                        times(causes, "%s.%s.%s" % (f, key, kind), detail, ("startedAt", "finishedAt"))


def _ip(causes, field, text):
    try:
        ipaddress.ip_address(text)
    except ValueError:
        causes.add(field, "%s is not an IP address" % show(text))


def node_status(causes, status):
    conditions(causes, "status.conditions", status.get("conditions"))
    for field in ("capacity", "allocatable"):
        _resource_list(causes, "status." + field, status.get(field))
    for i, addr in object_list(causes, "status.addresses", status.get("addresses")):
        strings(causes, "status.addresses[%d]" % i, addr, ("type", "address"))
    info = causes.dict("status.nodeInfo", status.get("nodeInfo"))
    for key, value in (info or {}).items():
        causes.string(join("status.nodeInfo", key), value)
    endpoints = causes.dict("status.daemonEndpoints", status.get("daemonEndpoints"))
    kubelet = causes.dict("status.daemonEndpoints.kubeletEndpoint", (endpoints or {}).get("kubeletEndpoint"))
    if kubelet is not None:
        causes.integer("status.daemonEndpoints.kubeletEndpoint.Port", kubelet.get("Port"), 0, 65535)
    causes.dict("status.usage", status.get("usage"))     # the agent's psutil figures, read leniently


def deployment_status(causes, status):
    for key in _DEPLOYMENT_COUNTS:
        causes.integer("status." + key, status.get(key), 0)
    conditions(causes, "status.conditions", status.get("conditions"))


def namespace_status(causes, status):
    causes.enum("status.phase", status.get("phase"), NAMESPACE_PHASES)


def service_status(causes, status):
    balancer = causes.dict("status.loadBalancer", status.get("loadBalancer"))
    for i, item in object_list(causes, "status.loadBalancer.ingress", (balancer or {}).get("ingress")):
        strings(causes, "status.loadBalancer.ingress[%d]" % i, item, ("ip", "hostname"))


def no_status_fields(causes, status):
    """Kinds whose status nobody reads: it must still be an object."""


STATUS_VALIDATORS = {"pods": pod_status, "nodes": node_status, "deployments": deployment_status,
                     "replicasets": deployment_status,
                     "namespaces": namespace_status, "services": service_status}


def validate_status(causes, resource_plural, obj):
    """Add causes for `obj`'s status (an object, when present, typed per kind)."""
    status = causes.dict("status", obj.get("status"))
    if status is not None:
        STATUS_VALIDATORS.get(resource_plural, no_status_fields)(causes, status)
