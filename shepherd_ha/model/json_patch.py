"""RFC 6902 JSON patch (application/json-patch+json), applied with the `jsonpatch` library."""
import jsonpatch
import jsonpointer


class JsonPatchError(ValueError):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


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
    try:
        return jsonpatch.JsonPatch(patch).apply(document, in_place=False)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise JsonPatchError(422, "the JSON patch's test failed: %s" % exc)
    except jsonpatch.InvalidJsonPatch as exc:
        raise JsonPatchError(400, "the JSON patch is malformed: %s" % exc)
    except (jsonpatch.JsonPatchConflict, jsonpointer.JsonPointerException) as exc:
        raise JsonPatchError(422, "the JSON patch does not apply: %s" % exc)
    except (TypeError, ValueError, KeyError, IndexError) as exc:
        raise JsonPatchError(422, "the JSON patch does not apply: %s" % exc)
