"""Server-side apply and metadata.managedFields (pure: the caller passes the time).

Field ownership is kept per manager and operation, as Kubernetes does, in the
FieldsV1 encoding: {"f:spec": {"f:containers": {'k:{"name":"web"}': {".": {}, "f:image": {}}}}}
("f:" a field, "k:" a list item by its keys, "v:" a set member, "." the item itself).
Internally a field set is a set of paths, tuples of those segments.

- apply(): merges an applied configuration into the live object; a field that
  another manager owns and that the applied configuration would change is a
  conflict (unless forced, which takes it over); a field this manager applied before
  and no longer applies is removed when nobody else owns it.
- record_update(): a create, update or patch by other means: its manager takes the
  fields it changed (from whoever owned them), without conflicts.
"""
import json

from .patch_strategies import list_strategy
from .strategic_merge import PatchError, strategic_merge  # noqa: F401 (PatchError: callers catch it here)

FIELDS_TYPE = "FieldsV1"
MAX_ENTRIES = 10                 # managers remembered per object; the oldest Update entries go first
_UNOWNED_META = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                 "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName"}
_KEY_DEFAULTS = {"protocol": "TCP"}      # listMapKeys the server defaults: part of the key either way
_MISSING = object()


def conflict_with(manager, subresource, api_version):
    """Kubernetes' words for a conflicting manager: conflict with "kubectl" with subresource "scale" using apps/v1"""
    sub = ' with subresource "%s"' % subresource if subresource else ""
    return 'conflict with "%s"%s using %s' % (manager, sub, api_version)


class ApplyConflict(Exception):
    def __init__(self, conflicts):
        """conflicts: [(conflict_with(...), dotted field)]"""
        self.conflicts = conflicts
        super().__init__("Apply failed with %d conflict%s: %s" % (
            len(conflicts), "" if len(conflicts) == 1 else "s", "; ".join("%s: %s" % c for c in conflicts)))


# ---- field sets ----

def field_set(plural, obj, status=False):
    """The set of field paths `obj` sets: spec and the rest, or only status when `status`."""
    return set(field_values(plural, obj, status))


def field_values(plural, obj, status=False):
    """{path: value} for the fields `obj` sets (a list item's "." path maps to True)."""
    out = {}
    if not isinstance(obj, dict):
        return out
    for key, value in obj.items():
        if key in ("apiVersion", "kind") or (key == "status") != status:
            continue
        if key == "metadata" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if k not in _UNOWNED_META}
            if not value:
                continue
        _walk(plural, value, key, ("f:" + key,), out)
    return out


def _item_key(item, strategy):
    keys = {k: item.get(k, _KEY_DEFAULTS.get(k)) for k in strategy.keys}
    keys = {k: v for k, v in keys.items() if v is not None}
    return "k:" + json.dumps(keys, sort_keys=True, separators=(",", ":"))


def _walk(plural, value, dotted, path, out):
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _walk(plural, item, dotted + "." + key, path + ("f:" + key,), out)
        return
    strategy = list_strategy(plural, dotted) if isinstance(value, list) and value else None
    if strategy is None:
        out[path] = value           # a scalar, an empty map or list, or an atomic list
    elif strategy.kind == "set":
        for v in value:
            out[path + ("v:" + json.dumps(v, sort_keys=True, separators=(",", ":")),)] = v
    elif all(isinstance(i, dict) and strategy.keys[0] in i for i in value):
        for item in value:
            at = path + (_item_key(item, strategy),)
            out[at + (".",)] = True
            for key, sub in item.items():
                _walk(plural, sub, dotted + "." + key, at + ("f:" + key,), out)
    else:
        out[path] = value


def encode(paths):
    """A field set as FieldsV1 JSON (nested objects, leaves {})."""
    root = {}
    for path in sorted(paths):
        node = root
        for segment in path:
            node = node.setdefault(segment, {})
    return root


def decode(fields):
    paths = set()

    def walk(node, prefix):
        for segment, child in node.items():
            if segment == ".":
                paths.add(prefix + (".",))
            elif isinstance(child, dict) and child:
                walk(child, prefix + (segment,))
            else:
                paths.add(prefix + (segment,))
    if isinstance(fields, dict):
        walk(fields, ())
    return paths


