"""Helpers for the integration tests: real replica processes, plain `requests`.

Every loop here is bounded by a deadline and every HTTP call has a timeout, so a
wedged cluster makes a test fail instead of hang.
"""
import json
import os
import re
import socket
import threading
import time
import uuid

import requests

from shepherd_ha.cli.local_cluster import LocalCluster, LocalClusterError, find_base_port
from tests.waiting import wait_for  # noqa: F401 - the integration tests' import of it

HTTP_TIMEOUT = 10.0          # seconds for any single request that is expected to answer
READY_TIMEOUT = 30.0         # seconds for a cluster to elect a leader and become ready

# Replica ports are picked below the kernel's ephemeral range (32768-60999 here): an outgoing
# connection (ours, or a replica's own Raft link) can take any port in that range as its local
# port between the pick and the replica's bind, and a replica that cannot bind its Raft port
# silently never joins (see the report on LocalCluster.find_base_port's default range).
PORT_LOW, PORT_HIGH = 20000, 32500


def free_base_port(replicas=3):
    return find_base_port(replicas, low=PORT_LOW, high=PORT_HIGH)

PODS = "/api/v1/namespaces/{ns}/pods"
POD = "/api/v1/namespaces/{ns}/pods/{name}"


# ---------------------------------------------------------------- HTTP

def loopback_raft_settings(data_root, offset, count=3):
    """RaftSettings of `count` real PySyncObj members on 127.0.0.1 (ports from a free base
    plus `offset`), each with its data dir under `data_root` (a pathlib.Path)."""
    from shepherd_ha.store.raft_node import RaftSettings
    base = find_base_port(count)
    addresses = ["127.0.0.1:%d" % (base + offset + i) for i in range(count)]
    return [RaftSettings(self_address=address, peer_addresses=[a for a in addresses if a != address],
                         data_dir=str(data_root / ("r%d" % i)), password="test-password",
                         salt="00112233445566778899aabbccddeeff") for i, address in enumerate(addresses)]


def call(method, url, timeout=HTTP_TIMEOUT, **kwargs):
    return requests.request(method, url, timeout=timeout, **kwargs)


def describe(resp):
    """One line for assertion messages."""
    text = resp.text if len(resp.text) < 600 else resp.text[:600] + "..."
    return "%s %s -> %d %s" % (resp.request.method, resp.request.url[:200], resp.status_code, text)


def expect(resp, code):
    assert resp.status_code == code, "expected %d: %s" % (code, describe(resp))
    return resp.json() if resp.content and resp.headers.get("Content-Type", "").startswith(
        "application/json") else None


def strict_json(text):
    """Parse JSON the way RFC 8259 (and Go, Java, JS) clients do: no NaN/Infinity."""
    def bad_constant(name):
        raise ValueError("not JSON: %s" % name)
    return json.loads(text, parse_constant=bad_constant)


def assert_status(resp, code, reason=None):
    """`resp` is a Kubernetes-style Status error with this code (and reason)."""
    assert resp.status_code == code, "expected %d%s: %s" % (code, " " + reason if reason else "",
                                                            describe(resp))
    try:
        body = resp.json()
    except ValueError:
        raise AssertionError("error body is not JSON: %s" % describe(resp))
    assert isinstance(body, dict), describe(resp)
    assert body.get("kind") == "Status", describe(resp)
    assert body.get("apiVersion") == "v1", describe(resp)
    assert body.get("status") == "Failure", describe(resp)
    assert body.get("code") == code, describe(resp)
    assert isinstance(body.get("reason"), str) and body["reason"], describe(resp)
    if reason is not None:
        assert body["reason"] == reason, describe(resp)
    assert isinstance(body.get("message"), str) and body["message"].strip(), describe(resp)
    return body


# ---------------------------------------------------------------- manifests

def pod(name, labels=None, node=None, image="nginx:1.25", **extra):
    spec = {"containers": [{"name": "main", "image": image}]}
    if node:
        spec["nodeName"] = node
    meta = {"name": name}
    if labels is not None:
        meta["labels"] = dict(labels)
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    obj.update(extra)
    return obj


def deployment(name, replicas=1, app=None):
    app = app or name
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}}


def service(name, app=None):
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": {"selector": {"app": app or name}, "ports": [{"port": 80}]}}


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


# ---------------------------------------------------------------- clusters

