"""HTTP client of the Shepherd HA API with replica failover.

Every replica serves the same API, so the client holds the list of all replica
URLs and moves to the next one when a replica cannot be reached, times out or
answers 503 (no leader, no quorum, not ready).  A 429 (that replica is overloaded)
sends the request to another replica, or, once every replica has said 429, again
after the shortest Retry-After (at most 10 s a wait, within the retry deadline).
Writes carry an
`Idempotency-Key` that is generated once per logical call and reused on every
retry, so a write retried after an ambiguous failure is never applied twice.

One Client may be shared by many threads: each thread gets its own
requests.Session (unless a session is passed in, which is then shared as is).
"""
import hashlib
import http.client
import json
import logging
import threading
import uuid
import weakref

import requests
import urllib3

from shepherd_ha import __version__
from shepherd_ha.model.resources import RESOURCES, Resource, lookup

from .errors import ApiError, OutcomeUnknown, WatchExpired, error_from_response
from .failover import Failover, _is_read_timeout, _never_sent, describe_failure

log = logging.getLogger(__name__)

WRITE_METHODS = frozenset(("POST", "PUT", "PATCH", "DELETE"))
MERGE_PATCH = "application/merge-patch+json"

# Failures of the transport: the replica is dead, unreachable, or died mid-answer.
_REQUEST_FAILURES = (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                     requests.exceptions.ChunkedEncodingError)
# The same while reading a streamed body straight from urllib3.
_STREAM_FAILURES = _REQUEST_FAILURES + (urllib3.exceptions.HTTPError, http.client.HTTPException,
                                        OSError)


def normalize_servers(servers):
    """A list or comma-separated string of base URLs -> list of URLs with a
    scheme and without a trailing slash."""
    if isinstance(servers, str):
        servers = servers.split(",")
    out = []
    for s in servers or ():
        s = str(s).strip()
        if not s:
            continue
        if "://" not in s:
            s = "http://" + s
        out.append(s.rstrip("/"))
    if not out:
        raise ValueError("no server URLs given")
    return out


def resolve_resource(resource):
    """A Resource, or what a person types ("pods", "pod", "po") -> Resource."""
    if isinstance(resource, Resource):
        return resource
    r = RESOURCES.get(resource) or lookup(resource)
    if r is None:
        raise ValueError("unknown resource %r (known: %s)" % (resource, ", ".join(sorted(RESOURCES))))
    return r


