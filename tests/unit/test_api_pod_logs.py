"""The pod `log` subresource of the API (shepherd_ha/api/pod_logs.py), in process: the
real Flask app over a fake replica, served by waitress on 127.0.0.1, proxying to a real
agent log server (agent/log_server.py) over a fake runtime, or to fake agents."""
import http.server
import socket
import threading
import time

import pytest
import requests
import waitress
from waitress import wasyncore

from agent.log_server import LogServer
from shepherd_ha.api.app import create_app
from shepherd_ha.store.raft_node import Unavailable
from test_agent_log_server import FakeRuntime, read_lines

NS = "default"


class FakeReplica:
    """What the API reads: get(resource, namespace, name, consistent) -> (obj, revision)."""
    id = "r1"

    def __init__(self):
        self.objects = {}
        self.no_quorum = False
        self.reads = []

    def put(self, resource, obj):
        meta = obj["metadata"]
        self.objects[(resource, meta.get("namespace"), meta["name"])] = obj

    def get(self, resource, namespace, name, consistent=True):
        self.reads.append((resource, name, consistent))
        if consistent and self.no_quorum:
            raise Unavailable("no quorum: 2 of 3 replicas unreachable", "not-applied")
        return self.objects.get((resource, namespace, name)), 7


class Served:
    """A WSGI app on 127.0.0.1 in a thread (waitress, as the replicas serve it)."""

    def __init__(self, app, threads=8):
        self.server = waitress.create_server(app, host="127.0.0.1", port=0, threads=threads,
                                             channel_request_lookahead=1)
        self.url = "http://127.0.0.1:%d" % int(self.server.effective_port)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()

    def stop(self):
        server, self.server = self.server, None
        if server is None:
            return
        done = threading.Event()

        def close_all():
            for disp in list(server._map.values()):
                if disp is not server.trigger:
                    try:
                        wasyncore.dispatcher.close(server) if disp is server else disp.close()
                    except OSError:
                        pass
            done.set()
        server.trigger.pull_trigger(close_all)
        done.wait(5)
        server.task_dispatcher.shutdown(cancel_pending=True, timeout=5)

        def close_trigger():
            server.trigger._physical_pull = lambda: None
            server.trigger.close()
        server.trigger.pull_trigger(close_trigger)
        self.thread.join(5)


def pod(name, containers=("app",), node="n1", uid="uid-1"):
    spec = {"containers": [{"name": c, "image": "shepherd/busybox:1"} for c in containers]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "uid": uid},
            "spec": spec, "status": {"phase": "Running"}}


def node(name, address="127.0.0.1", port=None):
    status = {"addresses": [{"type": "Hostname", "address": name}]}
    if address is not None:
        status["addresses"].insert(0, {"type": "InternalIP", "address": address})
    if port is not None:
        status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def runtime():
    rt = FakeRuntime()
    rt.add("c-web", [b"hello %d\n" % i for i in range(1, 6)], pod="web", container="app")
    rt.add("c-multi-app", [b"app line\n"], pod="multi", container="app")
    rt.add("c-multi-side", [b"side line\n"], pod="multi", container="side")
    return rt


@pytest.fixture
def agent(runtime):
    s = LogServer(runtime, "n1", threads=4).start()
    yield s
    s.stop()


@pytest.fixture
def replica(agent):
    r = FakeReplica()
    r.put("nodes", node("n1", port=agent.port))
    r.put("pods", pod("web"))
    r.put("pods", pod("multi", containers=("app", "side")))
    return r


@pytest.fixture
def api(replica):
    served = Served(create_app(replica))
    yield served
    served.stop()


def log_url(api, name, **params):
    query = "&".join("%s=%s" % kv for kv in params.items())
    return "%s/api/v1/namespaces/%s/pods/%s/log%s" % (api.url, NS, name, "?" + query if query else "")


def get(url, **kw):
    kw.setdefault("timeout", 10)
    return requests.get(url, **kw)


def assert_status(resp, code, *fragments):
    assert resp.status_code == code, resp.text
    body = resp.json()
    assert body["kind"] == "Status" and body["code"] == code, body
    for f in fragments:
        assert f in body["message"], body["message"]
    return body


# ---------------------------------------------------------------- happy paths

def test_logs_of_a_single_container_pod(api, replica):
    r = get(log_url(api, "web"))
    assert r.status_code == 200, r.text
    assert r.text == "".join("hello %d\n" % i for i in range(1, 6))
    assert r.headers["Shepherd-Node"] == "n1" and r.headers["Shepherd-Container-ID"] == "c-web"
    assert r.headers["Content-Type"].startswith("text/plain")
    assert ("pods", "web", True) in replica.reads       # a linearizable read


