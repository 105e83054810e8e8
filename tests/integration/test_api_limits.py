"""The API's limits against real replica processes (docs/security.md, "Limits"): connections
per address and overall, idle and slow connections, bodies checked before they are read,
numeric parameters, lone surrogates, Expect: 100-continue, Idempotency-Key per user and
request, watches per user. Each test here failed on the code before these limits."""
import json
import os
import socket
import time
import uuid

import pytest

from .helpers import Cluster, assert_status, call, describe, expect

pytestmark = pytest.mark.integration

NS = "default"
CONFIGMAPS = "/api/v1/namespaces/%s/configmaps" % NS
IDLE_TIMEOUT = 3.0
WATCHES_PER_USER = 3
MAX_CONNECTIONS = 1000
VIEWER_TOKEN = "viewer-" + uuid.uuid4().hex
OTHER_ADMIN_TOKEN = "admin2-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def env(tmp_path_factory, request):
    cluster = Cluster(tmp_path_factory.mktemp("limits"), auth=True,
                      server_options={"idle_connection_timeout": IDLE_TIMEOUT,
                                      "max_watches_per_user": WATCHES_PER_USER,
                                      # below the 1,200 connections a test opens (the default is 4,096)
                                      "max_connections": MAX_CONNECTIONS})
    with open(cluster.lc.token_file, "a") as fh:           # a third user, who may only read
        fh.write('%s,viewer,viewer,"shepherd:view"\n' % VIEWER_TOKEN)
        fh.write('%s,admin2,admin2,"system:masters"\n' % OTHER_ADMIN_TOKEN)     # another user who may write
    request.addfinalizer(cluster.stop_all)
    cluster.start()
    node_token = cluster.lc.node_token("limits-node")      # a node's own token (user system:node:NAME)
    return {"cluster": cluster, "admin": {"Authorization": "Bearer " + cluster.lc.token()},
            "node": {"Authorization": "Bearer " + node_token},
            "viewer": {"Authorization": "Bearer " + VIEWER_TOKEN},
            "other_admin": {"Authorization": "Bearer " + OTHER_ADMIN_TOKEN}}


def _replica(env):
    cluster = env["cluster"]
    ident = cluster.ids[0]
    url = cluster.url(ident)
    host, port = url.split("//")[1].split(":")
    return ident, url, host, int(port)


def configmap(name, data=None, **meta):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta, name=name), "data": data or {"k": "v"}}


# ---------------------------------------------------------------- connections

def _open(host, port, count, sources):
    """`count` idle TCP connections from the source addresses, in turn (all on loopback)."""
    socks = []
    for i in range(count):
        sock = socket.socket()
        sock.settimeout(2.0)
        try:
            sock.bind((sources[i % len(sources)], 0))
            sock.connect((host, port))
        except OSError:
            sock.close()
            continue
        socks.append(sock)
    return socks


def _close(socks):
    for sock in socks:
        sock.close()


def _metric(env, url, series):
    text = call("GET", url + "/metrics", headers=env["admin"]).text
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    raise AssertionError("no %s in /metrics" % series)


def _answers_quickly(env, ident):
    url = env["cluster"].url(ident)
    started = time.monotonic()
    expect(call("GET", url + "/readyz", timeout=5.0), 200)
    expect(call("GET", url + CONFIGMAPS, headers=env["admin"], timeout=5.0), 200)
    return time.monotonic() - started


