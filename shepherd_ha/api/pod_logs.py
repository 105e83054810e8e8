"""GET /api/v1/namespaces/{ns}/pods/{name}/log: a container's output, from its node's agent.

Any replica answers: it reads the pod (linearizably; its local copy when there is no
quorum, so logs stay readable while the control plane is degraded), picks the
container, finds the pod's node and that node's agent (status.addresses InternalIP and
status.daemonEndpoints.kubeletEndpoint.Port of the Node object: the replica never
connects anywhere a request names) and streams the agent's answer through.

Query: container, follow, tailLines, previous, timestamps, sinceTime (as kubectl).
The agent's errors come back as Status objects with the agent's code and message;
an agent that cannot be reached is a 503 naming the node and its address.

A follower holds one server thread; a follower that goes away is noticed within about
a second (waitress' client_disconnected, with channel_request_lookahead) and both its
thread and its connection to the agent are released.
"""
import ipaddress
import json
import logging
import re
import socket
from urllib.parse import quote

import requests
import urllib3
from flask import Response, request

from shepherd_ha.model.times import format_datetime, now_rfc3339, parse_datetime
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.tls.outbound import PLAIN
from shepherd_ha.streaming import StreamBroken, WRITE_KEY, abort_response, pump, response_chunks

from . import params
from .errors import ApiError, unavailable

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 3.0      # seconds to connect to an agent
READ_TIMEOUT = 30.0        # seconds of silence from an agent, except while following
MAX_ERROR_BODY = 64 * 1024
PASSED_HEADERS = ("Shepherd-Log-Timestamps", "Shepherd-Container-ID")
_HOSTNAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


# ---- request ----

def _bool_arg(name):
    value = request.args.get(name)
    if value in (None, ""):
        return False
    low = value.lower()
    if low in ("1", "true", "yes"):
        return True
    if low in ("0", "false", "no"):
        return False
    raise ApiError(400, "%s must be true or false (got %r)" % (name, value))


def _options():
    tail = params.query_int("tailLines", unit=" of lines")
    tail = None if tail is None else str(tail)
    since = request.args.get("sinceTime") or None
    since_seconds = params.query_int("sinceSeconds", 1, unit=" of seconds")
    if since_seconds is not None:
        if since is not None:
            raise ApiError(400, "at most one of sinceTime or sinceSeconds may be given")
        since = now_rfc3339(-since_seconds)      # the agent knows sinceTime only
    if since is not None:
        try:
            # passed on as a MicroTime in UTC, which agents of every version read
            since = format_datetime(parse_datetime(since), micro=True)
        except ValueError:
            raise ApiError(400, "sinceTime %r is not an RFC 3339 time such as 2026-11-29T17:00:00Z" % since)
    return {"follow": _bool_arg("follow"), "previous": _bool_arg("previous"),
            "timestamps": _bool_arg("timestamps"), "tailLines": tail, "sinceTime": since}


def _read(replica, resource, namespace, name):
    """Linearizable read; the local copy when there is no quorum."""
    try:
        obj, _ = replica.get(resource, namespace, name, True)
    except Unavailable:
        try:
            obj, _ = replica.get(resource, namespace, name, False)
        except Unavailable as exc:
            raise unavailable(exc)
    return obj


def choose_container(pod, wanted):
    """The container name to show (400 with the choices when it is ambiguous or unknown)."""
    meta = pod.get("metadata") or {}
    where = "%s/%s" % (meta.get("namespace"), meta.get("name"))
    names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]
    if wanted:
        if wanted not in names:
            raise ApiError(400, "container %r is not valid for pod %s: its containers are %s"
                           % (wanted, where, ", ".join(names) or "none"))
        return wanted
    if len(names) == 1:
        return names[0]
    if not names:
        raise ApiError(400, "pod %s has no containers" % where)
    raise ApiError(400, "a container name must be specified for pod %s, choose one of: %s (use ?container=NAME, "
                        "or sheepctl logs -c NAME)" % (where, ", ".join(names)))


