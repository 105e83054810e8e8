"""Flask app factory: routes, Status errors for everything, request metrics."""
import logging
import time

from flask import Flask, request
from werkzeug.exceptions import HTTPException

from shepherd_ha.model.node_lease import LEASE_NAMESPACE, lease_age
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.streaming import expose_write

from . import auth, cluster_check, discovery, early_refusal, health, membership, openapi, resource_metrics, snapshot_endpoint
from . import pod_metrics
from .authz import access_review, authorizer as authz, builtin_view
from .errors import ApiError, error_response
from .flow_control import Rejected
from .metrics import ApiMetrics, resource_label
from .objects import ObjectApi, Target
from .secrets_at_rest import SecretsAtRest

MAX_BODY_BYTES = 3 * 1024 * 1024
_VERBS = ["GET", "POST", "PUT", "PATCH", "DELETE"]

log = logging.getLogger("shepherd_ha.api")


def create_app(replica, tokens=None, peer_token=None, flow=None, secrets_cipher=None, log_grants=None,
               outbound=None):
    """tokens: an auth.TokenTable to require bearer tokens (None: no authentication);
    peer_token: what this replica shows the other replicas (their status);
    flow: a flow_control.FlowControl bounding requests in flight (None: no bound);
    log_grants: a replica_credentials.ReplicaCredentials whose signed grants this replica
    shows agents for pod logs (None: it shows them nothing);
    outbound: how peers and agents are reached (tls/outbound.py; None: plain HTTP)."""
    app = Flask("shepherd_ha")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    # Secrets sealed before they are submitted, opened when served (--encryption-key-file);
    # + the built-in RBAC roles (served, never stored)
    objects = ObjectApi(SecretsAtRest(builtin_view.WithBuiltins(replica), secrets_cipher), log_grants, outbound)
    metrics = ApiMetrics(replica, flow)
    app.extensions["shepherd_metrics"] = metrics

    def collection(group_version, plural, namespace=None):
        return objects.collection(Target(group_version, namespace, plural))

    def item(group_version, plural, name, namespace=None, sub=None):
        return objects.item(Target(group_version, namespace, plural, name, sub))

    group_versions = sorted({r.api_version for r in RESOURCES.values()})
    for gv in group_versions:
        prefix = "/api/v1" if gv == "v1" else "/apis/" + gv
        def bind(fn, gv=gv):
            return lambda **kw: fn(gv, **kw)
        for rule, fn in (
            ("/namespaces/<namespace>/<plural>", collection),
            ("/namespaces/<namespace>/<plural>/<name>", item),
            ("/namespaces/<namespace>/<plural>/<name>/<sub>", item),
            ("/<plural>", collection),
            ("/<plural>/<name>", item),
            ("/<plural>/<name>/<sub>", item),
        ):
            app.add_url_rule(prefix + rule, endpoint=(prefix + rule), view_func=bind(fn), methods=_VERBS)
    # A namespace's own subresource: more specific than a collection in namespace <name>.
    app.add_url_rule("/api/v1/namespaces/<name>/finalize", endpoint="namespace-finalize", methods=_VERBS,
                     view_func=lambda name: item("v1", "namespaces", name, sub="finalize"))

    @app.before_request
    def start_timer():
        request.environ["shepherd.start"] = time.perf_counter()   # so latency includes a queued wait

    cluster_check.install(app, getattr(replica, "cluster_id", None))
    authorizer = None
    if tokens is not None:
        auth.install(app, tokens)
        authorizer = authz.install(app, replica)       # RBAC + NodeRestriction (api/authz/)
    access_review.register(app, authorizer)
    if flow is not None:
        _install_flow_control(app, flow, authenticated=tokens is not None)
        flow.lease_age = _lease_ages(replica)
    health.register(app, replica, metrics, peer_token, log_grants.log_grant_keys if log_grants else None, outbound)
    membership.register(app, replica, outbound)
    snapshot_endpoint.register(app, replica)
    discovery.register(app)     # /api, /apis: derived from the registry
    openapi.register(app)       # /openapi/v3, /openapi/v2: generated from model/known_fields.py
    resource_metrics.register(app, replica)     # metrics.k8s.io: `kubectl top nodes`
    pod_metrics.register(app, replica, log_grants, outbound)    # `kubectl top pods`: asks the agents
    # Streams (pod logs) send their headers before their first chunk.
    app.wsgi_app = expose_write(app.wsgi_app)
    if flow is not None:
        # Outermost: a request its full level would refuse gets the 429 without Flask.
        early_refusal.install(app, flow, tokens, metrics, getattr(replica, "cluster_id", None))

    @app.errorhandler(ApiError)
    def on_api_error(err):
        return error_response(err)

    @app.errorhandler(HTTPException)
    def on_http_error(err):
        message = {404: "no such path %s: see docs/api.md for the API's paths" % request.path,
                   405: "%s is not allowed on %s" % (request.method, request.path),
                   413: "request body is larger than %d bytes" % MAX_BODY_BYTES}.get(err.code, err.description)
        return error_response(ApiError(err.code or 500, message))

    @app.errorhandler(Exception)
    def on_bug(err):
        log.exception("internal error on %s %s", request.method, request.path)
        return error_response(ApiError(500, "internal error (%s): this is a bug in Shepherd HA, please report "
                                       "it with the replica's log" % type(err).__name__))

    @app.after_request
    def record(response):
        resource = resource_label((request.view_args or {}).get("plural") or request.path)
        verb = request.method
        if request.args.get("watch"):
            verb = "WATCH"
        metrics.requests.labels(verb, resource, str(response.status_code)).inc()
        if verb != "WATCH":
            start = request.environ.get("shepherd.start")
            if start is not None:
                metrics.latency.labels(verb, resource).observe(time.perf_counter() - start)
        return response

    return app


