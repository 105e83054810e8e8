"""Kubernetes-style Status errors: every failure the API returns is one of these."""
import json

import orjson
from flask import Response

_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed", 409: "Conflict", 410: "Gone",
    406: "NotAcceptable", 413: "RequestEntityTooLarge", 415: "UnsupportedMediaType", 422: "Invalid",
    429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
}


class ApiError(Exception):
    def __init__(self, code, message, reason=None, details=None, headers=None, metadata=None):
        super().__init__(message)
        self.metadata = metadata        # the Status' metadata (a 410's fresh continue token)
        self.code = code
        self.message = message
        self.reason = reason or _REASONS.get(code, "Unknown")
        self.details = details
        self.headers = headers or {}


def status_body(code, message, reason=None, details=None, metadata=None):
    body = {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code,
            "reason": reason or _REASONS.get(code, "Unknown"), "message": message, "metadata": metadata or {}}
    if details:
        body["details"] = details
    return body


def dumps(obj):
    """Compact JSON: every body the API writes (here for errors, which bodies.py imports).
    orjson writes a list of 500 pods in a sixth of json.dumps' CPU time (docs/benchmarks.md,
    run Q), UTF-8 text as it is. What it refuses (an integer beyond 64 bits) json writes,
    UTF-8 as well, so chunks of one list agree. (orjson would write NaN as null: request
    bodies cannot hold NaN, bodies.py.)"""
    try:
        return orjson.dumps(obj).decode()
    except orjson.JSONEncodeError:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def error_response(err):
    # Not flask.jsonify: it sorts keys and asks the app's provider, about a tenth of a worker
    # that answered mostly 429s at 1,000 nodes (docs/benchmarks.md, "Run K").
    body = status_body(err.code, err.message, err.reason, err.details, getattr(err, "metadata", None))
    return Response(dumps(body), status=err.code, headers=err.headers, mimetype="application/json")


def unavailable(exc):
    """ApiError for a Raft Unavailable: 503, Retry-After, and whether it may still apply."""
    return ApiError(503, str(exc), headers={"Retry-After": "1",
                                            "Shepherd-Outcome": getattr(exc, "outcome", "unknown")})