def agent_endpoint(node):
    """(host, port) of a Node's agent, or ApiError 503 saying what is missing."""
    name = (node.get("metadata") or {}).get("name")
    st = node.get("status") or {}
    address = None
    for a in st.get("addresses") or []:
        if isinstance(a, dict) and a.get("type") == "InternalIP" and a.get("address"):
            address = a["address"]
            break
    if not isinstance(address, str) or not address:
        raise ApiError(503, "node %s has no InternalIP address in its status yet: its agent has not "
                            "registered it" % name, headers={"Retry-After": "1"})
    try:
        ipaddress.ip_address(address)
    except ValueError:
        if len(address) > 253 or not _HOSTNAME.match(address):
            raise ApiError(503, "node %s has no usable address (%r is neither an IP address nor a host name)"
                           % (name, address[:100]))
    port = (((st.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port"))
    if isinstance(port, str) and port.isdigit():
        port = int(port)
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ApiError(503, "node %s has no agent port (status.daemonEndpoints.kubeletEndpoint.Port) yet: "
                            "its agent has not registered it" % name, headers={"Retry-After": "1"})
    return address, port


def _host_port(host, port):
    try:
        if ipaddress.ip_address(host).version == 6:
            return "[%s]:%d" % (host, port)
    except ValueError:
        pass
    return "%s:%d" % (host, port)


def _describe(exc):
    text = str(exc).lower()
    if isinstance(exc, requests.exceptions.SSLError):
        if "match" in text or "hostname" in text:
            return "its TLS certificate is not for this node"
        return "TLS: its certificate does not verify against the cluster CA, or it does not speak TLS"
    if isinstance(exc, requests.exceptions.ConnectTimeout) or "timed out" in text:
        return "timed out"
    if "refused" in text:
        return "connection refused"
    if "no route" in text or "unreachable" in text:
        return "no route to host"
    return type(exc).__name__


# ---- streaming ----

def _keepalive(sock):
    """A dead agent node is noticed in about a minute even on a silent follow."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for opt, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
            if hasattr(socket, opt):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, opt), value)
    except OSError:
        pass


def _socket_of(resp):
    """The socket under a streamed response (http.client hands it to the response
    when the server says Connection: close, as waitress does for streams)."""
    conn = getattr(resp.raw, "connection", None) or getattr(resp.raw, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is None:
        fp = getattr(getattr(resp.raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def _shutdown(resp):
    """Wake a read blocked on the agent's connection (close alone does not)."""
    sock = _socket_of(resp)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
    resp.close()


def _agent_error(resp, node_name, where):
    body = resp.raw.read(MAX_ERROR_BODY, decode_content=True) or b""
    resp.close()
    message = None
    try:
        status = json.loads(body)
        if isinstance(status, dict) and isinstance(status.get("message"), str):
            message = status["message"]
    except ValueError:
        pass
    if message is None:
        text = " ".join(body.decode("utf-8", "replace").split())[:300]
        return ApiError(503, "the agent of node %s at %s answered %d: %s" % (node_name, where, resp.status_code,
                                                                              text or "(no body)"))
    if resp.status_code in (401, 403):
        # The agent refused this replica, not the caller: a set-up problem, not the caller's to fix.
        return ApiError(503, "the agent of node %s refused this replica: %s (an agent with a --token-file "
                        "verifies the log grants of replicas of its own cluster)" % (node_name, message))
    code = resp.status_code if resp.status_code in (400, 404, 410, 503) else 503
    return ApiError(code, message)


def pod_log(replica, target, log_grants=None, outbound=None):
    """Stream a container's log from its node's agent. `log_grants` signs a grant for
    exactly this container (api/replica_credentials.py), which the agent verifies; no
    token of the caller's or of this replica's ever leaves it: the agent's address comes
    from a Node object, which whoever may write Nodes can point anywhere. `outbound`:
    plain HTTP or HTTPS verified against the cluster CA, the certificate naming the node
    (shepherd_ha/tls/outbound.py)."""
    outbound = outbound or PLAIN
    if request.method != "GET":
        raise ApiError(405, "%s is not supported on %s: use GET" % (request.method, request.path))
    options = _options()
    pod = _read(replica, "pods", target.namespace, target.name)
    if pod is None:
        raise ApiError(404, "%s not found" % target.describe(), details={"name": target.name, "kind": "pods"})
    container = choose_container(pod, request.args.get("container"))
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        raise ApiError(400, "pod %s/%s is not scheduled yet: it has no logs until it runs on a node"
                       % (target.namespace, target.name))
    node = _read(replica, "nodes", None, node_name)
    if node is None:
        raise ApiError(404, "node %s of pod %s/%s not found: its agent is gone, and so are the logs"
                       % (node_name, target.namespace, target.name))
    host, port = agent_endpoint(node)
    where = _host_port(host, port)
    url = outbound.scheme + "://%s/containerLogs/%s/%s/%s" % (where, quote(target.namespace, safe=""),
                                                quote(target.name, safe=""), quote(container, safe=""))
    query = {"podUID": (pod.get("metadata") or {}).get("uid") or ""}
    for key in ("follow", "previous", "timestamps"):
        if options[key]:
            query[key] = "true"
    for key in ("tailLines", "sinceTime"):
        if options[key] is not None:
            query[key] = options[key]
    session = outbound.agent_session(node_name)     # never through an HTTP proxy from the environment
    agent_headers = {"User-Agent": "shepherd-ha/%s" % replica.id}
    if log_grants is not None:
        agent_headers["Authorization"] = log_grants.log_grant(node_name, target.namespace, target.name, container,
                                                              query["podUID"])
    try:
        resp = session.get(url, params=query, stream=True, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                           headers=agent_headers)
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
        session.close()
        raise ApiError(503, "the agent of node %s at %s is unreachable (%s)" % (node_name, where, _describe(exc)),
                       headers={"Retry-After": "1"})
    if resp.status_code >= 300:
        session.close()
        raise _agent_error(resp, node_name, where)
    sock = _socket_of(resp)
    if sock is not None and options["follow"]:
        sock.settimeout(None)      # a quiet container is not a dead agent: keepalive watches the link
        _keepalive(sock)
    headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Shepherd-Node": node_name}
    for name in PASSED_HEADERS:
        if resp.headers.get(name):
            headers[name] = resp.headers[name]
    environ = request.environ
    gone = environ.get("waitress.client_disconnected") or (lambda: False)

    def stop():
        _shutdown(resp)
        session.close()

    def body():
        write = environ.get(WRITE_KEY)
        if write is not None:
            write(b"")      # headers now: a follower learns at once that its stream is open
        try:
            yield from pump(response_chunks(resp, decode_content=False), gone, on_stop=stop)
        except StreamBroken as exc:
            log.warning("logs of pod %s/%s: the stream from the agent of node %s at %s broke (%s); "
                        "aborting the response so that the client resumes", target.namespace, target.name,
                        node_name, where, exc)
            raise abort_response(str(exc))

    return Response(body(), status=200, content_type=resp.headers.get("Content-Type") or "text/plain",
                    headers=headers)
