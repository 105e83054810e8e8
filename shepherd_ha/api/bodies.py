"""Reading requests: JSON bodies, query flags and the idempotency key."""
import json

from flask import g, request

from . import protobuf_bodies
from .errors import ApiError, dumps
from .params import shown

MAX_DEPTH = 100


def raw_body():
    """The request body's bytes (413 past MAX_CONTENT_LENGTH); 415 for a compressed one,
    which would otherwise fail to parse with a message about bytes, not about gzip."""
    encoding = (request.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding != "identity":
        raise ApiError(415, "request bodies with Content-Encoding %s are not supported: send the body "
                       "uncompressed" % shown(encoding))
    return request.get_data(cache=True)


def json_body(required=True):
    """The request body as parsed JSON; 400 with the parser's position when malformed."""
    raw = raw_body()
    if not raw.strip():
        if required:
            raise ApiError(400, "request body is empty: send a JSON object")
        return None
    duplicates = []
    if protobuf_bodies.is_protobuf(request.content_type):
        # kubectl's typed clients; embedded JSON (raw fields) gets the same checks below
        body = protobuf_bodies.decode(raw)
    else:
        try:
            body = json.loads(raw, object_pairs_hook=lambda pairs: _object(pairs, duplicates))
        except RecursionError:
            raise ApiError(400, "request body nests deeper than %d levels: flatten it" % MAX_DEPTH)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ApiError(400, "request body is not valid JSON: %s" % exc)
    refuse_unsupported(_unsupported_value(body))
    g.duplicate_fields = duplicates      # for fieldValidation (api/write_options.py)
    return body


def refuse_unsupported(problem):
    """_unsupported_value's answer as an ApiError: 400 for the body as a whole, 422 naming
    the field; nothing for None."""
    if not problem:
        return
    field, message = problem
    if field is None:
        raise ApiError(400, "request body %s" % message)
    raise ApiError(422, "request body is invalid: %s: %s" % (field, message), "Invalid",
                   details={"causes": [{"field": field, "message": message}]})


def _object(pairs, duplicates):
    """A JSON object; keys it has twice are noted (the last one wins, as in Go's decoder)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen = set()
        duplicates.extend(k for k, _ in pairs if k in seen or seen.add(k))
    return obj


_SURROGATE = ("holds a lone UTF-16 surrogate (such as \\ud800), which is not text: UTF-8 cannot encode it; "
              "send valid Unicode")


def _unsupported_value(value):
    """Objects go through validation, Raft (pickle) and back out as JSON: refuse what
    would break on the way. (None, message) for the body as a whole (too deep to
    handle, NaN/Infinity that JSON cannot carry), (field, message) for a string
    holding a lone surrogate (json.loads accepts "\\ud800"; anything that encodes the
    object later, a controller hashing a pod template, raises on it)."""
    stack = [(value, 0, None)]       # (item, depth, path as (parent path, key) or None)
    while stack:
        item, level, path = stack.pop()
        if level > MAX_DEPTH:
            return None, "nests deeper than %d levels: flatten it" % MAX_DEPTH
        if isinstance(item, str):
            if not _encodable(item):
                return field_path(path), _SURROGATE
        elif isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            return None, "holds a number JSON cannot represent (NaN or Infinity, or too large for a double)"
        elif isinstance(item, dict):
            for key, child in item.items():
                if not _encodable(key):
                    return field_path((path, key)), "has a key that " + _SURROGATE
                stack.append((child, level + 1, (path, key)))
        elif isinstance(item, list):
            stack.extend((child, level + 1, (path, index)) for index, child in enumerate(item))
    return None


def _encodable(text):
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def field_path(path):
    """metadata.annotations.a, spec.containers[0].name: from (parent, key) links."""
    parts = []
    while path is not None:
        path, key = path
        parts.append("[%d]" % key if isinstance(key, int) else
                     "." + key.encode("utf-8", "backslashreplace").decode("ascii", "backslashreplace"))
    return "".join(reversed(parts)).lstrip(".") or "(the body)"


def json_object_body():
    body = json_body()
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object, not %s" % type(body).__name__)
    return body


def is_number(text):
    """ASCII digits only: str.isdigit() also accepts '²', which int() refuses."""
    return bool(text) and text.isascii() and text.isdigit()


TRUE_VALUES = ("1", "true", "yes")      # authz/attributes.py reads ?watch= with these too


def flag(name):
    value = request.args.get(name)
    return value is not None and value.lower() in TRUE_VALUES


LIST_CHUNK_ITEMS = 100


def dumps_list(head, items, key="items"):
    """The JSON of `head` (a non-empty object without `key`) plus `key`: `items`,
    as bytes chunks of LIST_CHUNK_ITEMS items. One json.dumps of 10,000 pods holds the
    GIL for 300 ms or more in a single C call, longer than a Raft election timeout; in
    chunks the other threads (the Raft tick first) get their turns in between."""
    chunks = [(dumps(head)[:-1] + ',"%s":[' % key).encode()]
    for start in range(0, len(items), LIST_CHUNK_ITEMS):
        text = dumps(items[start:start + LIST_CHUNK_ITEMS])[1:-1]
        chunks.append((text if start == 0 else "," + text).encode())
    chunks.append(b"]}")
    return chunks
