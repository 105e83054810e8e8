"""RFC 6902 JSON patch (application/json-patch+json), applied with the `jsonpatch` library.

`copy` is the one operation that makes a patch bigger than its body: each copies a part
of the document, so 21 copies of a 1 KB body doubled a document to ~600 MB of memory
(a review found it). The bytes copies add are counted and bounded by MAX_COPIED_BYTES,
as big as a whole request body may be, so a patch can grow an object no more than a
PUT could."""
import json

import jsonpatch
import jsonpointer

MAX_COPIED_BYTES = 3 * 1024 * 1024     # api/app.py MAX_BODY_BYTES: what one request may carry


class JsonPatchError(ValueError):
    def __init__(self, code, message, path=""):
        super().__init__(message)
        self.code = code
        self.path = path        # the JSON pointer of the operation that failed


def apply_json_patch(document, patch):
    """`document` with the RFC 6902 `patch` (a list of operations) applied; `document` is not modified.

    Raises JsonPatchError 400 for a malformed patch, 422 for one that does not apply
    (a failed test, a path that is not there).
    """
    if not isinstance(patch, list):
        raise JsonPatchError(400, "a JSON patch must be a list of operations such as "
                             '[{"op": "replace", "path": "/spec/replicas", "value": 3}]')
    for i, op in enumerate(patch):
        if not isinstance(op, dict) or not isinstance(op.get("op"), str) or not isinstance(op.get("path"), str):
            raise JsonPatchError(400, "operation %d must be an object with op and path, got %r" % (i, op))
    # One operation at a time, so a refusal can name the operation (all or nothing still:
    # the document is copied first and only returned when every operation applied).
    document = jsonpatch.JsonPatch([]).apply(document, in_place=False)
    copied = 0
    for i, op in enumerate(patch):
        if op["op"] == "copy":
            copied += _copy_size(document, i, op, MAX_COPIED_BYTES - copied)
        document = _apply_one(document, i, op)
    return document


def _copy_size(document, i, op, budget):
    """The JSON bytes (about) a copy operation adds; JsonPatchError 413 beyond `budget`."""
    source = op.get("from")
    if not isinstance(source, str):
        return 0        # malformed: jsonpatch refuses it with its own message
    try:
        value = jsonpointer.resolve_pointer(document, source)
    except jsonpointer.JsonPointerException:
        return 0        # no such path: jsonpatch refuses it
    size = json_size_within(value, budget)
    if size is None:
        raise JsonPatchError(413, "operation %d (copy from %s to %s) would make the patched object too large: "
                             "the copies of this patch add more than %d bytes (send the value itself instead)"
                             % (i, source, op["path"], MAX_COPIED_BYTES), op["path"])
    return size


def json_size_within(value, budget):
    """About how many bytes `value` takes as JSON, or None once that passes `budget`
    (walked without recursion and stopped early: the value may be deep or huge)."""
    size, stack = 0, [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            size += 2 + sum(len(k) + 4 for k in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            size += 2 + len(item)
            stack.extend(item)
        elif isinstance(item, str):
            size += len(item) + 2
        else:
            size += 8
        if size > budget:
            return None
    return size


def _apply_one(document, i, op):
    where = "operation %d (%s %s)" % (i, op["op"], op["path"])
    try:
        return jsonpatch.JsonPatch([op]).apply(document, in_place=True)
    except jsonpatch.JsonPatchTestFailed:
        found = jsonpointer.resolve_pointer(document, op["path"], _Absent)
        raise JsonPatchError(422, "%s failed: the value there is %s, not %s" % (
            where, "absent" if found is _Absent else json.dumps(found), json.dumps(op.get("value"))), op["path"])
    except jsonpatch.InvalidJsonPatch as exc:
        raise JsonPatchError(400, "%s is malformed: %s" % (where, exc), op["path"])
    except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException) as exc:
        raise JsonPatchError(422, "%s does not apply: %s" % (where, _brief(exc)), op["path"])
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise JsonPatchError(422, "%s does not apply: %s" % (where, _brief(exc)), op["path"])
    except RecursionError:
        raise JsonPatchError(422, "%s does not apply: the document nests too deeply" % where, op["path"])


class _Absent:
    pass


def _brief(exc):
    """The library's reason without the document it quotes ("member 'x' not found in {...the
    whole spec...}", in Python's notation): the path is what the person needs."""
    text = str(exc)
    cut = text.find(" not found in ")
    if cut >= 0:
        text = text[:cut] + " not found"
    return text if len(text) <= 200 else text[:200] + "..."