def test_tail_lines_and_the_uid_reach_the_agent(api, runtime, replica):
    assert get(log_url(api, "web", tailLines=2)).text == "hello 4\nhello 5\n"
    # a pod recreated under the same name: only the new pod's containers count
    replica.put("pods", pod("web", uid="uid-new"))
    assert_status(get(log_url(api, "web")), 404, "not found on node n1")


def test_a_container_must_be_chosen_when_there_are_several(api):
    assert_status(get(log_url(api, "multi")), 400, "a container name must be specified", "app, side")
    assert get(log_url(api, "multi", container="side")).text == "side line\n"
    assert_status(get(log_url(api, "multi", container="nope")), 400, "'nope' is not valid", "app, side")


def test_follow_streams_through_and_headers_come_first(api, runtime):
    t0 = time.monotonic()
    r = get(log_url(api, "web", follow="true", tailLines=0), stream=True, timeout=(5, 5))
    try:
        assert r.status_code == 200 and time.monotonic() - t0 < 2   # no line yet, the stream is open
        runtime.emit("c-web", b"hello 6\n")
        assert read_lines(r, 1) == ["hello 6"]
        runtime.emit("c-web", b"hello 7\n")
        assert read_lines(r, 1) == ["hello 7"]
        runtime.end("c-web")
        assert list(r._lines) == []
    finally:
        r.close()


def test_a_quiet_follow_outlives_the_read_timeout(api, runtime, monkeypatch):
    import shepherd_ha.api.pod_logs as pod_logs
    monkeypatch.setattr(pod_logs, "READ_TIMEOUT", 0.5)
    r = get(log_url(api, "web", follow="true", tailLines=0), stream=True, timeout=(5, 10))
    try:
        time.sleep(2)              # silence: 4 x the read timeout towards the agent
        runtime.emit("c-web", b"still here\n")
        assert read_lines(r, 1) == ["still here"]
    finally:
        r.close()


def test_followers_that_leave_free_the_replica_and_the_agent(runtime):
    # 2 threads on each side: two idle followers hold them all until they leave
    agent = LogServer(runtime, "n1", threads=2).start()
    replica = FakeReplica()
    replica.put("nodes", node("n1", port=agent.port))
    replica.put("pods", pod("web"))
    api = Served(create_app(replica), threads=2)
    try:
        followers = [get(log_url(api, "web", follow="true", tailLines=0), stream=True) for _ in range(2)]
        assert [f.status_code for f in followers] == [200, 200]
        for f in followers:
            f.close()
        t0 = time.monotonic()
        r = get(log_url(api, "web", tailLines=1))
        assert r.status_code == 200 and r.text == "hello 5\n"
        assert time.monotonic() - t0 < 6
    finally:
        api.stop()
        agent.stop()


def test_an_agent_that_dies_mid_stream_breaks_the_response(runtime):
    agent = LogServer(runtime, "n1").start()
    replica = FakeReplica()
    replica.put("nodes", node("n1", port=agent.port))
    replica.put("pods", pod("web"))
    api = Served(create_app(replica))
    try:
        r = get(log_url(api, "web", follow="true"), stream=True, timeout=(5, 10))
        assert read_lines(r, 5)[-1] == "hello 5"
        agent.stop()
        # not a clean end of the logs: the client can tell, and resume
        with pytest.raises(requests.exceptions.ChunkedEncodingError):
            list(r._lines)
    finally:
        api.stop()
        agent.stop()


def test_without_quorum_the_local_copy_is_used(api, replica):
    replica.no_quorum = True
    r = get(log_url(api, "web", tailLines=1))
    assert r.status_code == 200 and r.text == "hello 5\n"
    assert ("pods", "web", False) in replica.reads


# ---------------------------------------------------------------- errors

def test_missing_pod_is_404(api):
    assert_status(get(log_url(api, "ghost")), 404, 'pods "ghost" in namespace default not found')


def test_unscheduled_pod_is_400(api, replica):
    replica.put("pods", pod("pending", node=None))
    assert_status(get(log_url(api, "pending")), 400, "not scheduled yet")


