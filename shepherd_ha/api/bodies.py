"""Reading requests: JSON bodies, query flags and the idempotency key."""
import json

from flask import request

from .errors import ApiError

MAX_IDEMPOTENCY_KEY = 128
MAX_DEPTH = 100
MERGE_PATCH_TYPES = ("application/merge-patch+json", "application/json")


def json_body(required=True):
    """The request body as parsed JSON; 400 with the parser's position when malformed."""
    raw = request.get_data(cache=True)   # raises 413 past MAX_CONTENT_LENGTH
    if not raw.strip():
        if required:
            raise ApiError(400, "request body is empty: send a JSON object")
        return None
    try:
        body = json.loads(raw)
    except RecursionError:
        raise ApiError(400, "request body nests deeper than %d levels: flatten it" % MAX_DEPTH)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "request body is not valid JSON: %s" % exc)
    problem = _unsupported_value(body)
    if problem:
        raise ApiError(400, "request body %s" % problem)
    return body


def _unsupported_value(value, depth=0):
    """Objects go through validation, Raft (pickle) and back out as JSON: refuse what
    would break on the way (too deep to handle, NaN/Infinity that JSON cannot carry)."""
    stack = [(value, 0)]
    while stack:
        item, level = stack.pop()
        if level > MAX_DEPTH:
            return "nests deeper than %d levels: flatten it" % MAX_DEPTH
        if isinstance(item, float) and (item != item or item in (float("inf"), float("-inf"))):
            return "holds a number JSON cannot represent (NaN or Infinity, or too large for a double)"
        if isinstance(item, dict):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return None


def json_object_body():
    body = json_body()
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object, not %s" % type(body).__name__)
    return body


def idempotency_key():
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return None
    if not key or len(key) > MAX_IDEMPOTENCY_KEY:
        raise ApiError(400, "Idempotency-Key must be 1 to %d characters" % MAX_IDEMPOTENCY_KEY)
    return key


def is_number(text):
    """ASCII digits only: str.isdigit() also accepts '²', which int() refuses."""
    return bool(text) and text.isascii() and text.isdigit()


TRUE_VALUES = ("1", "true", "yes")      # authz/attributes.py reads ?watch= with these too


def flag(name):
    value = request.args.get(name)
    return value is not None and value.lower() in TRUE_VALUES


def require_merge_patch():
    ctype = (request.mimetype or "").lower()
    if ctype not in MERGE_PATCH_TYPES:
        raise ApiError(415, "PATCH content type %r is not supported: send a JSON merge patch with "
                       "Content-Type: application/merge-patch+json" % (request.mimetype or ""))


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"))


LIST_CHUNK_ITEMS = 100


def dumps_list(head, items):
    """The JSON of `head` (a non-empty object without "items") plus "items": `items`,
    as bytes chunks of LIST_CHUNK_ITEMS items. One json.dumps of 10,000 pods holds the
    GIL for 300 ms or more in a single C call, longer than a Raft election timeout; in
    chunks the other threads (the Raft tick first) get their turns in between."""
    chunks = [(dumps(head)[:-1] + ',"items":[').encode()]
    for start in range(0, len(items), LIST_CHUNK_ITEMS):
        text = dumps(items[start:start + LIST_CHUNK_ITEMS])[1:-1]
        chunks.append((text if start == 0 else "," + text).encode())
    chunks.append(b"]}")
    return chunks
