"""Kubernetes' strategic merge patch (application/strategic-merge-patch+json).

Like a JSON merge patch (null deletes a key, objects merge key by key), except for
lists: a list with a merge key (containers by name, env by name, ports by
containerPort...; model/patch_strategies.py) merges item by item, a set of
primitives (finalizers) takes the union, any other list is replaced. Directives:

- `$patch: replace` in a map replaces the map with the rest of the patch; as a list
  item, replaces the whole list with the other items;
- `$patch: delete` in a map deletes it; as a list item, deletes the item with that key;
- `$patch: merge` is the default;
- `$setElementOrder/<list>`: the order of the merged list (its keys or values);
- `$deleteFromPrimitiveList/<list>`: values to remove from a primitive list;
- `$retainKeys`: keys of the merged map to keep; the others are cleared.

Directives never survive into the result. Neither input is modified.
"""
import copy

from .patch_strategies import list_strategy

_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"
_DELETE = object()      # what a `$patch: delete` map becomes before its parent drops it


class PatchError(ValueError):
    """The patch cannot be applied (a bad directive, an item without its merge key)."""


def strategic_merge(plural, original, patch):
    """The `plural` object `original` with the strategic merge `patch` applied."""
    if not isinstance(patch, dict):
        raise PatchError("a strategic merge patch must be a JSON object")
    result = _merge_map(original if isinstance(original, dict) else {}, patch, plural, "")
    if result is _DELETE:
        raise PatchError("$patch: delete at the top of the patch would delete the whole object: use DELETE")
    return result


def _join(path, key):
    return "%s.%s" % (path, key) if path else key


def _merge_map(original, patch, plural, path):
    patch = dict(patch)
    directive = patch.pop("$patch", "merge")
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return strip_directives(patch)
    if directive != "merge":
        raise PatchError("%s: $patch %r is not one of replace, delete, merge" % (path or "the object", directive))
    retain = patch.pop("$retainKeys", None)
    orders, removals = {}, {}
    for key in [k for k in patch if k.startswith("$")]:
        value = patch.pop(key)
        if key.startswith(_ORDER):
            orders[key[len(_ORDER):]] = value
        elif key.startswith(_DELETE_FROM):
            removals[key[len(_DELETE_FROM):]] = value
        else:
            raise PatchError("%s: unknown patch directive %r" % (path or "the object", key))
    result = copy.deepcopy(original)
    for field, values in removals.items():
        if not isinstance(values, list):
            raise PatchError("%s: $deleteFromPrimitiveList must hold a list" % _join(path, field))
        if isinstance(result.get(field), list):
            result[field] = [v for v in result[field] if v not in values]
    for key, value in patch.items():
        field = _join(path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            merged = _merge_map(result.get(key) if isinstance(result.get(key), dict) else {}, value, plural, field)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, plural, field)
        else:
            result[key] = value
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _ordered(result[key], order, list_strategy(plural, _join(path, key)), _join(path, key))
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchError("%s: $retainKeys must be a list of field names" % (path or "the object"))
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(original, patch, plural, path):
    strategy = list_strategy(plural, path)
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return strip_directives([i for i in patch if not (isinstance(i, dict) and i.get("$patch") == "replace")])
    original = copy.deepcopy(original) if isinstance(original, list) else []
    if strategy is None:
        return strip_directives(patch)
    if strategy.kind == "set":
        merged = list(original)
        for item in patch:
            if isinstance(item, dict):
                raise PatchError("%s: holds values, not objects" % path)
            if item not in merged:
                merged.append(item)
        return merged
    key = strategy.keys[0]
    merged = list(original)
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            raise PatchError("%s: every item must be an object with its merge key %r, got %r" % (path, key, item))
        at = next((i for i, o in enumerate(merged) if isinstance(o, dict) and o.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del merged[at]
            continue
        if at is None:
            merged.append(_merge_map({}, item, plural, path))
        else:
            merged[at] = _merge_map(merged[at], item, plural, path)
    return merged


def _ordered(items, order, strategy, path):
    """`items` in the order `order` names them; items it does not name keep their place after."""
    if not isinstance(order, list):
        raise PatchError("%s: $setElementOrder must hold a list" % path)
    if strategy is not None and strategy.kind == "map":
        key = strategy.keys[0]
        rank = {repr(o.get(key)): i for i, o in enumerate(order) if isinstance(o, dict)}
        ident = lambda item: repr(item.get(key)) if isinstance(item, dict) else None    # noqa: E731
    else:
        rank = {repr(v): i for i, v in enumerate(order)}
        ident = repr
    named = sorted((i for i in items if ident(i) in rank), key=lambda i: rank[ident(i)])
    return named + [i for i in items if ident(i) not in rank]


def strip_directives(value):
    """`value` without any `$...` keys, at any depth."""
    if isinstance(value, dict):
        return {k: strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [strip_directives(v) for v in value]
    return value