def dotted(path):
    """A path as Kubernetes names it in a conflict: .spec.containers[name="web"].image"""
    text = ""
    for segment in path:
        kind, _, rest = segment.partition(":")
        if segment == ".":
            continue
        if kind == "f":
            text += "." + rest
        elif kind == "k":
            text += "[" + ",".join("%s=%s" % (k, json.dumps(v)) for k, v in json.loads(rest).items()) + "]"
        elif kind == "v":
            text += "[=%s]" % rest
    return text


# ---- values at paths ----

def value_at(obj, path):
    """The value `path` names in `obj`, or _MISSING."""
    node = obj
    for segment in path:
        if segment == ".":
            return node
        kind, _, rest = segment.partition(":")
        if kind == "f":
            if not isinstance(node, dict) or rest not in node:
                return _MISSING
            node = node[rest]
        elif kind == "k":
            node = _find_item(node, json.loads(rest))
            if node is _MISSING:
                return _MISSING
        elif kind == "v":
            wanted = json.loads(rest)
            return wanted if isinstance(node, list) and wanted in node else _MISSING
    return node


def _find_item(items, keys):
    if not isinstance(items, list):
        return _MISSING
    for item in items:
        if isinstance(item, dict) and all(item.get(k, _KEY_DEFAULTS.get(k)) == v for k, v in keys.items()):
            return item
    return _MISSING


def remove_path(obj, path):
    """Delete what `path` names from `obj` in place (a field, a list item, a set member)."""
    if path[-1] == ".":
        path = path[:-1]
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind == "k" and isinstance(parent, list):
        item = _find_item(parent, json.loads(rest))
        if item is not _MISSING:
            parent.remove(item)
    elif kind == "v" and isinstance(parent, list):
        value = json.loads(rest)
        while value in parent:
            parent.remove(value)


# ---- managedFields ----

def _entries(obj):
    entries = (obj.get("metadata") or {}).get("managedFields") if isinstance(obj, dict) else None
    return [dict(e) for e in entries or [] if isinstance(e, dict) and isinstance(e.get("manager"), str)]


def _same(entry, manager, operation, subresource):
    return (entry.get("manager"), entry.get("operation"), entry.get("subresource")) == (manager, operation, subresource)


def _store(obj, entries):
    entries = [e for e in entries if e.get("fieldsV1")]
    while len(entries) > MAX_ENTRIES:
        oldest = min((e for e in entries if e.get("operation") == "Update"), key=lambda e: e.get("time") or "",
                     default=entries[0])
        entries.remove(oldest)
    obj.setdefault("metadata", {})["managedFields"] = entries


def _entry(manager, operation, api_version, now, paths, subresource=None):
    entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "time": now,
             "fieldsType": FIELDS_TYPE, "fieldsV1": encode(paths)}
    if subresource:
        entry["subresource"] = subresource
    return entry


def _content(obj, subresource=None):
    """What a write to the object (or its status) can change, managedFields aside."""
    if subresource == "status":
        return obj.get("status")
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp")}
    return {k: v for k, v in dict(obj, metadata=meta).items() if k != "status"}


def _keep_if_unchanged(old, new, subresource=None):
    """A write that changes nothing keeps the old managedFields (times included), so the
    store still sees a no-op as unchanged and makes no new revision."""
    if old is not None and _content(old, subresource) == _content(new, subresource):
        meta = new.setdefault("metadata", {})
        if "managedFields" in (old.get("metadata") or {}):
            meta["managedFields"] = old["metadata"]["managedFields"]
        else:
            meta.pop("managedFields", None)
        return True
    return False


def _sent_entries(new):
    """The managedFields a write itself carries when they are well-formed FieldsV1 entries
    (kubectl rewrites them with a JSON patch when it moves client-side apply ownership to
    server-side apply); None when absent or malformed (then the stored ones count)."""
    entries = (new.get("metadata") or {}).get("managedFields") if isinstance(new, dict) else None
    if not isinstance(entries, list):
        return None
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("manager"), str) and e.get("operation") in ("Apply", "Update")
                and e.get("fieldsType", FIELDS_TYPE) == FIELDS_TYPE and isinstance(e.get("fieldsV1"), dict)):
            return None
    return [dict(e) for e in entries]