def test_node_problems(api, replica):
    replica.put("pods", pod("lost", node="gone"))
    assert_status(get(log_url(api, "lost")), 404, "node gone", "not found")
    replica.put("nodes", node("n2", address=None, port=1234))
    replica.put("pods", pod("on-n2", node="n2"))
    assert_status(get(log_url(api, "on-n2")), 503, "node n2 has no InternalIP")
    replica.put("nodes", node("n2", port=None))
    assert_status(get(log_url(api, "on-n2")), 503, "node n2 has no agent port")
    replica.put("nodes", node("n2", address="http://evil/#", port=1234))
    assert_status(get(log_url(api, "on-n2")), 503, "no usable address")


def test_unreachable_agent_is_503_naming_node_and_address(api, replica):
    port = free_port()
    replica.put("nodes", node("n1", port=port))
    body = assert_status(get(log_url(api, "web")), 503,
                         "the agent of node n1 at 127.0.0.1:%d is unreachable (connection refused)" % port)
    assert body["reason"] == "ServiceUnavailable"


def test_agent_error_answers_are_passed_on(api, replica):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"<html>proxy says no</html>"
            self.send_response(502)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    try:
        replica.put("nodes", node("n1", port=fake.server_address[1]))
        assert_status(get(log_url(api, "web")), 503, "answered 502", "proxy says no")
    finally:
        fake.shutdown()
        fake.server_close()


def test_bad_parameters_and_verbs(api):
    assert_status(get(log_url(api, "web", tailLines="-3")), 400, "tailLines")
    assert_status(get(log_url(api, "web", follow="maybe")), 400, "follow must be true or false")
    assert_status(get(log_url(api, "web", sinceTime="yesterday")), 400, "sinceTime")
    r = requests.post(log_url(api, "web"), json={}, timeout=10)
    assert_status(r, 405)
    # other resources have no log
    r = get("%s/api/v1/namespaces/%s/services/web/log" % (api.url, NS))
    assert_status(r, 404, "no 'log' subresource")


def test_the_agent_sees_a_grant_for_that_container_never_a_token(runtime, replica):
    from agent.log_access import LogAccess
    from shepherd_ha.api.replica_credentials import ReplicaCredentials
    ours = ReplicaCredentials("correct-horse-battery-staple-42", "00" * 16)
    theirs = ReplicaCredentials("correct-horse-battery-staple-42", "11" * 16)
    seen = []

    class Recording(LogAccess):
        def may_read(self, authorization, namespace, pod, container):
            seen.append(authorization)
            return super().may_read(authorization, namespace, pod, container)
    agent = LogServer(runtime, "n1", threads=2, access=Recording([], "n1", "t", fetch_key=lambda: ours.log_grant_key))
    agent.start()
    replica.put("nodes", node("n1", port=agent.port))
    served = Served(create_app(replica, peer_token=ours.peer_token, log_grants=ours))
    stranger = Served(create_app(replica, log_grants=theirs))
    open_replica = Served(create_app(replica))
    try:
        r = get(log_url(served, "web"), headers={"Authorization": "Bearer the-callers-token"})
        assert r.status_code == 200 and r.text.startswith("hello 1\n")
        # an agent that refuses the replica is the operator's problem, not the caller's: 503 saying why
        assert_status(get(log_url(stranger, "web")), 503, "refused this replica", "log grants")
        assert_status(get(log_url(open_replica, "web")), 503, "refused this replica")
        assert len(seen) == 2 and all(ours.peer_token not in (a or "") for a in seen)
        assert all("the-callers-token" not in (a or "") for a in seen)
        assert seen[0].startswith("Shepherd-Log-Grant v1.")
    finally:
        for server in (served, stranger, open_replica):
            server.stop()
        agent.stop()


def test_a_since_time_reaches_the_agent_as_a_utc_micro_time(api, runtime, monkeypatch):
    # An offset or a lowercase z is read here and passed on in the one form every agent reads.
    logs = runtime.logs

    def recording(container_id, tail=None, follow=False, timestamps=False, since=None):
        runtime.last_since = since
        return logs(container_id, tail, follow)
    monkeypatch.setattr(runtime, "logs", recording)
    r = get(log_url(api, "web", sinceTime="2026-11-29T19:00:00.5%2B02:00"))
    assert r.status_code == 200, r.text
    assert runtime.last_since.isoformat() == "2026-11-29T17:00:00.500000+00:00"
    assert get(log_url(api, "web", sinceTime="2026-11-29T17:00:01z")).status_code == 200
    assert runtime.last_since.isoformat() == "2026-11-29T17:00:01+00:00"
