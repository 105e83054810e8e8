"""Refuse a request whose priority level is full before Flask sees it.

An overloaded replica spends what it has left on refusals: at 1,000 nodes and 10,000
pods every replica answered ~160 429s a second (docs/benchmarks.md, run R), and a 429
from the app costs a whole Flask request (its context, routing, the hooks, the error
handler: 0.3-0.5 ms of CPU on top of waitress). This WSGI middleware, wrapped around
the app's own `wsgi_app`, classifies the request as flow control does (authenticating
its bearer token first, as the app would) and, when that level has every seat busy and
a full queue, answers the same 429 the app would, without a request context.

Only a refusal is decided here. Every other request goes on to the app, whose
`admit` (app.py) still takes the seat, waits in the queue or refuses, so a level
that fills between the two checks is still bounded. Some requests always go on, to be
answered by the app as before: long-running ones (watches, followed logs: their pools
and the per-user bound are the app's), exempt paths, a token that fails (401/403), a
caller naming another cluster (421), and impersonation (the app classifies by the
impersonated user's groups, which only its authorizer knows). Authorization (RBAC)
comes after this check, as in Kubernetes' APF: a request its caller may not make can
get 429 while its level is full, and its 403 once it is not.
"""
from urllib.parse import parse_qsl

from shepherd_ha import cluster_identity

from . import auth
from .errors import ApiError, dumps, status_body
from .flow_control import Rejected, object_path
from .metrics import resource_label

_CLUSTER_HEADER = "HTTP_" + cluster_identity.HEADER.upper().replace("-", "_")
_IMPERSONATION = ("HTTP_IMPERSONATE_USER", "HTTP_IMPERSONATE_GROUP")


def install(app, flow, tokens=None, metrics=None, cluster_id=None):
    """Wrap `app.wsgi_app` (Flask's middleware hook: it runs before the request context)."""
    app.wsgi_app = EarlyRefusal(app.wsgi_app, flow, tokens, metrics, cluster_id)


class EarlyRefusal:
    def __init__(self, wsgi_app, flow, tokens=None, metrics=None, cluster_id=None):
        self.wsgi_app, self.flow, self.tokens, self.metrics = wsgi_app, flow, tokens, metrics
        self.cluster_id = cluster_id

    def __call__(self, environ, start_response):
        rejected = self._refusal(environ)
        if rejected is None:
            return self.wsgi_app(environ, start_response)
        return self._answer(environ, start_response, rejected)

    def _refusal(self, environ):
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
        if any(header in environ for header in _IMPERSONATION):
            return None
        theirs = environ.get(_CLUSTER_HEADER)
        if self.cluster_id and theirs and theirs != self.cluster_id:
            return None                     # the app's 421 says which cluster this is
        groups = None
        if self.tokens is not None:
            try:
                user = auth.check(self.tokens, environ.get("HTTP_AUTHORIZATION"), method, path)
            except ApiError:
                return None                 # the app answers 401/403 with its own words
            groups = user.groups if user is not None else None
        classification = self.flow.classify(method, path, _first_values(environ.get("QUERY_STRING", "")),
                                            groups, self.tokens is not None, environ.get("HTTP_USER_AGENT"))
        if classification.level is None or classification.long_running is not None:
            return None
        return self.flow.refuse_if_full(classification)

    def _answer(self, environ, start_response, rejected: Rejected):
        body = dumps(status_body(429, rejected.message, "TooManyRequests",
                                 {"retryAfterSeconds": rejected.retry_after})).encode()
        start_response("429 Too Many Requests", [
            ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
            ("Retry-After", str(rejected.retry_after)), ("Shepherd-Outcome", "not-applied")])
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "")
        if self.metrics is not None:        # counted, not timed: the latency histogram is the app's
            self.metrics.requests.labels(method, resource_label(object_path(path)[0] or path), "429").inc()
        return [] if method == "HEAD" else [body]       # a HEAD answer has no body, only its length


def _first_values(query):
    """The query as a mapping of each name's first value (what request.args.get gives)."""
    args = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        args.setdefault(key, value)
    return args