def record_update(plural, old, new, manager, api_version, now, subresource=None):
    """`new` (modified in place and returned) with managedFields after a non-apply write
    that turned `old` (None for a create) into `new`. managedFields the write sets itself
    (changed from the stored ones, or [] to reset them) replace the stored ones."""
    sent = _sent_entries(new) if old is not None else None
    stored = _entries(old) if old else []
    if sent is not None and sent == stored:
        sent = None
    if _keep_if_unchanged(old, new, subresource) and sent is None:
        return new
    if old is not None and _content(old, subresource) == _content(new, subresource):
        _store(new, sent)        # only managedFields changed: take them as sent
        return new
    status = subresource == "status"
    entries = sent if sent is not None else stored
    old_values = field_values(plural, old, status) if old else {}
    new_values = field_values(plural, new, status)
    new_fields = set(new_values)
    changed = {p for p, v in new_values.items() if p not in old_values or old_values[p] != v}
    gone = set(old_values) - new_fields
    mine = set()
    for entry in entries:
        paths = decode(entry.get("fieldsV1")) if entry.get("fieldsType", FIELDS_TYPE) == FIELDS_TYPE else set()
        if (entry.get("subresource") == "status") == status:
            paths -= gone
            if _same(entry, manager, "Update", subresource):
                mine = paths
                continue
            paths -= changed
        entry["fieldsV1"] = encode(paths)
    entries = [e for e in entries if not _same(e, manager, "Update", subresource)]
    if mine | changed:
        entries.append(_entry(manager, "Update", api_version, now, (mine | changed) & new_fields, subresource))
    _store(new, entries)
    return new


def apply(plural, current, applied, manager, api_version, now, force=False):
    """The object after `manager` applies the configuration `applied` to `current`
    (None: absent, the apply creates it). Raises ApplyConflict, or PatchError for a
    configuration whose lists cannot be merged."""
    entries = _entries(current) if current else []
    live = {k: v for k, v in (current or {}).items()}
    applied_values = field_values(plural, applied)
    applied_fields = set(applied_values)
    live_values = field_values(plural, live)
    conflicts, taken = [], {}
    previous = set()
    for i, entry in enumerate(entries):
        paths = decode(entry.get("fieldsV1"))
        if _same(entry, manager, "Apply", None):
            previous = paths
            continue
        if entry.get("subresource") == "status":
            continue
        # The same manager's Update entries count as another manager (as in Kubernetes:
        # `kubectl scale` then `kubectl apply --server-side` conflict on .spec.replicas).
        clash = sorted(p for p in paths & applied_fields
                       if p[-1] != "." and live_values.get(p, _MISSING) != applied_values[p])
        if clash:
            taken[i] = clash
            who = conflict_with(entry["manager"], entry.get("subresource"), entry.get("apiVersion", api_version))
            conflicts.extend((who, dotted(p)) for p in clash)
    if conflicts and not force:
        raise ApplyConflict(conflicts)
    result = strategic_merge(plural, live, _without_meta(applied))
    others = set()
    for i, entry in enumerate(entries):
        if _same(entry, manager, "Apply", None):
            continue
        paths = decode(entry.get("fieldsV1")) - set(taken.get(i, ()))
        entry["fieldsV1"] = encode(paths)
        others |= paths
    # Fields this manager stops applying go when nobody else owns them or anything under
    # them; whole list items first (their leaves go with them), then emptied parents.
    kept = others | applied_fields
    for path in sorted(previous - kept, key=lambda p: (p[-1] != ".", len(p))):
        base = path[:-1] if path[-1] == "." else path
        if any(o[:len(base)] == base for o in kept):
            continue
        remove_path(result, path)
        for end in range(len(base) - 1, 1, -1):
            parent = base[:end]
            value = value_at(result, parent)
            if value in ({}, []) and parent[-1].startswith("f:") and not any(o[:end] == parent for o in kept):
                remove_path(result, parent)
    entries = [e for e in entries if not _same(e, manager, "Apply", None)]
    entries.append(_entry(manager, "Apply", api_version, now, applied_fields))
    _store(result, entries)
    if current is not None and ssa_unchanged(current, result, manager):
        _keep_if_unchanged(current, result)
    return result


def ssa_unchanged(current, result, manager):
    """True when an apply changed neither the object nor what `manager` applies."""
    before = {(e.get("manager"), e.get("operation")): e.get("fieldsV1") for e in _entries(current)}
    after = {(e.get("manager"), e.get("operation")): e.get("fieldsV1") for e in _entries(result)}
    return before == after and _content(current) == _content(result)


def _without_meta(applied):
    """The applied configuration as a patch: identity and server fields stay the live ones."""
    patch = {k: v for k, v in applied.items() if k != "status"}
    meta = {k: v for k, v in (applied.get("metadata") or {}).items() if k not in _UNOWNED_META}
    patch["metadata"] = meta
    return patch
