"""The agent's HTTP server: container logs for `sheepctl logs` (through the API).

    GET /containerLogs/<namespace>/<pod>/<container>?follow=true&tailLines=N
        [&previous=true][&timestamps=true][&sinceTime=RFC3339][&podUID=UID]
    GET /stats/pods[?namespace=NS[&pod=NAME]]   per-container usage (agent/pod_usage.py)
    GET /healthz

The container is found by its shepherd.io labels: the newest one of that pod and
container carrying this node's `shepherd.io/node` label (the one before it with
previous=true); with podUID only that pod's containers count.  Errors are Status
objects (404 when the pod or container is unknown on this node).  The body is the
container's output as the runtime gives it (stdout and stderr merged).

When the API wants tokens (the agent has one), this server wants a log grant signed
by the replicas for exactly the container asked for (`log_access.LogAccess` verifies
it: 401 without one, 403 when it does not verify or names another container), and
/stats/pods a metrics grant for exactly that node, namespace and pod scope.

Each open stream holds one server thread; a follower that goes away is noticed
within about a second (waitress' client_disconnected, with channel_request_lookahead)
and its thread freed, even when the container prints nothing.
"""
import inspect
import json
import logging
import os
import threading
from datetime import datetime

import flask
import waitress

from shepherd_ha.model.names import is_dns1123_subdomain
from shepherd_ha.model.times import parse_datetime

from shepherd_ha.streaming import (StreamBroken, WRITE_KEY, abort_response, expose_write, pump,
                                   stop_waitress_server)

log = logging.getLogger(__name__)

NODE_LABEL = "shepherd.io/node"
POD_UID_LABEL = "shepherd.io/pod-uid"
NAMESPACE_LABEL = "shepherd.io/pod-namespace"
POD_LABEL = "shepherd.io/pod-name"
CONTAINER_LABEL = "shepherd.io/container-name"
RESTART_LABEL = "shepherd.io/restart-count"

TIMESTAMPS_HEADER = "Shepherd-Log-Timestamps"
CONTAINER_HEADER = "Shepherd-Container-ID"


def status_body(code, message, reason=None):
    reasons = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
               405: "MethodNotAllowed", 500: "InternalError", 503: "ServiceUnavailable"}
    return {"apiVersion": "v1", "kind": "Status", "status": "Failure", "code": code,
            "reason": reason or reasons.get(code, "Unknown"), "message": message, "metadata": {}}


def error(code, message, headers=None):
    return flask.Response(json.dumps(status_body(code, message)), status=code, mimetype="application/json",
                          headers=headers)


def _flag(value):
    return str(value or "").lower() in ("1", "true", "yes")


def _labels(c):
    return (c.get("labels") if isinstance(c, dict) else None) or {}


def _newness(c):
    """Sort key: newer containers sort higher (restart counter label, then creation time)."""
    try:
        restart = int(_labels(c).get(RESTART_LABEL))
    except (TypeError, ValueError):
        restart = -1
    created = ""
    for key in ("created", "created_at", "createdAt", "started_at", "startedAt"):
        value = c.get(key) if isinstance(c, dict) else None
        if value:
            created = value.isoformat() if isinstance(value, datetime) else \
                ("%020.6f" % value if isinstance(value, (int, float)) else str(value))
            break
    return restart, created


def _close(iterator):
    """Stop a runtime's log stream from another thread (Docker's streams allow it; a
    generator running in the pump thread refuses, and ends at its next chunk)."""
    close = getattr(iterator, "close", None)
    if close is not None:
        try:
            close()
        except Exception:  # noqa: BLE001
            pass


