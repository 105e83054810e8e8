"""The agent's log server (agent/log_server.py) against a fake runtime, over real HTTP
on 127.0.0.1."""
import queue
import threading
import time

import pytest
import requests

from agent.log_server import LogServer
from shepherd_ha.model.times import parse_datetime

NODE = "n1"


def labels(pod, container, node=NODE, namespace="default", uid="uid-1", restart=0):
    return {"shepherd.io/node": node, "shepherd.io/pod-namespace": namespace, "shepherd.io/pod-name": pod,
            "shepherd.io/container-name": container, "shepherd.io/pod-uid": uid,
            "shepherd.io/restart-count": str(restart)}


class FakeRuntime:
    """list_containers + logs(id, tail, follow); follow streams block until emit() or end()."""

    def __init__(self):
        self.containers = []
        self.output = {}
        self.feeds = {}
        self.opened = []
        self.lock = threading.Lock()

    def add(self, cid, lines, **kw):
        self.containers.append({"id": cid, "labels": labels(**kw)})
        self.output[cid] = list(lines)

    def list_containers(self, labels=None):
        return [c for c in self.containers
                if all(c["labels"].get(k) == v for k, v in (labels or {}).items())]

    def emit(self, cid, line):
        with self.lock:
            self.output[cid].append(line)
            for feed in self.feeds.get(cid, []):
                feed.put(line)

    def end(self, cid):
        with self.lock:
            for feed in self.feeds.get(cid, []):
                feed.put(None)

    def logs(self, container_id, tail=None, follow=False):
        self.opened.append((container_id, tail, follow))
        with self.lock:
            lines = list(self.output[container_id])
            feed = queue.Queue()
            if follow:
                self.feeds.setdefault(container_id, []).append(feed)
        if tail is not None:
            lines = lines[-tail:] if tail else []

        def gen():
            yield from lines
            if not follow:
                return
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    item = feed.get(timeout=0.1)
                except queue.Empty:
                    continue
                if item is None:
                    return
                yield item
        return gen()


class StampingRuntime(FakeRuntime):
    def logs(self, container_id, tail=None, follow=False, timestamps=False, since=None):
        self.last_since = since
        it = super().logs(container_id, tail, follow)
        if not timestamps:
            return it
        return (b"2026-11-29T17:00:00.000000001Z " + line for line in it)


@pytest.fixture
def runtime():
    rt = FakeRuntime()
    rt.add("c-old", [b"old 1\n", b"old 2\n"], pod="web", container="app", restart=0)
    rt.add("c-new", [b"line %d\n" % i for i in range(1, 6)], pod="web", container="app", restart=1)
    rt.add("c-side", [b"side\n"], pod="web", container="sidecar")
    rt.add("c-elsewhere", [b"not mine\n"], pod="other", container="app", node="n2")
    return rt


@pytest.fixture
def server(runtime):
    s = LogServer(runtime, NODE, port=0, threads=4).start()
    yield s
    s.stop()


def url(server, path):
    return "http://127.0.0.1:%d%s" % (server.port, path)


def get(server, path, **kw):
    kw.setdefault("timeout", 10)
    return requests.get(url(server, path), **kw)


def test_start_binds_a_free_port_and_answers_healthz(server):
    assert isinstance(server.port, int) and server.port > 0
    r = get(server, "/healthz")
    assert r.status_code == 200 and r.text.strip() == "ok"


def test_logs_of_the_newest_container(server):
    r = get(server, "/containerLogs/default/web/app")
    assert r.status_code == 200, r.text
    assert r.text == "".join("line %d\n" % i for i in range(1, 6))
    assert r.headers["Content-Type"].startswith("text/plain")
    assert r.headers["Shepherd-Container-ID"] == "c-new"


def test_tail_lines(server, runtime):
    assert get(server, "/containerLogs/default/web/app?tailLines=2").text == "line 4\nline 5\n"
    assert get(server, "/containerLogs/default/web/app?tailLines=0").text == ""
    assert runtime.opened[-1] == ("c-new", 0, False)


def test_previous_gives_the_container_before(server):
    assert get(server, "/containerLogs/default/web/app?previous=true").text == "old 1\nold 2\n"
    r = get(server, "/containerLogs/default/web/sidecar?previous=true")
    assert r.status_code == 404
    assert "previous terminated container 'sidecar'" in r.json()["message"]