def _rv(value):
    """A resourceVersion as an int, or None."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _object_rv(obj):
    if isinstance(obj, dict):
        return _rv((obj.get("metadata") or {}).get("resourceVersion"))
    return None


def spread_order(servers, key):
    """Indexes of `servers` in the order the client named `key` tries them: by the
    highest hash of the key and the server (rendezvous hashing). Each server comes
    first for about 1/n of the keys, and the keys of a server that fails go on to the
    others in equal parts, not all to the next one in the list. (A real hash: with
    crc32, which is linear, keys that differ in a few characters kept the same order.)"""
    def weight(i):
        return hashlib.blake2b(("%s|%s" % (key, servers[i])).encode(), digest_size=8).digest()
    return sorted(range(len(servers)), key=lambda i: (weight(i), i), reverse=True)


class Client:
    """Client of a Shepherd HA cluster.

    servers: list or comma-separated string of replica base URLs
    timeout: per-request connect/read timeout in seconds
    retry_deadline: how long one logical call keeps failing over before giving up
    session: a requests.Session to use for every thread (default: one per thread)
    watch_read_timeout: silence after which a watch stream's replica is
        considered dead (default max(15, timeout)); servers send bookmarks every
        few seconds
    token: bearer token sent with every request (replicas started with --token-file)
    ca_file: the cluster CA that https servers' certificates are checked against
        (default: the system's CAs)
    client_cert: (certificate file, key file) shown to servers that ask for one
    cluster_id: the cluster this client is configured for, sent with every request
        (Shepherd-Cluster-Id): a replica of another cluster answers 421
    spread_key: a name of this client (an agent's node name) that orders the servers for
        it (rendezvous hashing), so a fleet configured with one list of servers spreads
        over them instead of every agent's requests and watches landing on the first, and
        a failed replica's clients spread over the others; a client away from its first
        replica tries it again after failover.RETURN_HOME_SECONDS (default: the servers in order,
        staying on the one that answered last)
    """

    def __init__(self, servers, timeout=5.0, retry_deadline=15.0, session=None,
                 user_agent=None, watch_read_timeout=None, token=None, ca_file=None, client_cert=None,
                 cluster_id=None, spread_key=None):
        self.servers = normalize_servers(servers)
        self.timeout = float(timeout)
        self.retry_deadline = float(retry_deadline)
        self.watch_read_timeout = float(watch_read_timeout or max(15.0, self.timeout))
        self.user_agent = user_agent or "shepherd-client/%s" % __version__
        self._authorization = "Bearer " + token.strip() if token and token.strip() else None
        self.ca_file = ca_file
        self.client_cert = tuple(client_cert) if client_cert else None
        self.cluster_id = cluster_id or None
        self._session = session
        self._local = threading.local()
        # sessions of live threads (weak: a finished thread's session goes with it)
        self._sessions = weakref.WeakSet()
        self._sessions_lock = threading.Lock()
        # The order this client tries the servers in (indexes), the first its home.
        self.order = spread_order(self.servers, spread_key) if spread_key else list(range(len(self.servers)))
        self._spread = bool(spread_key)
        self._preferred = self.order[0] if self.order else 0   # index of the replica that answered last
        self._left_home_at = None    # (spread) when it last moved off its home replica or tried it again
        self.last_server = None      # its URL

    def __repr__(self):
        return "Client(%r)" % (self.servers,)

    # -- plumbing ---------------------------------------------------------

    def _http(self):
        if self._session is not None:
            return self._session
        s = getattr(self._local, "session", None)
        if s is None:
            s = requests.Session()
            # control plane traffic never goes through an HTTP proxy from the environment
            s.trust_env = False
            s.verify = self.ca_file or True     # https: the cluster CA (a wrong server is refused)
            if self.client_cert:
                s.cert = self.client_cert
            self._local.session = s
            with self._sessions_lock:
                self._sessions.add(s)
        return s

    def close(self):
        """Close the sessions this client created."""
        with self._sessions_lock:
            sessions, self._sessions = list(self._sessions), weakref.WeakSet()
        for s in sessions:
            s.close()
        self._local = threading.local()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _headers(self, extra=None):
        h = {"Accept": "application/json", "User-Agent": self.user_agent}
        if self._authorization:
            h["Authorization"] = self._authorization
        if self.cluster_id:
            h["Shepherd-Cluster-Id"] = self.cluster_id
        if extra:
            h.update(extra)
        return h

    def request(self, method, path, params=None, body=None, content_type="application/json",
                idempotent_write=True, stream=False, headers=None, timeout=None):
        """Send one logical request, failing over between replicas.

        Returns the parsed JSON body (None when empty, the text when not JSON),
        or the requests.Response when stream=True (the caller closes it).
        Raises ApiError for error answers (WatchExpired for 410),
        NoReplicaReachable when no replica answered before the retry deadline
        (or the last 503 as ApiError when some replica answered 503).

        Writes (POST/PUT/PATCH/DELETE) carry one Idempotency-Key reused on every
        retry.  With idempotent_write=False no key is sent and a write is retried
        only when it certainly was not applied (connection refused, or a 503 with
        `Shepherd-Outcome: not-applied`); otherwise OutcomeUnknown or the 503
        ApiError is raised.
        """
        method = method.upper()
        is_write = method in WRITE_METHODS
        hdrs = self._headers(headers)
        data = None
        if body is not None:
            data = body if isinstance(body, (bytes, str)) else json.dumps(body)
            if isinstance(data, str):
                data = data.encode("utf-8")
            hdrs["Content-Type"] = content_type
        if is_write and idempotent_write:
            hdrs.setdefault("Idempotency-Key", uuid.uuid4().hex)
        unsafe = is_write and not idempotent_write
        read_timeout = self.timeout if timeout is None else timeout

        fo = Failover(self)
        while True:
            try:
                resp = self._http().request(
                    method, fo.server + path, params=params, data=data, headers=hdrs,
                    stream=stream,
                    timeout=(max(0.05, min(self.timeout, fo.remaining())), read_timeout))
            except _REQUEST_FAILURES as exc:
                if unsafe and not _never_sent(exc):
                    raise OutcomeUnknown("%s %s on %s: %s; the write may or may not have been "
                                         "applied" % (method, path, fo.server, describe_failure(exc)))
                fo.failed(describe_failure(exc))
                continue
            if resp.status_code == 503:
                err = error_from_response(resp)
                resp.close()
                if unsafe and err.outcome != "not-applied":
                    raise err
                fo.failed("503 %s" % err.message, err)
                continue
            if resp.status_code == 429:     # refused before any work: safe to send again
                err = error_from_response(resp)
                resp.close()
                fo.throttled(err)
                continue
            fo.answered()
            if resp.status_code >= 400:
                err = error_from_response(resp)
                resp.close()
                raise err
            if stream:
                return resp
            if not resp.content:
                return None
            try:
                return resp.json()
            except ValueError:
                return resp.text

    # -- resources --------------------------------------------------------

    @staticmethod
    def _ns(r, namespace):
        if not r.namespaced:
            return None
        return namespace or "default"

    def get(self, resource, name, namespace=None, consistent=True, subresource=None):
        r = resolve_resource(resource)
        params = None if consistent else {"resourceVersion": "0"}
        return self.request("GET", r.object_path(name, self._ns(r, namespace), subresource), params=params)

    def list(self, resource, namespace=None, label_selector=None, field_selector=None,
             consistent=True):
        """List a collection; namespace None lists all namespaces."""
        r = resolve_resource(resource)
        params = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if not consistent:
            params["resourceVersion"] = "0"
        return self.request("GET", r.collection_path(namespace if r.namespaced else None),
                            params=params or None)

    def create(self, resource, obj, namespace=None):
        r = resolve_resource(resource)
        obj = dict(obj)
        obj.setdefault("apiVersion", r.api_version)
        obj.setdefault("kind", r.kind)
        meta = obj.get("metadata") or {}
        ns = None
        if r.namespaced:
            ns = namespace or meta.get("namespace") or "default"
        return self.request("POST", r.collection_path(ns), body=obj)

    def replace(self, resource, obj, subresource=None):
        """PUT the object; its metadata.resourceVersion, when set, is a precondition."""
        r = resolve_resource(resource)
        meta = obj.get("metadata") or {}
        if not meta.get("name"):
            raise ValueError("replace: the object has no metadata.name")
        return self.request("PUT", r.object_path(meta["name"], self._ns(r, meta.get("namespace")),
                                                 subresource), body=obj)

    def patch(self, resource, name, patch, namespace=None, subresource=None):
        """JSON merge patch (RFC 7386)."""
        r = resolve_resource(resource)
        return self.request("PATCH", r.object_path(name, self._ns(r, namespace), subresource),
                            body=patch, content_type=MERGE_PATCH)

    def delete(self, resource, name, namespace=None, preconditions=None, propagation_policy=None,
               grace_period_seconds=None):
        """Delete; a pod on a node is stopped gracefully by its agent unless
        grace_period_seconds is 0 (then it goes at once)."""
        r = resolve_resource(resource)
        body = None
        if preconditions or propagation_policy or grace_period_seconds is not None:
            body = {"apiVersion": "v1", "kind": "DeleteOptions"}
            if preconditions:
                body["preconditions"] = preconditions
            if propagation_policy:
                body["propagationPolicy"] = propagation_policy
            if grace_period_seconds is not None:
                body["gracePeriodSeconds"] = int(grace_period_seconds)
        return self.request("DELETE", r.object_path(name, self._ns(r, namespace)), body=body)

    def scale(self, resource, name, replicas, namespace=None):
        """Set spec.replicas through the scale subresource."""
        return self.patch(resource, name, {"spec": {"replicas": int(replicas)}},
                          namespace=namespace, subresource="scale")

    def cluster(self):
        return self.request("GET", "/shepherd/v1/cluster")

    def replica(self):
        return self.request("GET", "/shepherd/v1/replica")

    def version(self):
        return self.request("GET", "/version")

    # -- watch ------------------------------------------------------------

    def watch(self, resource, namespace=None, resource_version=None, label_selector=None,
              field_selector=None, bookmarks=True, stop=None, read_timeout=None,
              timeout_seconds=None):
        """Generator of watch events ({"type": ..., "object": ...}).

        With a resource_version (> 0) it yields every change after it.  Without
        one (or "0") it first lists the collection, yields an ADDED event per
        item and (when bookmarks) a BOOKMARK with the list's revision, then
        yields the changes after the list: that start is resumable at any
        point, unlike the server's synthetic ADDED events.

        BOOKMARK events are yielded too (their object's
        metadata.resourceVersion is the revision the watch has reached); skip
        them if you don't need them.

        The last revision seen is remembered; when the stream breaks (replica
        died, connection lost, no data for read_timeout seconds) the watch
        resumes on the next replica from that revision, without duplicates or
        gaps.  A 410 (HTTP or ERROR event) raises WatchExpired: list again and
        watch from the list's resourceVersion.  When no replica can be reached
        for retry_deadline seconds, NoReplicaReachable is raised.

        stop: optional threading.Event; when set the generator returns (an
        active stream read is interrupted).
        """
        r = resolve_resource(resource)
        ns = namespace if r.namespaced else None
        path = r.collection_path(ns)
        rv = _rv(resource_version)
        if not rv:
            listed = self.list(r, ns, label_selector, field_selector)
            items = (listed or {}).get("items") or []
            for item in items:
                if stop is not None and stop.is_set():
                    return
                item.setdefault("kind", r.kind)
                item.setdefault("apiVersion", r.api_version)
                yield {"type": "ADDED", "object": item}
            rv = _rv(((listed or {}).get("metadata") or {}).get("resourceVersion"))
            if rv is None:
                rv = max([_object_rv(i) or 0 for i in items] or [0])
            if bookmarks:
                yield {"type": "BOOKMARK", "object": {
                    "kind": r.kind, "apiVersion": r.api_version,
                    "metadata": {"resourceVersion": str(rv)}}}
        params = {"watch": "1"}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        if timeout_seconds is not None:
            params["timeoutSeconds"] = str(int(timeout_seconds))
        read_timeout = float(read_timeout or self.watch_read_timeout)

        fo = Failover(self, prefer=not self._spread)
        while True:
            if stop is not None and stop.is_set():
                return
            params["resourceVersion"] = str(rv)
            resp = None
            interrupter = None
            failure = None
            got_events = False
            try:
                try:
                    resp = self._http().get(
                        fo.server + path, params=params, headers=self._headers(), stream=True,
                        timeout=(max(0.05, min(self.timeout, fo.remaining())), read_timeout))
                except _REQUEST_FAILURES as exc:
                    if not bookmarks and _is_read_timeout(exc):
                        fo.rotate()  # silence is normal without bookmarks
                    else:
                        fo.failed(describe_failure(exc))
                    continue
                if resp.status_code == 503:
                    err = error_from_response(resp)
                    fo.failed("503 %s" % err.message, err)
                    continue
                if resp.status_code == 429:
                    fo.throttled(error_from_response(resp))
                    continue
                if resp.status_code >= 400:
                    fo.answered()
                    raise error_from_response(resp)
                fo.answered()
                fo.reset()
                if stop is not None:
                    interrupter = _Interrupter(resp, stop)
                try:
                    for event in _iter_events(resp):
                        etype = event.get("type")
                        obj = event.get("object") or {}
                        if etype == "ERROR":
                            code = int(obj.get("code") or 0)
                            if code == 410:
                                raise WatchExpired(obj)
                            if code in (500, 503, 504):
                                failure = "watch error %d: %s" % (code, obj.get("message"))
                                break
                            raise ApiError(obj)
                        erv = _object_rv(obj)
                        if erv is not None:
                            if etype != "BOOKMARK" and erv < rv:
                                continue  # already delivered
                            rv = max(rv, erv)
                        got_events = True
                        yield event
                        if stop is not None and stop.is_set():
                            return
                except _STREAM_FAILURES as exc:
                    if stop is not None and stop.is_set():
                        return
                    if not bookmarks and _is_read_timeout(exc):
                        continue  # an idle stream: reconnect from rv
                    failure = describe_failure(exc)
            finally:
                if interrupter is not None:
                    interrupter.done()
                if resp is not None:
                    resp.close()
            if stop is not None and stop.is_set():
                return
            if failure is None and got_events:
                fo.maybe_return_home()
                continue  # the stream ended normally: reconnect to the same replica (or home)
            fo.failed(failure or "watch stream ended")


def _iter_lines(resp):
    raw = resp.raw
    if getattr(raw, "chunked", False) and raw.supports_chunked_reads():
        chunks = raw.read_chunked(None, decode_content=True)
    else:
        def _read1():
            while True:
                data = raw.read1(65536)
                if not data:
                    return
                yield data
        chunks = _read1()
    buf = b""
    for chunk in chunks:
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield line
    if buf.strip():
        yield buf


def _iter_events(resp):
    for line in _iter_lines(resp):
        try:
            event = json.loads(line)
        except ValueError:
            log.warning("ignoring a malformed watch line: %r", line[:200])
            continue
        if isinstance(event, dict):
            yield event


class _Interrupter:
    """Shuts a streaming response's socket down when `stop` is set, so that a
    blocked read returns at once."""

    def __init__(self, resp, stop):
        self.resp = resp
        self.stop = stop
        self.finished = threading.Event()
        t = threading.Thread(target=self._run, name="watch-interrupter", daemon=True)
        t.start()

    def _run(self):
        while not self.finished.is_set():
            if self.stop.wait(0.2):
                if not self.finished.is_set():
                    try:
                        self.resp.raw.shutdown()
                    except Exception:  # noqa: BLE001 - best effort on older urllib3
                        try:
                            self.resp.raw._connection.sock.shutdown(2)
                        except Exception:  # noqa: BLE001
                            pass
                return

    def done(self):
        self.finished.set()
