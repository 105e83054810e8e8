"""sheepctl logs, top nodes and describe node.

All against the real API app over the in-memory store (tests/unit/real_api.py, two
replicas of one store on 127.0.0.1); logs proxy to a real agent log server over a fake
runtime that stamps lines like Docker.
"""
import io
import re
import socket
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest

from agent.log_server import LogServer
from ctl.commands.logs import stream_logs, ts_key
from ctl_kit import run_ctl
from shepherd_ha.client import Client
from test_agent_log_server import FakeRuntime
from test_api_pod_logs import node, pod


pytestmark = pytest.mark.usefixtures("ctl_isolated")      # conftest.py


class StampedRuntime(FakeRuntime):
    """Lines get a nanosecond timestamp when written (several may share one, as in
    Docker); `since` is honoured to the whole second, as Docker does."""

    def __init__(self):
        super().__init__()
        self.stamps = {}
        self.tick = 0
        self.base = datetime(2026, 11, 29, 17, 0, 0, tzinfo=timezone.utc)

    def _stamp(self):
        self.tick += 1
        t = self.base + timedelta(milliseconds=250 * (self.tick // 2))   # pairs share a timestamp
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%09d" % (t.microsecond * 1000) + "Z"

    def add(self, cid, lines, **kw):
        super().add(cid, [], **kw)
        for line in lines:
            self.emit(cid, line)

    def emit(self, cid, line):
        with self.lock:
            stamped = (self._stamp(), line)
            self.output[cid].append(stamped)
            for feed in self.feeds.get(cid, []):
                feed.put(stamped)

    def logs(self, container_id, tail=None, follow=False, timestamps=False, since=None):
        inner = super().logs(container_id, tail, follow)

        def gen():
            for ts, line in inner:
                if since is not None:
                    whole = datetime.fromisoformat(ts[:19] + "+00:00")
                    if whole < since.replace(microsecond=0):
                        continue
                yield (ts.encode() + b" " + line) if timestamps else line
        return gen()


@pytest.fixture
def runtime():
    rt = StampedRuntime()
    rt.add("c-web", [b"hello %d\n" % i for i in range(1, 6)], pod="web", container="app")
    rt.add("c-multi-app", [b"app line\n"], pod="multi", container="app")
    rt.add("c-multi-side", [b"side line\n"], pod="multi", container="side")
    return rt


@pytest.fixture
def agent(runtime):
    s = LogServer(runtime, "n1").start()
    yield s
    s.stop()


@pytest.fixture
def apis(replicas, store, agent):
    """Two replicas of one store that knows node n1 (its agent) and pods web and multi."""
    store.put("nodes", node("n1", port=agent.port))
    store.put("pods", pod("web"))
    store.put("pods", pod("multi", containers=("app", "side")))
    return [replicas(), replicas()]


class Out:
    """A thread-safe text sink for stream_logs."""

    def __init__(self):
        self.parts = []
        self.lock = threading.Lock()

    def write(self, text):
        with self.lock:
            self.parts.append(text)

    def flush(self):
        pass

    @property
    def text(self):
        with self.lock:
            return "".join(self.parts)

    def wait_for(self, fragment, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if fragment in self.text:
                return True
            time.sleep(0.02)
        raise AssertionError("%r not printed within %ss; printed: %r" % (fragment, timeout, self.text))


# ---------------------------------------------------------------- logs

def test_logs_prints_the_output_without_timestamps(apis, capsys):
    rc, out, err = run_ctl(apis, capsys, "logs", "web")
    assert (rc, err) == (0, "")
    assert out == "".join("hello %d\n" % i for i in range(1, 6))


def test_logs_tail_container_and_timestamps(apis, capsys):
    assert run_ctl(apis, capsys, "logs", "web", "--tail", "2")[1] == "hello 4\nhello 5\n"
    assert run_ctl(apis, capsys, "logs", "pod/web", "--tail", "0")[1] == ""
    assert run_ctl(apis, capsys, "logs", "multi", "-c", "side")[1] == "side line\n"
    rc, out, _ = run_ctl(apis, capsys, "logs", "web", "--tail", "1", "--timestamps")
    assert rc == 0 and re.match(r"^2026-11-29T17:00:\d\d\.\d{9}Z hello 5\n$", out), out


def test_logs_errors_are_printed_not_raised(apis, capsys):
    rc, out, err = run_ctl(apis, capsys, "logs", "multi")
    assert rc == 1 and out == ""
    assert "Error from server (BadRequest): a container name must be specified" in err and "app, side" in err
    rc, _, err = run_ctl(apis, capsys, "logs", "ghost")
    assert rc == 1 and "NotFound" in err and "ghost" in err
    rc, _, err = run_ctl(apis, capsys, "logs", "deployment/web")
    assert rc == 1 and "logs takes a pod" in err


def test_logs_follow_prints_new_lines_until_the_container_stops(apis, runtime):
    client = Client([a.url for a in apis])
    out = Out()
    done = threading.Event()

    def follow():
        try:
            stream_logs(client, "default", "web", out, follow=True, tail=1)
        finally:
            done.set()
    threading.Thread(target=follow, daemon=True).start()
    out.wait_for("hello 5\n")
    runtime.emit("c-web", b"hello 6\n")
    out.wait_for("hello 6\n")
    assert not done.is_set()
    runtime.end("c-web")
    assert done.wait(10)
    assert out.text == "hello 5\nhello 6\n"
    client.close()


def test_follow_resumes_on_another_replica_without_repeating_lines(apis, runtime):
    client = Client([a.url for a in apis])
    out, err = Out(), io.StringIO()
    done = threading.Event()

    def follow():
        try:
            stream_logs(client, "default", "web", out, follow=True, err=err)
        finally:
            done.set()
    threading.Thread(target=follow, daemon=True).start()
    out.wait_for("hello 5\n")
    runtime.emit("c-web", b"hello 6\n")      # shares its timestamp with hello 5... or 7
    out.wait_for("hello 6\n")
    assert client.last_server == apis[0].url
    apis[0].stop()                           # the proxying replica dies mid-stream
    for i in range(7, 11):
        runtime.emit("c-web", b"hello %d\n" % i)
    out.wait_for("hello 10\n")
    runtime.end("c-web")
    assert done.wait(10)
    assert out.text == "".join("hello %d\n" % i for i in range(1, 11))
    assert "resuming" in err.getvalue()
    assert client.last_server == apis[1].url
    client.close()


def test_follow_goes_on_across_an_agent_restart(apis, runtime, agent):
    client = Client([a.url for a in apis])
    out, err = Out(), io.StringIO()
    done = threading.Event()

    def follow():
        try:
            stream_logs(client, "default", "web", out, follow=True, err=err)
        finally:
            done.set()
    threading.Thread(target=follow, daemon=True).start()
    out.wait_for("hello 5\n")
    agent.stop()                                  # the agent restarts: same node, same port
    runtime.emit("c-web", b"hello 6\n")           # written while it is down
    time.sleep(0.5)
    again = LogServer(runtime, "n1", port=agent.port).start()
    try:
        runtime.emit("c-web", b"hello 7\n")
        out.wait_for("hello 7\n")
        runtime.end("c-web")
        assert done.wait(10)
        assert out.text == "".join("hello %d\n" % i for i in range(1, 8))
        assert "resuming" in err.getvalue()
    finally:
        again.stop()
        client.close()


class FrozenReplica:
    """A replica that starts a log stream and then freezes (as under SIGSTOP): the
    connection stays open, nothing more comes, /healthz never answers."""

    def __init__(self, first_line):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.first_line = first_line
        self.conns = []
        self.closed = False
        self.answered = False
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            request = b""
            conn.settimeout(5)
            try:
                while b"\r\n\r\n" not in request:
                    request += conn.recv(4096)
            except OSError:
                continue
            if b"/log" in request.split(b"\r\n")[0] and not self.answered:
                self.answered = True
                body = self.first_line
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                             b"Shepherd-Log-Timestamps: true\r\n\r\n" + b"%x\r\n%s\r\n" % (len(body), body))
            # /healthz and everything after the freeze: no answer

    def close(self):
        self.closed = True
        self.sock.close()
        for c in self.conns:
            c.close()


def test_follow_leaves_a_frozen_replica(apis, runtime):
    ts = runtime.output["c-web"][0][0]
    frozen = FrozenReplica(ts.encode() + b" hello 1\n")
    client = Client([frozen.url, apis[1].url], timeout=1.0)
    out, err = Out(), io.StringIO()
    done = threading.Event()

    def follow():
        try:
            stream_logs(client, "default", "web", out, follow=True, err=err, idle_check=1.0)
        finally:
            done.set()
    threading.Thread(target=follow, daemon=True).start()
    try:
        out.wait_for("hello 1\n")
        t0 = time.monotonic()
        try:
            out.wait_for("hello 5\n", timeout=15)     # resumed on the live replica
        except AssertionError:
            raise AssertionError("stderr: %r, done: %s" % (err.getvalue(), done.is_set()))
        assert time.monotonic() - t0 < 10
        runtime.end("c-web")
        assert done.wait(10)
        assert out.text == "".join("hello %d\n" % i for i in range(1, 6))
    finally:
        frozen.close()
        client.close()


def test_unreachable_agent_is_reported_quickly(apis, store, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    store.put("nodes", node("n1", port=port))
    t0 = time.monotonic()
    rc, out, err = run_ctl(apis, capsys, "logs", "web")
    assert rc == 1
    assert "the agent of node n1 at 127.0.0.1:%d is unreachable" % port in err
    assert time.monotonic() - t0 < 10


def test_ts_key_orders_nanoseconds():
    assert ts_key("2026-11-29T17:00:00.5Z") == ts_key("2026-11-29T17:00:00.500000000Z")
    assert ts_key("2026-11-29T17:00:00.000000002Z") > ts_key("2026-11-29T17:00:00.000000001Z")
    assert ts_key("2026-11-29T18:00:00+01:00") == ts_key("2026-11-29T17:00:00Z")
    assert ts_key("hello") is None


# ---------------------------------------------------------------- top and describe

@pytest.fixture
def api(replicas):
    return replicas()


def ago(**kw):
    return (datetime.now(timezone.utc) - timedelta(**kw)).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_with_usage(name, cpu=12.5, used=1024 * 2 ** 20, available=3072 * 2 ** 20, sampled=None, capacity="4Gi"):
    return {"metadata": {"name": name, "creationTimestamp": ago(days=1)},
            "status": {"capacity": {"cpu": "2", "memory": capacity, "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "AgentReady"}],
                       "usage": {"cpuPercent": cpu, "memoryUsedBytes": used, "memoryAvailableBytes": available,
                                 "diskUsedBytes": 25 * 2 ** 30, "diskTotalBytes": 100 * 2 ** 30,
                                 "load1": 0.5, "load5": 0.25, "load15": 0.125, "containers": 3,
                                 "timestamp": sampled or ago(minutes=20, seconds=20)}}}


def running(name, node_name, phase="Running"):
    return {"metadata": {"name": name, "namespace": "default", "creationTimestamp": ago(minutes=5)},
            "spec": {"nodeName": node_name, "containers": [{"name": "c"}]},
            "status": {"phase": phase}}


def cells(out):
    return [re.split(r"\s{2,}", line.strip()) for line in out.strip().splitlines()]


def test_top_nodes_table(api, store, capsys):
    store.put("nodes", node_with_usage("n1"))
    store.put("nodes", node_with_usage("n2", cpu=80.4, used=3 * 2 ** 30, capacity="4Gi"))
    store.put("nodes", {"metadata": {"name": "n3"}, "status": {}})
    for p in (running("a", "n1"), running("b", "n2"), running("c", "n2"), running("done", "n2", "Succeeded")):
        store.put("pods", p)
    rc, out, err = run_ctl(api, capsys, "top", "nodes")
    assert rc == 0
    assert cells(out) == [
        ["NAME", "CPU%", "MEMORY(bytes)", "MEMORY%", "DISK%", "LOAD", "PODS", "CONTAINERS", "AGE"],
        ["n1", "12%", "1024Mi", "25%", "25%", "0.50", "1", "3", "20m"],
        ["n2", "80%", "3072Mi", "75%", "25%", "0.50", "2", "3", "20m"],
        ["n3", "<unknown>", "<unknown>", "<unknown>", "<unknown>", "<unknown>", "0", "<unknown>", "<unknown>"]]
    assert "node n3: metrics not available yet" in err
    rc, out, _ = run_ctl(api, capsys, "top", "nodes", "--sort-by", "cpu")
    assert [r[0] for r in cells(out)[1:]] == ["n2", "n1", "n3"]
    rc, out, _ = run_ctl(api, capsys, "top", "nodes", "n1")
    assert [r[0] for r in cells(out)] == ["NAME", "n1"]


def test_top_without_any_usage_and_top_pods(api, store, capsys):
    store.put("nodes", {"metadata": {"name": "n1"}, "status": {}})
    rc, out, err = run_ctl(api, capsys, "top", "nodes")
    assert rc == 1 and "metrics not available yet" in err
    rc, out, err = run_ctl(api, capsys, "top", "pods")       # no pods: PodMetrics of none
    assert rc == 0 and "No resources found in default namespace." in err
    rc, _, err = run_ctl(api, capsys, "top", "deployments")
    assert rc == 1 and "top takes nodes" in err


def test_top_memory_percent_without_capacity_uses_used_plus_available(api, store, capsys):
    n = node_with_usage("n1", used=1 * 2 ** 30, available=1 * 2 ** 30)
    del n["status"]["capacity"]
    store.put("nodes", n)
    rc, out, _ = run_ctl(api, capsys, "top", "nodes")
    assert cells(out)[1][3] == "50%"


def test_describe_node_shows_usage_and_pods(api, store, capsys):
    store.put("nodes", node_with_usage("n1"))
    store.put("nodes", {"metadata": {"name": "n2"}, "status": {}})
    store.put("pods", running("web-1", "n1"))
    store.put("pods", running("old", "n1", "Failed"))
    store.put("pods", running("other", "n2"))
    rc, out, err = run_ctl(api, capsys, "describe", "node", "n1")
    assert rc == 0, err
    assert "Capacity:" in out and "Conditions:" in out
    usage = out[out.index("Usage:"):]
    assert re.search(r"CPU:\s+12\.5%", usage)
    assert re.search(r"Memory:\s+1024Mi used \(25%\), 3072Mi available", usage)
    assert re.search(r"Disk:\s+25% \(25Gi of 100Gi\)", usage)
    assert re.search(r"Load:\s+0\.50 0\.25 0\.12", usage)
    assert re.search(r"Containers:\s+3", usage)
    pods = out[out.index("Non-terminated Pods (1):"):]
    assert "web-1" in pods and "old" not in pods and "other" not in pods
    rc, out, _ = run_ctl(api, capsys, "describe", "node", "n2")
    assert "metrics not available yet" in out and "Non-terminated Pods (1):" in out