def test_pod_uid_restricts_to_that_pod(server, runtime):
    runtime.add("c-recreated", [b"recreated\n"], pod="web", container="app", uid="uid-2", restart=0)
    assert get(server, "/containerLogs/default/web/app?podUID=uid-2").text == "recreated\n"
    assert get(server, "/containerLogs/default/web/app?podUID=uid-1").text.startswith("line 1")
    assert get(server, "/containerLogs/default/web/app?podUID=uid-9").status_code == 404


@pytest.mark.parametrize("path", ["/containerLogs/default/nope/app", "/containerLogs/default/web/nope",
                                  "/containerLogs/other-ns/web/app",
                                  "/containerLogs/default/other/app"])  # other's container is node n2's
def test_unknown_pod_or_container_is_a_404_status(server, path):
    r = get(server, path)
    assert r.status_code == 404
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == 404 and body["reason"] == "NotFound"
    assert "not found on node n1" in body["message"]
    assert "not mine" not in r.text


def test_bad_parameters_are_400(server):
    for query in ("tailLines=-1", "tailLines=abc", "sinceTime=yesterday"):
        r = get(server, "/containerLogs/default/web/app?" + query)
        assert r.status_code == 400, query
        assert r.json()["kind"] == "Status"


def test_unknown_path_is_a_404_status(server):
    r = get(server, "/pods")
    assert r.status_code == 404 and "containerLogs" in r.json()["message"]


def read_lines(resp, n):
    """The next n lines of a streamed response (each read bounded by the socket timeout)."""
    it = getattr(resp, "_lines", None)
    if it is None:
        it = resp._lines = resp.iter_lines(chunk_size=1)
    return [next(it).decode() for _ in range(n)]


def test_follow_streams_new_lines_to_several_followers(server, runtime):
    followers = []
    try:
        for _ in range(3):
            t0 = time.monotonic()
            r = get(server, "/containerLogs/default/web/app?follow=true&tailLines=1", stream=True,
                    timeout=(5, 5))
            # the headers come at once, before any new line
            assert r.status_code == 200 and time.monotonic() - t0 < 2
            followers.append(r)
        for r in followers:
            assert read_lines(r, 1) == ["line 5"]
        runtime.emit("c-new", b"line 6\n")
        runtime.emit("c-new", b"line 7\n")
        for r in followers:
            assert read_lines(r, 2) == ["line 6", "line 7"]
        runtime.end("c-new")       # the container exited: the streams end
        for r in followers:
            assert list(r._lines) == []
    finally:
        for r in followers:
            r.close()


def test_a_follower_that_leaves_frees_its_thread(runtime):
    # 2 threads: two idle followers hold both; once they leave, others are served again.
    server = LogServer(runtime, NODE, threads=2).start()
    try:
        followers = [get(server, "/containerLogs/default/web/app?follow=true&tailLines=0", stream=True)
                     for _ in range(2)]
        assert all(r.status_code == 200 for r in followers)
        for r in followers:
            r.close()
        t0 = time.monotonic()
        r = get(server, "/containerLogs/default/web/sidecar", timeout=10)
        assert r.status_code == 200 and r.text == "side\n"
        assert time.monotonic() - t0 < 5
    finally:
        server.stop()


def test_stop_ends_open_streams(runtime):
    server = LogServer(runtime, NODE).start()
    r = get(server, "/containerLogs/default/web/app?follow=true", stream=True, timeout=(5, 10))
    assert read_lines(r, 5)[-1] == "line 5"
    t0 = time.monotonic()
    server.stop()
    assert time.monotonic() - t0 < 6
    with pytest.raises(requests.RequestException):
        # the stream ends (or breaks) instead of hanging
        rest = list(r._lines)
        if rest == []:
            raise requests.ConnectionError("stream ended")
    with pytest.raises(requests.ConnectionError):
        requests.get("http://127.0.0.1:%d/healthz" % server.port, timeout=2)


def test_timestamps_when_the_runtime_supports_them():
    rt = StampingRuntime()
    rt.add("c1", [b"a\n", b"b\n"], pod="web", container="app")
    server = LogServer(rt, NODE).start()
    try:
        r = get(server, "/containerLogs/default/web/app?timestamps=true&sinceTime=2026-11-29T17:00:00.5Z")
        assert r.headers.get("Shepherd-Log-Timestamps") == "true"
        assert r.text.splitlines() == ["2026-11-29T17:00:00.000000001Z a", "2026-11-29T17:00:00.000000001Z b"]
        assert rt.last_since == parse_datetime("2026-11-29T17:00:00.500Z")
        # a runtime without timestamps: plain lines and no header
        plain = get(server, "/containerLogs/default/web/app")
        assert "Shepherd-Log-Timestamps" not in plain.headers and plain.text == "a\nb\n"
    finally:
        server.stop()


