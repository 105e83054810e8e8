"""Rules about what an update may change, on top of validating the new object."""
from ._checks import Causes, is_int
from .names import show
from .secret_validation import validate_secret_update
from .selectors import LabelSelector, SelectorError

_POD_SPEC_RULE = ("a pod's spec is immutable apart from containers[*].image, "
                  "activeDeadlineSeconds and setting nodeName once; delete and re-create "
                  "the pod (or let its deployment do it) to change anything else")


def _dict(value):
    return value if isinstance(value, dict) else {}


def _keys(a, b):
    """Keys of both dicts in a stable order, for readable cause lists."""
    return list(a) + [k for k in b if k not in a]


def validate_update(resource_plural, old, new):
    """Causes for changes an update may not make from old to new.

    Only the update rules: call validate_object(resource_plural, new) as well.
    Never raises on JSON-shaped input; malformed objects are left to validate_object.
    """
    causes = Causes()
    if not isinstance(old, dict) or not isinstance(new, dict):
        return list(causes)
    old_meta, new_meta = _dict(old.get("metadata")), _dict(new.get("metadata"))
    for key in ("name", "namespace"):
        before, after = old_meta.get(key), new_meta.get(key)
        if before is not None and after is not None and before != after:
            causes.add("metadata." + key, "is immutable: %s cannot be renamed to %s"
                       % (show(before), show(after)))
    if resource_plural == "deployments":
        _deployment(causes, _dict(old.get("spec")), _dict(new.get("spec")))
    elif resource_plural == "pods" and isinstance(new.get("spec"), dict):
        _pod(causes, _dict(old.get("spec")), new["spec"])
    elif resource_plural == "configmaps":
        _config_map(causes, old, new)
    elif resource_plural == "secrets":
        validate_secret_update(causes, old, new)
    elif resource_plural == "nodes":
        _node(causes, _dict(old.get("spec")), _dict(new.get("spec")))
    return list(causes)


def _selector(spec):
    try:
        return LabelSelector.from_spec(spec)
    except SelectorError:
        return spec     # invalid ones can only compare as written


def _deployment(causes, old, new):
    # Compared by meaning, so reordering matchLabels or expressions is not a change.
    if _selector(old.get("selector")) != _selector(new.get("selector")):
        causes.add("spec.selector",
                   "is immutable: delete and re-create the deployment to change it")


def _pod(causes, old, new):
    before, after = old.get("nodeName") or None, new.get("nodeName") or None
    if before is not None and after != before:
        causes.add("spec.nodeName", "the pod is already bound to node %s and cannot move: "
                   "delete it so it is scheduled again" % show(before))
    before, after = old.get("activeDeadlineSeconds"), new.get("activeDeadlineSeconds")
    if after != before and not (is_int(after) and after > 0 and
                                (before is None or (is_int(before) and after <= before))):
        causes.add("spec.activeDeadlineSeconds", "may only be set or lowered, not raised or "
                   "removed (was %s)" % show(before))
    for key in _keys(old, new):
        if key in ("nodeName", "activeDeadlineSeconds"):
            continue
        if key == "containers":
            _containers(causes, old.get(key), new.get(key))
        elif old.get(key) != new.get(key):
            causes.add("spec." + key, _POD_SPEC_RULE)


def _containers(causes, old, new):
    if old == new:
        return
    if not (isinstance(old, list) and isinstance(new, list) and len(old) == len(new)):
        causes.add("spec.containers", "containers cannot be added or removed: " + _POD_SPEC_RULE)
        return
    for i, (a, b) in enumerate(zip(old, new)):
        if not (isinstance(a, dict) and isinstance(b, dict)):
            if a != b:
                causes.add("spec.containers[%d]" % i, _POD_SPEC_RULE)
            continue
        for key in _keys(a, b):
            if key != "image" and a.get(key) != b.get(key):
                causes.add("spec.containers[%d].%s" % (i, key), _POD_SPEC_RULE)


def _node(causes, old, new):
    # Left out, the store keeps it; a different value is refused: pods and routes use the block.
    for field in ("podCIDR", "podCIDRs"):
        before, after = old.get(field), new.get(field)
        if before and after is not None and after != before:
            causes.add("spec." + field, "is immutable once set (%s): the node's pods and every node's "
                       "routes use it; delete and re-register the node to get another block" % show(before))


def _config_map(causes, old, new):
    if old.get("immutable") is not True:
        return
    if new.get("immutable") is not True:
        causes.add("immutable", "cannot be unset once true: delete and re-create the config map")
    for field in ("data", "binaryData"):
        if (old.get(field) or {}) != (new.get(field) or {}):
            causes.add(field, "is immutable because the config map is immutable: "
                       "delete and re-create it to change it")