def test_a_thousand_idle_connections_from_one_address_leave_the_replica_to_the_others(env):
    ident, url, host, port = _replica(env)
    socks = _open(host, port, 1000, ["127.0.0.2"])
    try:
        assert _answers_quickly(env, ident) < 5.0
        # Beyond the per-address cap the flood's connections were answered 429 and closed.
        refused = 0
        for sock in socks[-50:]:
            try:
                sock.settimeout(2.0)
                head = sock.recv(4096)
            except OSError:
                continue
            if head.startswith(b"HTTP/1.1 429"):
                refused += 1
                assert b"--max-connections-per-address" in head
        assert refused == 50, "connections beyond the per-address cap were not refused: %d of 50" % refused
        assert _metric(env, url, 'shepherd_api_connections_refused_total{reason="per-address"}') >= 872 - 5
        other = [i for i in env["cluster"].ids if i != ident][0]
        view = expect(call("GET", env["cluster"].url(other) + "/shepherd/v1/cluster", headers=env["admin"]), 200)
        assert [r for r in view["replicas"] if r["id"] == ident][0]["reachable"], view
    finally:
        _close(socks)


def test_connections_from_many_addresses_make_room_by_closing_the_longest_idle(env):
    ident, url, host, port = _replica(env)
    # 1,200 idle connections from 12 addresses (100 each, under the per-address cap): more
    # than --max-connections (1,000); the oldest idle ones are closed for newcomers.
    socks = _open(host, port, 1200, ["127.0.1.%d" % i for i in range(1, 13)])
    try:
        assert len(socks) == 1200
        assert _answers_quickly(env, ident) < 5.0
        closed = 0
        for sock in socks[:300]:
            sock.settimeout(0.01)
            try:
                closed += sock.recv(1) == b""
            except socket.timeout:
                pass
            except OSError:
                closed += 1
        assert closed >= 150, "only %d of the oldest connections were closed" % closed
    finally:
        _close(socks)


def test_an_idle_connection_is_closed_after_the_idle_timeout(env):
    _, _, host, port = _replica(env)
    sock = socket.create_connection((host, port), timeout=IDLE_TIMEOUT + 10)
    try:
        started = time.monotonic()
        assert sock.recv(1) == b""
        assert time.monotonic() - started < IDLE_TIMEOUT + 5
    finally:
        sock.close()


def test_headers_that_trickle_in_are_cut_off(env):
    _, _, host, port = _replica(env)
    sock = socket.create_connection((host, port), timeout=2)
    try:
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 20:
            try:
                sock.send(b"G")                # a byte every 2 s: never idle, never done
            except OSError:
                closed = True
                break
            try:
                if sock.recv(1) == b"":
                    closed = True
                    break
            except socket.timeout:
                pass
            except OSError:                    # reset: closed with our bytes unread
                closed = True
                break
        assert closed, "a connection sending its headers a byte at a time stayed open 20 s"
        assert time.monotonic() - started < 10 + 8
    finally:
        sock.close()


# ---------------------------------------------------------------- bodies

def _worker_pids(supervisor_pid):
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == supervisor_pid:
                pids.append(int(entry))
    return pids


def _temp_file_bytes(pids):
    """Bytes in the deleted temporary files the processes hold open (waitress's body buffers)."""
    total = 0
    for pid in pids:
        fd_dir = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
                if target.endswith("(deleted)") and not target.startswith("/memfd:"):
                    total += os.stat(os.path.join(fd_dir, fd)).st_size
            except OSError:
                continue
    return total


