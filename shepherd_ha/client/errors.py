"""Exceptions raised by the Shepherd HA client library."""


class ClientError(Exception):
    """Base class of every error this package raises on purpose."""


class ApiError(ClientError):
    """The server answered with an error `Status` (any non-2xx response).

    `.code` is the HTTP status code, `.reason` the Status reason (`NotFound`,
    `Conflict`, ...), `.message` the server's human readable message, `.status`
    the whole Status dict, `.details` its `details` dict (maybe empty) and
    `.outcome` the `Shepherd-Outcome` header of a 503 (`unknown`,
    `not-applied` or None).  str() is the server's message.
    """

    def __init__(self, status, headers=None):
        if not isinstance(status, dict):
            status = {}
        self.status = status
        self.code = int(status.get("code") or 0)
        self.reason = status.get("reason") or "Unknown"
        self.message = status.get("message") or self.reason
        self.details = status.get("details") or {}
        headers = headers or {}
        self.outcome = headers.get("Shepherd-Outcome")
        self.retry_after = headers.get("Retry-After")
        super().__init__(self.message)

    def __str__(self):
        return self.message

    def __repr__(self):
        return "%s(code=%r, reason=%r, message=%r)" % (
            type(self).__name__, self.code, self.reason, self.message)

    @property
    def causes(self):
        """`details.causes` of a 422 Invalid: a list of {field, message}."""
        return list(self.details.get("causes") or [])


class WatchExpired(ApiError):
    """410 Gone: the watch's resourceVersion is older than the replica's watch
    log.  List again and watch from the list's resourceVersion."""


class NoReplicaReachable(ClientError):
    """No replica answered before the retry deadline passed."""

    def __init__(self, servers, cause="connection failed"):
        self.servers = list(servers)
        self.cause = cause
        super().__init__(
            "no replica reachable at %s: %s (is the cluster up? try "
            "`shepherd-ha local status --dir DIR`)" % (", ".join(self.servers), cause))


class OutcomeUnknown(ClientError):
    """A write sent with `idempotent_write=False` may or may not have been
    applied (the replica failed after receiving it); it was not retried."""


def status_from_response(resp):
    """Build a Status dict from a requests.Response that is not 2xx, also when
    the body is not a Status (e.g. a proxy's HTML page)."""
    status = None
    try:
        body = resp.json()
        if isinstance(body, dict) and body.get("kind") == "Status":
            status = body
    except ValueError:
        pass
    if status is None:
        text = (resp.text or "").strip()
        reason = _REASONS.get(resp.status_code) or (resp.reason or "Unknown").replace(" ", "")
        status = {"apiVersion": "v1", "kind": "Status", "status": "Failure",
                  "code": resp.status_code, "reason": reason,
                  "message": text[:500] or "HTTP %d %s" % (resp.status_code, resp.reason or "")}
    status.setdefault("code", resp.status_code)
    return status


def error_from_response(resp):
    status = status_from_response(resp)
    cls = WatchExpired if int(status.get("code") or resp.status_code) == 410 else ApiError
    return cls(status, resp.headers)


_REASONS = {
    400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
    405: "MethodNotAllowed", 409: "Conflict", 410: "Gone", 413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType", 422: "Invalid", 429: "TooManyRequests",
    500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout",
}
