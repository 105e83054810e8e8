"""Probes (agent/probes.py): exec through a fake runtime, httpGet and tcpSocket against
servers this test starts on 127.0.0.1, and ProbeState's schedule and thresholds on a
fake clock."""
import http.server
import socket
import threading
import time

import pytest

from agent.probes import ProbeState, resolve_port, run_probe
from tests.waiting import wait_for

LOCAL = "127.0.0.1"


class FakeRuntime:
    def __init__(self, results=None):
        self.results = results or {}
        self.calls = []

    def exec(self, container_id, command, timeout):
        self.calls.append((container_id, command, timeout))
        result = self.results.get(tuple(command), (0, b""))
        if isinstance(result, Exception):
            raise result
        return result


# ---------------------------------------------------------------- exec

def test_exec_ok_iff_exit_code_zero():
    rt = FakeRuntime({("cat", "/tmp/healthy"): (0, b"fine\n"), ("false",): (1, b"no such file\n")})
    ok, msg = run_probe({"exec": {"command": ["cat", "/tmp/healthy"]}, "timeoutSeconds": 3}, rt, "10.0.0.5", "c1")
    assert ok is True and "fine" in msg
    assert rt.calls[-1] == ("c1", ["cat", "/tmp/healthy"], 3)
    ok, msg = run_probe({"exec": {"command": ["false"]}}, rt, "10.0.0.5", "c1")
    assert ok is False
    assert "exited with code 1" in msg and "no such file" in msg
    assert rt.calls[-1][2] == 1    # default timeoutSeconds


def test_exec_errors_are_failures_not_exceptions():
    rt = FakeRuntime({("boom",): RuntimeError("container c1 is not running"), ("slow",): (None, b""),
                      ("hang",): TimeoutError("exec did not finish")})
    ok, msg = run_probe({"exec": {"command": ["boom"]}}, rt, None, "c1")
    assert ok is False and "not running" in msg
    ok, msg = run_probe({"exec": {"command": ["slow"]}, "timeoutSeconds": 2}, rt, None, "c1")
    assert ok is False and "timed out after 2s" in msg
    ok, msg = run_probe({"exec": {"command": ["hang"]}, "timeoutSeconds": 1}, rt, None, "c1")
    assert ok is False and "timed out after 1s" in msg
    ok, msg = run_probe({"exec": {"command": ["x"]}}, rt, None, None)
    assert ok is False and "not running" in msg


def test_exec_output_is_trimmed_in_messages():
    rt = FakeRuntime({("spam",): (2, b"x" * 5000)})
    ok, msg = run_probe({"exec": {"command": ["spam"]}}, rt, None, "c1")
    assert ok is False and len(msg) < 300


# ---------------------------------------------------------------- httpGet

class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.seen.append((self.path, dict(self.headers)))
        if self.path.startswith("/slow"):
            time.sleep(2)
        code = {"/ok": 200, "/redirect": 302, "/missing": 404, "/error": 500}.get(self.path.split("?")[0], 200)
        body = b"server says %d" % code
        self.send_response(code)
        if code == 302:
            self.send_header("Location", "/elsewhere")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass     # the timeout test hangs up on /slow: not an error worth printing


@pytest.fixture
def http_server():
    server = _Server((LOCAL, 0), _Handler)
    server.daemon_threads = True
    server.seen = []
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield server
    server.shutdown()
    server.server_close()