class Cluster:
    """A LocalCluster of real replica processes plus the URLs the tests need."""

    def __init__(self, directory, replicas=3, server_options=None, auth=False, tls=False):
        """tls=False: plain HTTP (--insecure-http), as these tests talk plain `requests`;
        tests/integration/test_tls.py runs a TLS cluster."""
        self.lc = LocalCluster(str(directory))
        self.lc.create_on_free_ports(replicas, low=PORT_LOW, high=PORT_HIGH, server_options=server_options,
                                     auth=auth, tls=tls)
        self.ids = self.lc.ids()
        self.urls = {ident: self.lc.replica(ident)["api"] for ident in self.ids}

    def start(self, timeout=READY_TIMEOUT):
        self.lc.start_all()
        return self.wait_ready(timeout)

    def wait_ready(self, timeout=READY_TIMEOUT, ids=None):
        try:
            return self.lc.wait_ready(timeout, ids=ids)
        except LocalClusterError as exc:
            raise AssertionError("%s\n%s\n%s" % (exc, self.states(), self.log_tails()))

    def states(self):
        """Each replica's /readyz answer and its own status, for failure messages."""
        out = []
        for ident in self.ids:
            try:
                ready = call("GET", self.url(ident) + "/readyz", timeout=2.0)
                me = call("GET", self.url(ident) + "/shepherd/v1/replica", timeout=2.0).text
                out.append("%s: readyz %d %s; %s" % (ident, ready.status_code, ready.text.strip(), me[:600]))
            except requests.RequestException as exc:
                out.append("%s: %s" % (ident, type(exc).__name__))
        return "\n".join(out)

    def stop_all(self):
        self.lc.stop_all(timeout=5.0)

    def kill(self, ident):
        assert self.lc.kill(ident), "replica %s was not running" % ident

    def url(self, ident):
        return self.urls[ident]

    def view(self, ident, timeout=3.0):
        """GET /shepherd/v1/cluster on one replica (with the admin token and the CA on a cluster with them)."""
        return expect(call("GET", self.url(ident) + "/shepherd/v1/cluster", timeout=timeout,
                           headers=self.lc.auth_headers(), verify=self.lc.verify), 200)

    def leader(self, via=None, timeout=10.0):
        """The leader id as /shepherd/v1/cluster reports it (waits for one)."""
        deadline = time.monotonic() + timeout
        while True:
            for ident in ([via] if via else self.running()):
                try:
                    view = self.view(ident, timeout=2.0)
                except (requests.RequestException, AssertionError, ValueError):
                    continue
                leaders = [r for r in view["replicas"] if r.get("role") == "leader" and r.get("reachable")]
                if view.get("leader") and len(leaders) == 1 and leaders[0]["id"] == view["leader"]:
                    return view["leader"]
            if time.monotonic() > deadline:
                raise AssertionError("no leader reported within %.0fs" % timeout)
            time.sleep(0.05)

    def followers(self, leader=None):
        leader = leader or self.leader()
        return [i for i in self.ids if i != leader]

    def running(self):
        return [i for i in self.ids if self.lc.pid(i)]

    def log_tails(self, lines=30):
        out = []
        for ident in self.ids:
            path = os.path.join(self.lc.dir, ident, "server.log")
            try:
                with open(path, errors="replace") as fh:
                    tail = fh.readlines()[-lines:]
            except OSError:
                tail = ["(no log)\n"]
            out.append("---- %s server.log (last %d lines)\n%s" % (ident, lines, "".join(tail)))
        return "\n".join(out)

    def internal_errors(self):
        """Lines where a replica logged a 500 (the API logs every one with its path)."""
        found = []
        for ident in self.ids:
            path = os.path.join(self.lc.dir, ident, "server.log")
            try:
                with open(path, errors="replace") as fh:
                    found += ["%s: %s" % (ident, line.strip()) for line in fh if "internal error on" in line]
            except OSError:
                pass
        return found


def start_cluster(directory, replicas=3, server_options=None):
    cluster = Cluster(directory, replicas, server_options)
    try:
        cluster.start()
    except BaseException:
        cluster.stop_all()
        raise
    return cluster


_CODE_500 = re.compile(r'^shepherd_api_requests_total\{[^}]*code="500"[^}]*\}\s+([0-9.e+]+)', re.M)


def metrics_500s(url):
    """Request counters with code 500 on one replica: {label text: count}."""
    text = call("GET", url + "/metrics").text
    assert "shepherd_api_requests_total" in text, "no request counter in /metrics"
    out = {}
    for line in text.splitlines():
        m = _CODE_500.match(line)
        if m and float(m.group(1)) > 0:
            out[line.split()[0]] = float(m.group(1))
    return out


def assert_no_internal_errors(cluster):
    """No replica answered any request with 500 during the module (metrics and logs)."""
    problems = {}
    for ident in cluster.running():
        found = metrics_500s(cluster.url(ident))
        if found:
            problems[ident] = found
    logged = cluster.internal_errors()
    assert not problems and not logged, "replicas answered 500: %s\nlogged: %s" % (
        problems, "\n".join(logged[:20]))


# ---------------------------------------------------------------- store helpers

def ensure_namespace(url, name):
    resp = call("POST", url + "/api/v1/namespaces", json={"metadata": {"name": name}})
    assert resp.status_code in (201, 409), describe(resp)


def collection_revision(url, path="/api/v1/pods", consistent=True):
    params = {} if consistent else {"resourceVersion": "0"}
    body = expect(call("GET", url + path, params=params), 200)
    return int(body["metadata"]["resourceVersion"]), body["items"]