def test_runtime_without_timestamps_ignores_them(server):
    r = get(server, "/containerLogs/default/web/sidecar?timestamps=true")
    assert r.status_code == 200 and r.text == "side\n"
    assert "Shepherd-Log-Timestamps" not in r.headers


def test_find_container_fallback_when_the_runtime_cannot_list():
    class Finder:
        def find_container(self, namespace, pod, container):
            if (namespace, pod, container) == ("default", "web", "app"):
                return {"id": "c9", "labels": labels("web", "app")}
            return None

        def logs(self, container_id, tail=None, follow=False):
            return iter([b"from %s\n" % container_id.encode()])

    server = LogServer(Finder(), NODE).start()
    try:
        assert get(server, "/containerLogs/default/web/app").text == "from c9\n"
        assert get(server, "/containerLogs/default/web/x").status_code == 404
    finally:
        server.stop()


def test_a_runtime_error_is_a_status_not_a_crash():
    class Broken(FakeRuntime):
        def logs(self, container_id, tail=None, follow=False):
            raise RuntimeError("container c-new was removed")

    rt = Broken()
    rt.add("c-new", [], pod="web", container="app")
    server = LogServer(rt, NODE).start()
    try:
        r = get(server, "/containerLogs/default/web/app")
        assert r.status_code == 404 and "was removed" in r.json()["message"]
    finally:
        server.stop()


def test_a_broken_runtime_stream_breaks_the_response_instead_of_ending_it():
    class Breaking(FakeRuntime):
        def logs(self, container_id, tail=None, follow=False):
            def gen():
                yield b"first\n"
                raise ConnectionResetError("docker engine went away")
            return gen()

    rt = Breaking()
    rt.add("c1", [], pod="web", container="app")
    server = LogServer(rt, NODE).start()
    try:
        r = get(server, "/containerLogs/default/web/app?follow=true", stream=True)
        assert r.status_code == 200
        got = []
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            for chunk in r.iter_content(chunk_size=None):
                got.append(chunk)
        assert b"".join(got) == b"first\n"       # what came before the break was delivered
    finally:
        server.stop()


def test_with_access_a_grant_for_this_very_container_is_needed(runtime):
    from agent.log_access import CannotCheck, LogAccess
    from shepherd_ha.api.replica_credentials import ReplicaCredentials
    ours = ReplicaCredentials("correct-horse-battery-staple-42", "00" * 16)
    theirs = ReplicaCredentials("correct-horse-battery-staple-42", "11" * 16)    # another cluster
    reachable = [True]

    def fetch_key():
        if not reachable[0]:
            raise CannotCheck("no replica reachable")
        return ours.log_grant_key
    access = LogAccess([], NODE, "node-token", fetch_key=lambda: fetch_key())
    server = LogServer(runtime, NODE, access=access).start()

    def grant(creds=ours, node=NODE, container="app"):
        return {"Authorization": creds.log_grant(node, "default", "web", container, "")}
    try:
        assert get(server, "/healthz").status_code == 200            # probes need no grant
        r = get(server, "/containerLogs/default/web/app")
        assert r.status_code == 401 and r.json()["reason"] == "Unauthorized" and "log grant" in r.json()["message"]
        r = get(server, "/containerLogs/default/a..b/app", headers=grant())
        assert r.status_code == 400
        for headers, why in ((grant(theirs), "not signed by this cluster"), (grant(node="other-node"), "node"),
                             (grant(container="sidecar"), "container"), ({"Authorization": "Bearer admin"},
                                                                         "no log grant")):
            r = get(server, "/containerLogs/default/web/app", headers=headers)
            assert r.status_code == 403 and why in r.json()["message"], (why, r.text)
        r = get(server, "/containerLogs/default/web/app", headers=grant())
        assert r.status_code == 200 and r.text.startswith("line 1\n")
        reachable[0] = False             # the key is kept: logs stay readable without the API
        r = get(server, "/containerLogs/default/web/app", headers=grant())
        assert r.status_code == 200
    finally:
        server.stop()
    cold = LogServer(runtime, NODE, access=LogAccess([], NODE, "t", fetch_key=lambda: fetch_key())).start()
    try:
        r = get(cold, "/containerLogs/default/web/app", headers=grant())
        assert r.status_code == 503 and "cannot check log grants" in r.json()["message"]
    finally:
        cold.stop()