class LogServer:
    """HTTP server of one agent.  start() binds (port 0 = any free port, see .port)."""

    def __init__(self, runtime, node_name, bind="127.0.0.1", port=0, threads=16, access=None, tls=None,
                 usage=None):
        self.runtime = runtime
        self.usage = usage           # a pod_usage.PodUsage, or None: no /stats/pods
        self.tls = tls               # a TlsFiles: HTTPS (terminated in front of waitress), or None: plain HTTP
        self._terminator = None
        self._backend_dir = None
        self.access = access         # a log_access.LogAccess, or None: no token needed
        self.node_name = node_name
        self.bind = bind
        self.requested_port = port
        self.threads = threads
        self.port = None
        self._server = None
        self._thread = None
        self.app = self._make_app()

    # ---- lookup ----

    def find(self, namespace, pod, container, previous=False, pod_uid=None):
        """The container's id, or None."""
        lister = getattr(self.runtime, "list_containers", None)
        if lister is not None:
            wanted = {NODE_LABEL: self.node_name, NAMESPACE_LABEL: namespace, POD_LABEL: pod,
                      CONTAINER_LABEL: container}
            try:
                listed = lister(wanted)
            except TypeError:     # a runtime whose list_containers() takes no filter
                listed = lister()
            matches = []
            for c in listed or []:
                labels = _labels(c)
                if labels.get(NODE_LABEL) != self.node_name or labels.get(NAMESPACE_LABEL) != namespace \
                        or labels.get(POD_LABEL) != pod or labels.get(CONTAINER_LABEL) != container:
                    continue
                if pod_uid and labels.get(POD_UID_LABEL) != pod_uid:
                    continue
                matches.append(c)
            matches.sort(key=_newness, reverse=True)
            index = 1 if previous else 0
            return matches[index].get("id") if len(matches) > index else None
        if previous:
            return None
        found = self.runtime.find_container(namespace, pod, container)
        if isinstance(found, dict):
            if _labels(found) and _labels(found).get(NODE_LABEL) not in (None, self.node_name):
                return None
            if pod_uid and _labels(found).get(POD_UID_LABEL) not in (None, pod_uid):
                return None
            return found.get("id")
        return found or None

    def _open_logs(self, container_id, tail, follow, timestamps, since):
        """runtime.logs with the options it supports: (iterator, timestamps honoured)."""
        extra = {}
        if timestamps or since is not None:
            try:
                params = inspect.signature(self.runtime.logs).parameters
                takes_any = any(p.kind == p.VAR_KEYWORD for p in params.values())
            except (TypeError, ValueError):
                params, takes_any = {}, False
            if timestamps and (takes_any or "timestamps" in params):
                extra["timestamps"] = True
            if since is not None and (takes_any or "since" in params):
                extra["since"] = since
        return self.runtime.logs(container_id, tail=tail, follow=follow, **extra), bool(extra.get("timestamps"))

    # ---- HTTP ----

    def _make_app(self):
        app = flask.Flask("shepherd_agent")

        @app.get("/healthz")
        def healthz():
            return flask.Response("ok\n", mimetype="text/plain")

        @app.get("/containerLogs/<namespace>/<pod>/<container>")
        def container_logs(namespace, pod, container):
            refused = self._refusal(namespace, pod, container, flask.request)
            if refused is not None:
                return refused
            granted_uid = self.access.pod_uid(flask.request.headers.get("Authorization")) if self.access else None
            return self.container_logs(namespace, pod, container, flask.request, granted_uid)

        @app.get("/stats/pods")
        def pod_stats():
            return self.pod_stats(flask.request)

        @app.errorhandler(404)
        def not_found(_err):
            return error(404, "no such path %s on the agent of node %s: use /containerLogs/NAMESPACE/POD/"
                              "CONTAINER" % (flask.request.path, self.node_name))

        @app.errorhandler(405)
        def not_allowed(_err):
            return error(405, "%s is not allowed on %s" % (flask.request.method, flask.request.path))

        @app.errorhandler(Exception)
        def on_bug(err):
            log.exception("log server: internal error on %s", flask.request.path)
            return error(500, "internal error of the agent of node %s (%s)" % (self.node_name, type(err).__name__))

        app.wsgi_app = expose_write(app.wsgi_app)
        return app

    def _refusal(self, namespace, pod, container, request):
        """An error response when the caller may not read this container's logs, else None."""
        if self.access is None:
            return None
        if not (is_dns1123_subdomain(namespace) and is_dns1123_subdomain(pod)):
            return error(400, "%r/%r is not a namespace/pod name" % (namespace, pod))
        header = request.headers.get("Authorization", "")
        if not header.strip():
            return error(401, "the agent of node %s serves logs only to replicas of its cluster, which show a log "
                              "grant: use sheepctl logs" % self.node_name,
                         {"WWW-Authenticate": 'Shepherd-Log-Grant realm="shepherd-agent"'})
        from .log_access import CannotCheck
        try:
            why_not = self.access.may_read(header, namespace, pod, container)
        except CannotCheck as exc:
            return error(503, "the agent of node %s cannot check log grants: %s" % (self.node_name, exc))
        if why_not:
            return error(403, "the agent of node %s will not serve the logs of %s/%s container %s: %s"
                              % (self.node_name, namespace, pod, container, why_not))
        return None

    def pod_stats(self, request):
        """The usage of this node's pods in the scope asked for (and granted)."""
        namespace, pod = request.args.get("namespace") or "", request.args.get("pod") or ""
        if (namespace and not is_dns1123_subdomain(namespace)) or (pod and not is_dns1123_subdomain(pod)) \
                or (pod and not namespace):
            return error(400, "namespace=%r pod=%r: give a namespace name, and a pod name only with it"
                         % (namespace[:100], pod[:100]))
        if self.access is not None:
            header = request.headers.get("Authorization", "")
            if not header.strip():
                return error(401, "the agent of node %s serves pod usage only to replicas of its cluster, which "
                                  "show a metrics grant: use kubectl top pods" % self.node_name,
                             {"WWW-Authenticate": 'Shepherd-Log-Grant realm="shepherd-agent"'})
            from .log_access import CannotCheck
            try:
                why_not = self.access.may_read_metrics(header, namespace, pod)
            except CannotCheck as exc:
                return error(503, "the agent of node %s cannot check grants: %s" % (self.node_name, exc))
            if why_not:
                return error(403, "the agent of node %s will not serve the usage of pods %s: %s" % (
                    self.node_name, "/".join(p for p in (namespace, pod) if p) or "of all namespaces", why_not))
        if self.usage is None:
            return error(404, "the agent of node %s keeps no pod usage" % self.node_name)
        body = {"node": self.node_name, "pods": self.usage.pods(namespace or None, pod or None)}
        return flask.Response(json.dumps(body, separators=(",", ":")), mimetype="application/json")

    def container_logs(self, namespace, pod, container, request, granted_uid=None):
        args = request.args
        follow, previous, timestamps = _flag(args.get("follow")), _flag(args.get("previous")), \
            _flag(args.get("timestamps"))
        tail = args.get("tailLines")
        if tail not in (None, ""):
            if not tail.isascii() or not tail.isdigit():
                return error(400, "tailLines must be a whole number of lines, 0 or more (got %r)" % tail)
            tail = int(tail)
        else:
            tail = None
        since = args.get("sinceTime")
        if since:
            try:
                since = parse_datetime(since)
            except ValueError:
                return error(400, "sinceTime %r is not an RFC 3339 time such as 2026-11-29T17:00:00Z" % since)
        else:
            since = None
        container_id = self.find(namespace, pod, container, previous=previous, pod_uid=granted_uid or args.get("podUID") or None)
        if container_id is None:
            if previous:
                return error(404, "previous terminated container %r of pod %s/%s not found on node %s"
                             % (container, namespace, pod, self.node_name))
            return error(404, "container %r of pod %s/%s not found on node %s (it has not been created here "
                              "yet, or the pod runs elsewhere)" % (container, namespace, pod, self.node_name))
        try:
            iterator, stamped = self._open_logs(container_id, tail, follow, timestamps, since)
        except Exception as exc:  # noqa: BLE001 - e.g. the container was removed just now
            log.info("logs of %s: %s", container_id, exc)
            return error(404, "the logs of container %r of pod %s/%s on node %s cannot be read: %s"
                         % (container, namespace, pod, self.node_name, exc))
        gone = request.environ.get("waitress.client_disconnected") or (lambda: False)

        environ = request.environ

        def body():
            write = environ.get(WRITE_KEY)   # set once the response has started
            if write is not None:
                # WSGI servers send the headers with the first non-empty chunk; a follower
                # must not wait for the container's next line to learn that its stream is open.
                write(b"")
            try:
                yield from pump(iterator, gone, on_stop=lambda: _close(iterator))
            except StreamBroken as exc:
                log.warning("logs of %s/%s container %s: the runtime's stream broke (%s); aborting the "
                            "response", namespace, pod, container, exc)
                raise abort_response(str(exc))

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", CONTAINER_HEADER: container_id}
        if stamped:
            headers[TIMESTAMPS_HEADER] = "true"
        return flask.Response(body(), mimetype="text/plain", headers=headers)

    # ---- life ----

    def start(self):
        if self._server is not None:
            return self
        options = dict(threads=self.threads, channel_request_lookahead=1, channel_timeout=3600, connection_limit=200,
                       clear_untrusted_proxy_headers=True, ident="shepherd-agent")
        if self.tls is not None:
            import tempfile
            from shepherd_ha.tls.serving import create_tls_server
            self._backend_dir = tempfile.mkdtemp(prefix="shepherd-agent-")     # 0700: ours alone
            self._server, self._terminator = create_tls_server(
                self.app, self.tls, self.bind, self.requested_port, os.path.join(self._backend_dir, "logs.sock"),
                **options)
            self.port = self._terminator.port
        else:
            self._server = waitress.create_server(self.app, host=self.bind, port=self.requested_port, **options)
            self.port = int(self._server.effective_port)
        self._thread = threading.Thread(target=self._server.run, name="log-server", daemon=True)
        self._thread.start()
        log.info("log server of node %s listening on %s:%d (%s)", self.node_name, self.bind, self.port,
                 "HTTPS" if self.tls is not None else "plain HTTP")
        return self

    def stop(self, timeout=5.0):
        """Close the listening socket and every open stream; wait for the server thread."""
        server, self._server = self._server, None
        if server is None:
            return
        if self._terminator is not None:
            self._terminator.stop(timeout)
            self._terminator = None
        stop_waitress_server(server, timeout)
        if self._thread is not None:
            self._thread.join(timeout)
        if self._backend_dir is not None:
            import shutil
            shutil.rmtree(self._backend_dir, ignore_errors=True)
            self._backend_dir = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