# Collections a client writes, listed across all namespaces. Left out, because the leader's
# controllers write them at any moment (so they say nothing about whether a rejected request
# wrote something): events, endpoints, leases, objects owned by a controller (ownerReferences),
# and the status and annotations controllers keep on deployments (only a deployment's uid,
# generation, labels and spec are compared).
SNAPSHOT_COLLECTIONS = ("/api/v1/namespaces", "/api/v1/nodes", "/api/v1/pods", "/api/v1/services",
                        "/apis/apps/v1/deployments")


def store_snapshot(url):
    """{(collection, namespace, name): version} of the client-written objects, read
    linearizably from one replica."""
    out = {}
    for path in SNAPSHOT_COLLECTIONS:
        _, items = collection_revision(url, path)
        for obj in items:
            meta = obj["metadata"]
            if meta.get("ownerReferences"):
                continue
            if path.endswith("/deployments"):
                version = (meta.get("uid"), meta.get("generation"), json.dumps(meta.get("labels"), sort_keys=True),
                           json.dumps(obj.get("spec"), sort_keys=True))
            else:
                version = (meta.get("uid"), meta.get("resourceVersion"))
            out[(path, meta.get("namespace"), meta["name"])] = version
    return out


def assert_unchanged(before, after):
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    assert not (added or removed or changed), "a rejected request changed the store: added %s, removed %s, " \
        "changed %s" % (added[:5], removed[:5], changed[:5])


def write_with_retry(method, urls, path, deadline_s=10.0, attempt_timeout=5.0, **kwargs):
    """One logical write, retried on 503 / connection errors with one Idempotency-Key,
    rotating over `urls`. Returns (response, seconds until it answered non-503)."""
    headers = dict(kwargs.pop("headers", {}) or {})
    headers.setdefault("Idempotency-Key", uuid.uuid4().hex)
    start = time.monotonic()
    deadline = start + deadline_s
    attempt = 0
    last = None
    while time.monotonic() < deadline:
        url = urls[attempt % len(urls)]
        attempt += 1
        try:
            resp = call(method, url + path, timeout=attempt_timeout, headers=headers, **kwargs)
        except requests.RequestException as exc:
            last = exc
            time.sleep(0.02)
            continue
        if resp.status_code != 503:
            return resp, time.monotonic() - start
        last = resp
        time.sleep(0.02)
    raise AssertionError("write %s %s never answered within %.0fs; last: %s"
                         % (method, path, deadline_s, describe(last) if hasattr(last, "request") else last))


# ---------------------------------------------------------------- watches

class Watch:
    """A watch stream read on a background thread; events land in `events`.

    The server ends the stream after `timeout` s at the latest (timeoutSeconds), and
    the client gives up reading after the same time plus a margin, so the thread
    never outlives the test by much.
    """

    def __init__(self, url, path, resource_version=None, timeout=60, params=None):
        self.url = url + path
        self.params = dict(params or {}, watch="1", timeoutSeconds=str(timeout))
        if resource_version is not None:
            self.params["resourceVersion"] = str(resource_version)
        self.timeout = timeout
        self.events = []
        self.status_code = None
        self.error = None
        self.resp = None
        self.ended = threading.Event()
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            self.resp = requests.get(self.url, params=self.params, stream=True, timeout=(3, self.timeout + 10))
            self.status_code = self.resp.status_code
            if self.resp.status_code != 200:
                self.error = "HTTP %d: %s" % (self.resp.status_code, self.resp.text[:300])
                return
            for line in self.resp.iter_lines():
                if not line.strip():
                    continue
                event = strict_json(line)
                with self._cond:
                    self.events.append(event)
                    self._cond.notify_all()
        except Exception as exc:   # connection reset by a killed replica, read timeout, bad JSON
            self.error = exc
        finally:
            self.ended.set()
            with self._cond:
                self._cond.notify_all()

    def wait_for(self, predicate, timeout):
        """Wait until predicate(events) is true; returns it (False on timeout or stream end)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if predicate(self.events):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.ended.is_set():
                    return predicate(self.events)
                self._cond.wait(min(remaining, 0.2))

    def changes(self):
        """The events that are not bookmarks."""
        with self._cond:
            return [e for e in self.events if e.get("type") != "BOOKMARK"]

    def close(self):
        resp = self.resp
        if resp is not None:
            # Wake the reader thread at once: close() alone does not interrupt a blocked recv, and
            # an idle watch only sends a newline every 5 s.
            for path in (("_fp", "fp", "raw", "_sock"), ("_connection", "sock")):
                try:
                    sock = resp.raw
                    for attr in path:
                        sock = getattr(sock, attr)
                    sock.shutdown(socket.SHUT_RDWR)
                except Exception:
                    pass
            try:
                resp.close()
            except Exception:
                pass
        self._thread.join(2.0)


def rv_of(event_or_obj):
    obj = event_or_obj.get("object", event_or_obj)
    return int(obj["metadata"]["resourceVersion"])


