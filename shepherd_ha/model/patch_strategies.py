"""How each list field of our kinds merges: Kubernetes' patchStrategy/patchMergeKey
(strategic merge patch) and listType/listMapKeys (server-side apply), for the fields
we serve. One table for both, so a list merges the same way whichever patch type
touches it.

Paths are dotted field names from the object's root with list items transparent
("spec.containers.env" is the env of every container). A list not named here is
atomic: a patch or an apply replaces it whole, as Kubernetes does for lists without
a strategy (command, args, tolerations, subsets...).
"""
from collections import namedtuple

# keys: the merge key first (SMP uses only it), then further listMapKeys (SSA).
# kind: "map" (a list of objects told apart by `keys`) or "set" (primitives).
ListStrategy = namedtuple("ListStrategy", "kind keys")

MAP = lambda *keys: ListStrategy("map", keys)    # noqa: E731
SET = ListStrategy("set", ())

_METADATA = {
    "metadata.finalizers": SET,
    "metadata.ownerReferences": MAP("uid"),
    "metadata.managedFields": None,        # never merged: the server keeps it
}

_CONTAINER = {
    "env": MAP("name"),
    "volumeMounts": MAP("mountPath"),
    "ports": MAP("containerPort", "protocol"),
}

_POD_SPEC = {
    "volumes": MAP("name"),
    "imagePullSecrets": MAP("name"),
}
for _list in ("containers", "initContainers"):
    _POD_SPEC[_list] = MAP("name")
    for _field, _strategy in _CONTAINER.items():
        _POD_SPEC["%s.%s" % (_list, _field)] = _strategy

_CONDITIONS = {"status.conditions": MAP("type")}


def _under(prefix, table):
    return {"%s.%s" % (prefix, path): strategy for path, strategy in table.items()}


STRATEGIES = {
    "pods": dict(_METADATA, **_under("spec", _POD_SPEC), **_CONDITIONS,
                 **{"status.podIPs": MAP("ip")}),
    "deployments": dict(_METADATA, **_under("spec.template.spec", _POD_SPEC),
                        **_under("spec.template", {"metadata.finalizers": SET}), **_CONDITIONS),
    "replicasets": dict(_METADATA, **_under("spec.template.spec", _POD_SPEC), **_CONDITIONS),
    "nodes": dict(_METADATA, **_CONDITIONS, **{"spec.podCIDRs": SET, "status.addresses": MAP("type")}),
    "services": dict(_METADATA, **{"spec.ports": MAP("port", "protocol")}),
    "namespaces": dict(_METADATA, **{"spec.finalizers": SET}),
}

# Maps whose keys a patch may list in $retainKeys (a union type: one member at a time).
RETAIN_KEYS = {"spec.strategy", "spec.template.spec.volumes", "spec.volumes"}


def list_strategy(plural, path):
    """The ListStrategy of the list at dotted `path` of a `plural` object, or None (atomic)."""
    return STRATEGIES.get(plural, _METADATA).get(path)