_TICKET, _LONG_RUNNING, _HANDED = "shepherd.ticket", "shepherd.long_running", "shepherd.ticket_handed"


def _lease_ages(replica):
    """Flow control's view of how late a node's heartbeat is: the age of its Lease in
    this replica's copy of the store (no barrier: asked only while the system level is
    busy, and a copy a moment behind only makes a renewal look later)."""
    def age(node):
        lease, _ = replica.get("leases", LEASE_NAMESPACE, node, consistent=False)
        return lease_age(lease, time.time())
    return age


def _install_flow_control(app, flow, authenticated):
    """A seat before the handler (after authentication: classes need the caller's
    groups). A request gives it back once its response is closed, i.e. its body is
    in the server's hands: a slow reader of a 30,000-pod list holds a bulk seat, not a
    thread flow control does not count. A long-running request gives its seat back
    when its handler returns (the stream has started) and its slot when the stream
    is closed (it ended, or its reader left)."""

    @app.before_request
    def admit():
        env = request.environ
        classification = flow.classify(request.method, request.path, request.args,
                                       env.get("shepherd.groups"), authenticated,
                                       request.headers.get("User-Agent"))
        try:
            env[_TICKET] = flow.admit(classification, env.get("shepherd.user") or env.get("REMOTE_ADDR"))
        except Rejected as rejected:
            raise ApiError(429, rejected.message, "TooManyRequests",
                           details={"retryAfterSeconds": rejected.retry_after},
                           headers={"Retry-After": str(rejected.retry_after), "Shepherd-Outcome": "not-applied"})
        env[_LONG_RUNNING] = classification.long_running is not None

    @app.after_request
    def hand_ticket_to_response(response):
        env = request.environ
        ticket = env.get(_TICKET)
        if ticket is not None:
            response.call_on_close(ticket.release_slot if env[_LONG_RUNNING] else ticket.release)
            env[_HANDED] = True
        return response

    @app.teardown_request
    def release(error):
        env = request.environ
        ticket = env.get(_TICKET)
        if ticket is None:
            return
        if env[_LONG_RUNNING]:
            ticket.release_seat()
        if error is not None or not env.get(_HANDED):
            ticket.release()          # no response of ours will be closed