def _head(method, path, length, headers=None):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: x", "Content-Type: application/json",
             "Content-Length: %d" % length] + ["%s: %s" % kv for kv in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _response(sock, timeout=5.0):
    """(status code, parsed JSON body or None) of one HTTP response read off `sock`."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    code = int(head.split()[1])
    length = [int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")]
    while length and len(body) < length[0]:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return code, head, (json.loads(body) if body.strip() else None)


def test_unauthenticated_bodies_are_refused_before_a_byte_is_stored(env):
    ident, url, host, port = _replica(env)
    pids = _worker_pids(env["cluster"].lc.pid(ident))
    assert pids, "no worker process found"
    before = _temp_file_bytes(pids)
    length, sent = 2 * 1024 * 1024, 3 * 512 * 1024     # under the body limit; 1.5 MB of it sent
    socks = []
    try:
        for _ in range(20):
            sock = socket.create_connection((host, port), timeout=5)
            sock.sendall(_head("POST", CONFIGMAPS, length) + b" " * sent)
            socks.append(sock)
        time.sleep(1.0)
        held = _temp_file_bytes(pids) - before
        assert held < 1024 * 1024, "20 unauthenticated bodies held %d bytes of temporary files" % held
        for sock in socks:
            try:
                sock.sendall(b" " * (length - sent))     # the server drops it, and still answers
            except OSError:
                pass
            code, head, body = _response(sock)
            assert code == 401 and body["kind"] == "Status" and "bearer token" in body["message"], (head, body)
    finally:
        _close(socks)


def test_a_content_length_over_the_limit_is_refused_before_the_body(env):
    ident, url, host, port = _replica(env)
    sock = socket.create_connection((host, port), timeout=5)
    try:
        sock.sendall(_head("POST", CONFIGMAPS, 11 * 1024 * 1024, env["admin"]))      # no body sent at all
        code, head, body = _response(sock)
        assert code == 413 and body["reason"] == "RequestEntityTooLarge" and "larger than" in body["message"], body
    finally:
        sock.close()
    # requests sends the whole 11 MB body: the answer still arrives (no connection reset).
    resp = call("POST", url + CONFIGMAPS, headers=dict(env["admin"], **{"Content-Type": "application/json"}),
                data=b" " * (11 * 1024 * 1024))
    assert_status(resp, 413, "RequestEntityTooLarge")


def test_a_chunked_body_is_counted_as_it_comes(env):
    _, url, _, _ = _replica(env)

    def chunks():
        for _ in range(5):
            yield b" " * (1024 * 1024)
    resp = call("POST", url + CONFIGMAPS, headers=dict(env["admin"], **{"Content-Type": "application/json"}),
                data=chunks())
    assert_status(resp, 413, "RequestEntityTooLarge")
    small = call("POST", url + CONFIGMAPS, headers=dict(env["admin"], **{"Content-Type": "application/json"}),
                 data=iter([json.dumps(configmap("chunked-" + uuid.uuid4().hex[:6])).encode()]))
    expect(small, 201)


@pytest.mark.parametrize("framing", ["both", "not-chunked"])
def test_a_body_framed_wrongly_is_400_at_once(env, framing):
    """Found by the fuzz campaign: both were never answered (the server waited for a chunk line)."""
    _, _, host, port = _replica(env)
    body = json.dumps(configmap("framed-" + uuid.uuid4().hex[:6])).encode() * 40
    head = ["POST %s HTTP/1.1" % CONFIGMAPS, "Host: x", "Content-Type: application/json",
            "Authorization: %s" % env["admin"]["Authorization"], "Transfer-Encoding: chunked"]
    if framing == "both":
        head.append("Content-Length: %d" % len(body))
    sock = socket.create_connection((host, port), timeout=5)
    try:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)     # not chunk-encoded
        code, raw, answer = _response(sock, timeout=3.0)
        assert code == 400 and answer["kind"] == "Status", (raw, answer)
    finally:
        sock.close()


# ---------------------------------------------------------------- Expect: 100-continue

@pytest.mark.parametrize("method,path,length,code", [
    ("GET", CONFIGMAPS, None, 200), ("POST", CONFIGMAPS, 0, 400), ("DELETE", CONFIGMAPS + "/nosuch", 0, 404)])
def test_expect_continue_without_a_body_is_answered(env, method, path, length, code):
    _, _, host, port = _replica(env)
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: x", "Expect: 100-continue",
             "Authorization: %s" % env["admin"]["Authorization"]]
    if length is not None:
        lines.append("Content-Length: %d" % length)
    sock = socket.create_connection((host, port), timeout=5)
    try:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        got, head, body = _response(sock, timeout=3.0)
        assert got == code, (head, body)
    finally:
        sock.close()


def test_expect_continue_with_a_body_gets_100_then_the_answer(env):
    _, _, host, port = _replica(env)
    body = json.dumps(configmap("expect-" + uuid.uuid4().hex[:6])).encode()
    sock = socket.create_connection((host, port), timeout=5)
    try:
        sock.sendall(_head("POST", CONFIGMAPS, len(body), dict(env["admin"], Expect="100-continue")))
        interim = sock.recv(4096)
        assert interim.startswith(b"HTTP/1.1 100 Continue"), interim
        sock.sendall(body)
        code, head, obj = _response(sock)
        assert code == 201, (head, obj)
    finally:
        sock.close()


def test_expect_continue_without_a_token_is_refused_at_once(env):
    _, _, host, port = _replica(env)
    sock = socket.create_connection((host, port), timeout=5)
    try:
        sock.sendall(_head("POST", CONFIGMAPS, 1000, {"Expect": "100-continue"}))
        code, head, body = _response(sock, timeout=3.0)
        assert code == 401 and b"100 Continue" not in head, head
    finally:
        sock.close()


# ---------------------------------------------------------------- numeric parameters

HUGE = "9" * 4301


@pytest.mark.parametrize("method,path,params,name", [
    ("GET", CONFIGMAPS, {"resourceVersion": HUGE}, "resourceVersion"),
    ("GET", CONFIGMAPS + "/x", {"resourceVersion": HUGE}, "resourceVersion"),
    ("GET", CONFIGMAPS, {"watch": "1", "resourceVersion": HUGE}, "resourceVersion"),
    ("GET", CONFIGMAPS, {"watch": "1", "timeoutSeconds": HUGE}, "timeoutSeconds"),
    ("GET", CONFIGMAPS, {"watch": "1", "timeoutSeconds": "-1"}, "timeoutSeconds"),
    ("DELETE", CONFIGMAPS + "/x", {"gracePeriodSeconds": HUGE}, "gracePeriodSeconds"),
    ("DELETE", "/api/v1/namespaces/default/pods/x", {"gracePeriodSeconds": "1e3"}, "gracePeriodSeconds"),
    ("GET", "/api/v1/namespaces/default/pods/x/log", {"tailLines": HUGE}, "tailLines"),
    ("GET", "/api/v1/namespaces/default/pods/x/log", {"sinceSeconds": HUGE}, "sinceSeconds"),
    ("GET", CONFIGMAPS, {"limit": HUGE}, "limit"),
    ("GET", "/apis/apps/v1/namespaces/default/deployments/x/scale", {"resourceVersion": "²"}, "resourceVersion"),
])
def test_numbers_beyond_their_range_are_400_naming_the_parameter(env, method, path, params, name):
    _, url, _, _ = _replica(env)
    resp = call(method, url + path, params=params, headers=env["admin"])
    body = assert_status(resp, 400, "BadRequest")
    assert name in body["message"] and len(body["message"]) < 400, body["message"]


def test_a_huge_grace_period_in_delete_options_is_400(env):
    _, url, _, _ = _replica(env)
    name = "grace-" + uuid.uuid4().hex[:6]
    expect(call("POST", url + CONFIGMAPS, json=configmap(name), headers=env["admin"]), 201)
    resp = call("DELETE", url + CONFIGMAPS + "/" + name, headers=dict(env["admin"], **{"Content-Type": "application/json"}),
                data='{"gracePeriodSeconds": %s}' % ("9" * 40))
    body = assert_status(resp, 400)
    assert "gracePeriodSeconds" in body["message"]
    expect(call("GET", url + CONFIGMAPS + "/" + name, headers=env["admin"]), 200)     # still there


# ---------------------------------------------------------------- lone surrogates

@pytest.mark.parametrize("where,field", [
    ("annotation", "metadata.annotations.a"), ("label", "metadata.labels.app"), ("name", "metadata.name"),
    ("data", "data.k"), ("key", "data.\\ud800")])
def test_a_lone_surrogate_anywhere_is_422_naming_the_field(env, where, field):
    _, url, _, _ = _replica(env)
    name = "sur-" + uuid.uuid4().hex[:6]
    text = {"annotation": '{"metadata": {"name": "%s", "annotations": {"a": "x\\ud800"}}, "data": {}}',
            "label": '{"metadata": {"name": "%s", "labels": {"app": "\\udfff"}}, "data": {}}',
            "name": '{"metadata": {"name": "%s\\ud800"}, "data": {}}',
            "data": '{"metadata": {"name": "%s"}, "data": {"k": "\\ud800\\ud800"}}',
            "key": '{"metadata": {"name": "%s"}, "data": {"\\ud800": "v"}}'}[where] % name
    resp = call("POST", url + CONFIGMAPS, data=text.encode(),
                headers=dict(env["admin"], **{"Content-Type": "application/json"}))
    body = assert_status(resp, 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == field and field in body["message"], body
    assert call("GET", url + CONFIGMAPS + "/" + name, headers=env["admin"]).status_code == 404


def test_a_lone_surrogate_in_a_patch_is_422_and_changes_nothing(env):
    _, url, _, _ = _replica(env)
    name = "surp-" + uuid.uuid4().hex[:6]
    created = expect(call("POST", url + CONFIGMAPS, json=configmap(name), headers=env["admin"]), 201)
    resp = call("PATCH", url + CONFIGMAPS + "/" + name, data=b'{"metadata": {"annotations": {"a": "\\ud800"}}}',
                headers=dict(env["admin"], **{"Content-Type": "application/merge-patch+json"}))
    assert_status(resp, 422, "Invalid")
    now = expect(call("GET", url + CONFIGMAPS + "/" + name, headers=env["admin"]), 200)
    assert now["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


# ---------------------------------------------------------------- Idempotency-Key

def test_an_idempotency_key_replays_only_the_same_request_of_the_same_user(env):
    cluster = env["cluster"]
    urls = [cluster.url(i) for i in cluster.ids]
    key = uuid.uuid4().hex
    name = "idem-" + uuid.uuid4().hex[:6]
    first = call("POST", urls[0] + CONFIGMAPS, json=configmap(name, {"secret": "admin's"}),
                 headers=dict(env["admin"], **{"Idempotency-Key": key}))
    created = expect(first, 201)
    # The same user, the same request, another replica: the first answer again.
    again = expect(call("POST", urls[1] + CONFIGMAPS, json=configmap(name, {"secret": "admin's"}),
                        headers=dict(env["admin"], **{"Idempotency-Key": key})), 201)
    assert again["metadata"]["uid"] == created["metadata"]["uid"]
    # The same user, the same key, another body: 422, nothing written.
    other = "idem-" + uuid.uuid4().hex[:6]
    reuse = call("POST", urls[2] + CONFIGMAPS, json=configmap(other),
                 headers=dict(env["admin"], **{"Idempotency-Key": key}))
    body = assert_status(reuse, 422, "Invalid")
    assert "Idempotency-Key" in body["message"]
    assert call("GET", urls[0] + CONFIGMAPS + "/" + other, headers=env["admin"]).status_code == 404
    # Another user with the same key and request: not the first user's answer (and data).
    theirs = call("POST", urls[0] + CONFIGMAPS, json=configmap(name, {"secret": "admin's"}),
                  headers=dict(env["other_admin"], **{"Idempotency-Key": key}))
    assert_status(theirs, 409, "AlreadyExists")


def test_an_idempotency_key_reused_for_another_update_is_422(env):
    _, url, _, _ = _replica(env)
    name = "idemu-" + uuid.uuid4().hex[:6]
    expect(call("POST", url + CONFIGMAPS, json=configmap(name), headers=env["admin"]), 201)
    key = uuid.uuid4().hex
    headers = dict(env["admin"], **{"Idempotency-Key": key, "Content-Type": "application/merge-patch+json"})
    expect(call("PATCH", url + CONFIGMAPS + "/" + name, data='{"data": {"k": "1"}}', headers=headers), 200)
    expect(call("PATCH", url + CONFIGMAPS + "/" + name, data='{"data": {"k": "1"}}', headers=headers), 200)
    assert_status(call("PATCH", url + CONFIGMAPS + "/" + name, data='{"data": {"k": "2"}}', headers=headers),
                  422, "Invalid")
    assert expect(call("GET", url + CONFIGMAPS + "/" + name, headers=env["admin"]), 200)["data"] == {"k": "1"}


# ---------------------------------------------------------------- watches per user

def _watch(url, headers):
    import requests
    return requests.get(url + CONFIGMAPS, params={"watch": "1", "timeoutSeconds": "30"}, headers=headers,
                        stream=True, timeout=(3, 40))


def test_one_user_cannot_hold_more_than_its_watches(env):
    _, url, _, _ = _replica(env)
    held = []
    try:
        for _ in range(WATCHES_PER_USER):
            resp = _watch(url, env["viewer"])
            assert resp.status_code == 200, describe(resp)
            held.append(resp)
        refused = _watch(url, env["viewer"])
        body = assert_status(refused, 429, "TooManyRequests")
        assert "--max-watches-per-user" in body["message"] and refused.headers.get("Retry-After"), body
        assert _metric(env, url, 'shepherd_flowcontrol_rejected_requests_total{priority_level="long-running",'
                                 'reason="per-user"}') >= 1
        theirs = _watch(url, env["admin"])          # another user still watches
        held.append(theirs)
        assert theirs.status_code == 200, describe(theirs)
    finally:
        for resp in held:
            resp.close()
    deadline = time.monotonic() + 10
    while True:                                     # closed watches give their slots back
        again = _watch(url, env["viewer"])
        again.close()
        if again.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert again.status_code == 200, describe(again)


def test_no_internal_errors(env):
    cluster = env["cluster"]
    for ident in cluster.running():
        text = call("GET", cluster.url(ident) + "/metrics", headers=env["admin"]).text
        assert "shepherd_api_requests_total" in text
        assert not [line for line in text.splitlines() if line.startswith("shepherd_api_requests_total")
                    and 'code="500"' in line], ident
    assert not cluster.internal_errors()


def test_a_deployment_asks_for_a_bounded_number_of_pods(env):
    """Found by the fuzz campaign: replicas 2^31 was accepted, and the deployment controller then
    created pods at about 1,000 a second until the replicas fell over."""
    _, url, _, _ = _replica(env)
    deployments = "/apis/apps/v1/namespaces/%s/deployments" % NS
    name = "many-" + uuid.uuid4().hex[:6]
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
           "spec": {"replicas": 2 ** 31, "selector": {"matchLabels": {"app": name}},
                    "template": {"metadata": {"labels": {"app": name}},
                                 "spec": {"containers": [{"name": "m", "image": "nginx:1.25"}]}}}}
    body = assert_status(call("POST", url + deployments, json=dep, headers=env["admin"]), 422, "Invalid")
    assert body["details"]["causes"][0]["field"] == "spec.replicas" and "30000" in body["message"], body
    dep["spec"]["replicas"] = 0
    expect(call("POST", url + deployments, json=dep, headers=env["admin"]), 201)
    scale = call("PUT", url + deployments + "/" + name + "/scale", json={"spec": {"replicas": 30001}},
                 headers=env["admin"])
    assert_status(scale, 422, "Invalid")
    patch = call("PATCH", url + deployments + "/" + name, data='{"spec": {"replicas": 1000000}}',
                 headers=dict(env["admin"], **{"Content-Type": "application/merge-patch+json"}))
    assert_status(patch, 422, "Invalid")
    assert expect(call("GET", url + deployments + "/" + name, headers=env["admin"]), 200)["spec"]["replicas"] == 0
