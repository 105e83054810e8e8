"""PATCH bodies by content type: JSON merge patch, RFC 6902 JSON patch, strategic
merge patch and server-side apply. Each becomes a function current -> new object
for the API's read-modify-write (apply's may start from nothing: it creates)."""
import yaml
from flask import request

from shepherd_ha.model.json_patch import JsonPatchError, apply_json_patch
from shepherd_ha.model import server_side_apply as ssa
from shepherd_ha.model.merge_patch import merge_patch
from shepherd_ha.model.strategic_merge import PatchError, strategic_merge

from .bodies import MAX_DEPTH, _unsupported_value, json_body, raw_body, refuse_unsupported
from .errors import ApiError

MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
TYPES = (MERGE, JSON_PATCH, STRATEGIC, APPLY, "application/json")


def patch_type():
    ctype = (request.mimetype or "").lower()
    if ctype not in TYPES:
        raise ApiError(415, "PATCH content type %r is not supported: use one of %s"
                       % (request.mimetype or "", ", ".join(TYPES[:4])))
    return MERGE if ctype == "application/json" else ctype


def read_patch(ptype):
    """The parsed body of a patch of type `ptype`."""
    if ptype == APPLY:
        return _yaml_object()
    body = json_body()
    if ptype == JSON_PATCH:
        if not isinstance(body, list):
            raise ApiError(400, "a JSON patch must be a list of operations such as "
                           '[{"op": "replace", "path": "/spec/replicas", "value": 3}]')
    elif not isinstance(body, dict):
        raise ApiError(400, "a %s patch must be a JSON object" % ("strategic merge" if ptype == STRATEGIC else "merge"))
    return body


class _NoAliasLoader(yaml.SafeLoader):
    """YAML without aliases: `*name` repeats a node by reference, so a few hundred bytes of
    nested aliases expand to billions of nodes ("billion laughs"; 426 bytes took 16 s of CPU
    here). An apply configuration never needs one; kubectl sends JSON."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "the alias *%s is not accepted: write the value out "
                                              "instead of referring to an anchor" % event.anchor, event.start_mark)
        return super().compose_node(parent, index)


def _yaml_object():
    raw = raw_body()
    if not raw.strip():
        raise ApiError(400, "request body is empty: send the object to apply (YAML or JSON)")
    try:
        body = yaml.load(raw, Loader=_NoAliasLoader)
    except RecursionError:
        raise ApiError(400, "request body nests deeper than %d levels: flatten it" % MAX_DEPTH)
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ApiError(400, "request body is not valid YAML or JSON: %s" % exc)
    if not isinstance(body, dict):
        raise ApiError(400, "an apply configuration must be one object, not %s" % type(body).__name__)
    # Non-JSON values first: _unsupported_value expects string keys.
    problem = _non_json(body)
    if problem:
        raise ApiError(400, "request body %s" % problem)
    refuse_unsupported(_unsupported_value(body))
    return body


def _non_json(value):
    """YAML can say what JSON cannot (dates, non-string keys, binary): refuse it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(isinstance(k, str) for k in item):
                return "has a key that is not a string: quote it"
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not (item is None or isinstance(item, (str, int, float, bool))):
            return "holds %s, which JSON cannot carry: quote it" % type(item).__name__
    return None


def resource_version_of(ptype, patch):
    """The resourceVersion a merge or strategic patch carries (a precondition), or None."""
    if ptype in (MERGE, STRATEGIC) and isinstance(patch.get("metadata"), dict):
        return patch["metadata"].get("resourceVersion")
    return None


def _causes(field, message):
    return {"causes": [{"reason": "FieldValueInvalid", "field": field, "message": message}]}


def applier(ptype, plural, patch):
    """current -> patched object, for every type but apply; PatchError and JsonPatchError become 4xx."""
    def change(current):
        try:
            if ptype == JSON_PATCH:
                # Copies can nest what the body could not (a part copied into itself).
                patched = apply_json_patch(current, patch)
                refuse_unsupported(_unsupported_value(patched))
                return patched
            if ptype == STRATEGIC:
                return strategic_merge(plural, current, patch)
            return merge_patch(current, patch)
        except JsonPatchError as exc:
            raise ApiError(exc.code, str(exc), details=_causes(exc.path, str(exc)) if exc.code == 422 else None)
        except PatchError as exc:
            message = "the strategic merge patch does not apply: %s" % exc
            raise ApiError(422, message, "Invalid", details=_causes("", message))
    return change


def apply_change(plural, name, applied, manager, api_version, now, force):
    """current (None: absent) -> the object after `manager` applies `applied`; conflicts
    are a 409 whose causes name each field and its manager, as Kubernetes answers."""
    def change(current):
        try:
            return ssa.apply(plural, current, applied, manager, api_version, now, force)
        except ssa.ApplyConflict as exc:
            raise ApiError(409, str(exc), "Conflict", details={
                "name": name, "kind": plural,
                "causes": [{"reason": "FieldManagerConflict", "field": field, "message": who}
                           for who, field in exc.conflicts]})
        except PatchError as exc:
            message = "the apply configuration does not merge: %s" % exc
            raise ApiError(422, message, "Invalid", details=dict(_causes("", message), name=name, kind=plural))
    return change
