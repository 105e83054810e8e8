"""Reading requests: JSON bodies, query flags and the idempotency key."""
import json

from flask import request

from .errors import ApiError

MAX_IDEMPOTENCY_KEY = 128
MERGE_PATCH_TYPES = ("application/merge-patch+json", "application/json")


def json_body(required=True):
    """The request body as parsed JSON; 400 with the parser's position when malformed."""
    raw = request.get_data(cache=True)   # raises 413 past MAX_CONTENT_LENGTH
    if not raw.strip():
        if required:
            raise ApiError(400, "request body is empty: send a JSON object")
        return None
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "request body is not valid JSON: %s" % exc)


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


def flag(name):
    value = request.args.get(name)
    return value is not None and value.lower() in ("1", "true", "yes")


def require_merge_patch():
    ctype = (request.mimetype or "").lower()
    if ctype not in MERGE_PATCH_TYPES:
        raise ApiError(415, "PATCH content type %r is not supported: send a JSON merge patch with "
                       "Content-Type: application/merge-patch+json" % (request.mimetype or ""))


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"))