def free_port():
    with socket.socket() as s:
        s.bind((LOCAL, 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("path,expected", [("/ok", True), ("/redirect", True), ("/missing", False),
                                           ("/error", False)])
def test_http_get_ok_iff_status_200_to_399(http_server, path, expected):
    port = http_server.server_address[1]
    ok, msg = run_probe({"httpGet": {"path": path, "port": port}}, None, LOCAL, "c1")
    assert ok is expected, msg
    if not expected:
        assert "HTTP status" in msg and "server says" in msg


def test_http_get_sends_headers_and_resolves_named_ports(http_server):
    port = http_server.server_address[1]
    container = {"name": "web", "ports": [{"name": "http", "containerPort": port}]}
    spec = {"httpGet": {"path": "/ok", "port": "http", "httpHeaders": [{"name": "X-Probe", "value": "yes"}]}}
    ok, msg = run_probe(spec, None, LOCAL, "c1", container=container)
    assert ok, msg
    path, headers = http_server.seen[-1]
    assert path == "/ok" and headers.get("X-Probe") == "yes" and "shepherd-probe" in headers.get("User-Agent")
    # a resolver callable is tried first
    ok, _ = run_probe({"httpGet": {"path": "/ok", "port": "web"}}, None, LOCAL, "c1",
                      resolver=lambda name: port if name == "web" else None)
    assert ok
    ok, msg = run_probe({"httpGet": {"path": "/ok", "port": "nope"}}, None, LOCAL, "c1", container=container)
    assert not ok and "no port named 'nope'" in msg


def test_http_get_uses_the_host_field_and_the_timeout(http_server):
    port = http_server.server_address[1]
    ok, msg = run_probe({"httpGet": {"host": LOCAL, "path": "/ok", "port": port}}, None, None, "c1")
    assert ok, msg
    t0 = time.monotonic()
    ok, msg = run_probe({"httpGet": {"path": "/slow", "port": port}, "timeoutSeconds": 1}, None, LOCAL, "c1")
    assert not ok and "timed out" in msg
    assert time.monotonic() - t0 < 1.9


def test_http_get_connection_refused_and_no_ip():
    ok, msg = run_probe({"httpGet": {"path": "/", "port": free_port()}}, None, LOCAL, "c1")
    assert not ok and "refused" in msg.lower()
    ok, msg = run_probe({"httpGet": {"path": "/", "port": 80}}, None, None, "c1")
    assert not ok and "no IP" in msg
    ok, msg = run_probe({"httpGet": {"path": "/", "port": 80, "scheme": "GOPHER"}}, None, LOCAL, "c1")
    assert not ok and "scheme" in msg


# ---------------------------------------------------------------- tcpSocket

def test_tcp_socket_connects_or_fails():
    listener = socket.socket()
    listener.bind((LOCAL, 0))
    listener.listen(8)
    try:
        port = listener.getsockname()[1]
        ok, msg = run_probe({"tcpSocket": {"port": port}}, None, LOCAL, "c1")
        assert ok, msg
        ok, msg = run_probe({"tcpSocket": {"port": str(port)}}, None, LOCAL, "c1")
        assert ok, msg
    finally:
        listener.close()
    ok, msg = run_probe({"tcpSocket": {"port": port}}, None, LOCAL, "c1")
    assert not ok and "connect to 127.0.0.1:%d" % port in msg


# ---------------------------------------------------------------- never raises

@pytest.mark.parametrize("spec", [None, {}, {"exec": "ls"}, {"exec": {"command": []}},
                                  {"httpGet": {"port": None}}, {"httpGet": {"port": 70000}},
                                  {"tcpSocket": {"port": True}}, {"tcpSocket": {}}, {"grpc": {"port": 1}},
                                  {"httpGet": {"port": 80, "path": 5}}, {"exec": {"command": ["x"]},
                                                                         "timeoutSeconds": "soon"}])
def test_bad_specs_are_failures_not_exceptions(spec):
    class Exploding:
        def exec(self, *a):
            raise TypeError("bad")
    ok, msg = run_probe(spec, Exploding(), LOCAL, "c1")
    assert ok is False and isinstance(msg, str) and msg


def test_resolve_port():
    assert resolve_port(8080) == 8080 and resolve_port("8080") == 8080
    assert resolve_port("http", {"ports": [{"name": "http", "containerPort": 80}]}) == 80
    for bad in (0, 65536, "", None, 1.5):
        with pytest.raises(ValueError):
            resolve_port(bad)


# ---------------------------------------------------------------- ProbeState

def test_initial_results():
    assert ProbeState({}, "liveness").result is True
    assert ProbeState({}, "readiness").result is False
    with pytest.raises(ValueError):
        ProbeState({}, "sideways")


def test_nothing_is_due_before_start_and_initial_delay():
    s = ProbeState({"initialDelaySeconds": 5, "periodSeconds": 2}, "readiness")
    assert not s.due(0) and not s.due(1000)
    s.start(100.0)
    assert not s.due(104.9)
    assert s.due(105.0)
    assert s.seconds_until_due(103.0) == pytest.approx(2.0)


def test_period_schedule_drops_missed_ticks():
    s = ProbeState({"periodSeconds": 10}, "liveness")
    s.start(0.0)
    assert s.due(0.0)
    s.record(True, "", 0.5)          # the run took 0.5 s: the next tick is still at 10
    assert not s.due(9.9) and s.due(10.0)
    s.record(True, "", 35.0)          # the agent stalled: ticks 10..30 are dropped, next at 40
    assert not s.due(39.9) and s.due(40.0)


def test_readiness_thresholds():
    s = ProbeState({"periodSeconds": 1, "successThreshold": 2, "failureThreshold": 3}, "readiness")
    s.start(0)
    assert s.record(True, "ok", 0) is False and s.result is False      # 1 of 2 successes
    assert s.record(True, "ok", 1) is True and s.result is True        # flipped to ready
    assert s.record(False, "HTTP status 500", 2) is False and s.result is True
    assert s.record(False, "HTTP status 500", 3) is False
    assert s.record(True, "ok", 4) is False                            # failures reset
    for t in (5, 6):
        assert s.record(False, "refused", t) is False
    assert s.record(False, "refused", 7) is True and s.result is False  # third in a row
    assert s.message == "refused"
    assert s.record(True, "ok", 8) is False and s.record(False, "x", 9) is False
    assert s.record(True, "ok", 10) is False and s.record(True, "ok", 11) is True  # successes reset too


def test_liveness_flips_after_failure_threshold_and_start_resets():
    s = ProbeState({"periodSeconds": 10, "failureThreshold": 2, "initialDelaySeconds": 3}, "liveness")
    s.start(0)
    assert s.record(False, "exit 1", 3) is False and s.result is True
    assert s.record(False, "exit 1", 13) is True and s.result is False
    s.start(20)                                   # restarted container: fresh state, delay again
    assert s.result is True and s.failures == 0 and not s.due(22.9) and s.due(23)


def test_check_runs_only_when_due_and_records():
    rt = FakeRuntime({("false",): (1, b"")})
    s = ProbeState({"exec": {"command": ["false"]}, "periodSeconds": 1, "failureThreshold": 1}, "liveness")
    assert s.check(rt, None, "c1", now=0) == (False, False)       # not started
    s.start(0)
    assert s.check(rt, None, "c1", now=0) == (True, True)
    assert s.result is False and "exited with code 1" in s.message
    assert s.check(rt, None, "c1", now=0.5) == (False, False)
    assert len(rt.calls) == 1


def test_defaults_for_missing_or_bad_fields():
    s = ProbeState({"periodSeconds": "often", "failureThreshold": None}, "readiness")
    assert (s.period, s.failure_threshold, s.success_threshold, s.initial_delay, s.timeout) == (10, 3, 1, 0, 1)


# ---------------------------------------------------------------- the prober before the pod has an address

def test_a_network_probe_waits_for_the_pod_ip_without_an_unhealthy_event(http_server):
    """Before the pod has its address an httpGet probe is not run (nor failed, nor reported):
    each pod start emitted 'Readiness probe failed: ... no IP address yet' (a review)."""
    import types

    from agent.probes import needs_pod_ip
    from agent.prober import Prober

    class Events:
        def __init__(self):
            self.emitted = []

        def emit(self, pod, reason, message, type_, container):
            self.emitted.append((reason, message))

    class Table:
        queue = types.SimpleNamespace(add=lambda uid: None)
        pods = []

        def snapshot(self):
            return list(self.pods)

    spec = {"httpGet": {"path": "/ok", "port": http_server.server_address[1]}, "failureThreshold": 1,
            "periodSeconds": 1}
    assert needs_pod_ip(spec) and not needs_pod_ip({"exec": {"command": ["true"]}})
    assert not needs_pod_ip({"httpGet": {"host": LOCAL, "port": 80}})
    events, stop, table = Events(), threading.Event(), Table()
    prober = Prober(table, events, types.SimpleNamespace(simulated=False), stop, workers=1)
    try:
        probe = prober.state_for(spec, "readiness")
        cs = types.SimpleNamespace(name="c", probe_instance="cid", readiness=probe, liveness=None,
                                   instance=types.SimpleNamespace(running=True, id="cid"))
        pod_state = types.SimpleNamespace(pod={"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}},
                                          pod_ip="", key="default/p", uid="u", removed=False, terminal=False,
                                          containers={"c": cs})
        table.pods.append(pod_state)
        submitted = []
        real_submit = prober._pool.submit
        prober._pool.submit = lambda *a: submitted.append(a) or real_submit(*a)
        for tick in range(3):
            prober.tick(time.monotonic() + 2 * tick)
        # Not handed to the pool at all (each tick would have, 10 times a second), nor failed.
        assert submitted == [] and events.emitted == [] and probe.result is False
        pod_state.pod_ip = LOCAL
        prober.tick(time.monotonic() + 10)
        wait_for("the probe run once the pod has its address", lambda: probe.result is True, 10)
        assert len(submitted) == 1 and events.emitted == []
    finally:
        stop.set()
