"""RFC 6902 JSON patch (application/json-patch+json), applied with the `jsonpatch` library."""
import json

import jsonpatch
import jsonpointer


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
    for i, op in enumerate(patch):
        document = _apply_one(document, i, op)
    return document


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
        raise JsonPatchError(422, "%s does not apply: %s" % (where, exc), op["path"])
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise JsonPatchError(422, "%s does not apply: %s" % (where, exc), op["path"])


class _Absent:
    pass
