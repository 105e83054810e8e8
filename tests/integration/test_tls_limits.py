"""The connection limits over TLS (api/http_server.py behind tls/terminator.py).

Behind the terminator waitress has one peer, the terminator's Unix socket: the limits
must still count the TLS client's own address (the terminator names it; serving.py
client_address), and idle TCP connections that never start a handshake must not fill
the terminator either."""
import socket
import ssl
import time

import pytest

from .helpers import Cluster, call, expect

pytestmark = pytest.mark.integration

PER_ADDRESS = 128       # the default --max-connections-per-address


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory, request):
    c = Cluster(tmp_path_factory.mktemp("tlslimits"), replicas=1, auth=True, tls=True)
    request.addfinalizer(c.stop_all)
    c.start()
    return c


def _endpoint(c):
    url = c.url(c.ids[0])
    host, port = url.split("//")[1].split(":")
    return url, host, int(port)


def _open(host, port, count, source, context=None):
    socks = []
    for _ in range(count):
        sock = socket.socket()
        sock.settimeout(5.0)
        try:
            sock.bind((source, 0))
            sock.connect((host, port))
            if context is not None:
                sock = context.wrap_socket(sock, server_hostname=host)
        except OSError:
            sock.close()
            continue
        socks.append(sock)
    return socks


def _answers_quickly(c, url):
    started = time.monotonic()
    expect(call("GET", url + "/readyz", verify=c.lc.ca_file, timeout=5.0), 200)
    expect(call("GET", url + "/api/v1/namespaces/default/configmaps", headers=c.lc.auth_headers(),
                verify=c.lc.ca_file, timeout=5.0), 200)
    return time.monotonic() - started


def test_a_thousand_idle_tls_connections_from_one_address_leave_the_replica_to_the_others(tls_cluster):
    c = tls_cluster
    url, host, port = _endpoint(c)
    context = ssl.create_default_context(cafile=c.lc.ca_file)
    socks = _open(host, port, 1000, "127.0.0.2", context)
    try:
        assert len(socks) > PER_ADDRESS, "the TLS handshakes themselves failed: %d" % len(socks)
        assert _answers_quickly(c, url) < 5.0
        # Beyond the per-address cap, counted on the TLS client's address: 429 over TLS, closed.
        refused = 0
        for sock in socks[-50:]:
            try:
                head = sock.recv(4096)
            except (OSError, ssl.SSLError):
                continue
            if head.startswith(b"HTTP/1.1 429"):
                refused += 1
                assert b"127.0.0.2" in head and b"--max-connections-per-address" in head, head
        assert refused == 50, "TLS connections beyond the per-address cap were not refused: %d of 50" % refused
        # ... while the first ones, under the cap, are served.
        socks[0].sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert socks[0].recv(4096).startswith(b"HTTP/1.1 200")
    finally:
        for sock in socks:
            sock.close()


def test_idle_connections_that_never_start_tls_cannot_fill_the_terminator(tls_cluster):
    c = tls_cluster
    url, host, port = _endpoint(c)
    socks = _open(host, port, 1000, "127.0.0.4")
    try:
        assert _answers_quickly(c, url) < 5.0
        # past the per-address handshake cap the terminator closes them at once
        closed = 0
        for sock in socks[-50:]:
            sock.settimeout(2.0)
            try:
                closed += sock.recv(1) == b""
            except OSError:
                closed += 1
        assert closed == 50, "idle pre-TLS connections beyond the cap were kept: %d of 50 closed" % (closed,)
    finally:
        for sock in socks:
            sock.close()
