"""A replica with more than 1,024 open connections keeps serving, and its API worker
stays up. waitress's default loop is select(), which raises ValueError on a descriptor
numbered 1,024 or more: at 1,000 hollow nodes every follower's API worker died that way
every 10-20 s (bench/bench_scale.py). This failed on that code."""
import socket

import psutil
import pytest

from shepherd_ha.cli.open_files import raise_open_file_limit

from .helpers import Cluster, call

pytestmark = pytest.mark.integration

CONNECTIONS = 1200
SOURCES = ["127.0.0.%d" % i for i in range(2, 14)]       # 100 connections per source address


def _api_worker(supervisor_pid):
    """The API worker child of a replica's supervisor (the one that is not the store)."""
    children = psutil.Process(supervisor_pid).children()
    workers = [c for c in children if c.num_threads() > 50]      # waitress: hundreds of threads
    assert len(workers) == 1, [(c.pid, c.num_threads()) for c in children]
    return workers[0]


def test_a_worker_serves_past_1024_connections(tmp_path):
    raise_open_file_limit()                    # this test's own sockets
    cluster = Cluster(tmp_path, replicas=1, server_options={"max_connections": 0, "max_connections_per_address": 0,
                                                             "idle_connection_timeout": 120})
    cluster.start()
    socks = []
    try:
        ident = cluster.ids[0]
        url = cluster.url(ident)
        host, port = url.split("//")[1].split(":")
        worker = _api_worker(cluster.lc.pid(ident))
        for i in range(CONNECTIONS):
            sock = socket.create_connection((host, int(port)), timeout=5.0,
                                            source_address=(SOURCES[i % len(SOURCES)], 0))
            socks.append(sock)
        for sock in socks[-50:]:                   # the newest, numbered past 1,024 in the worker
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answered = 0
        for sock in socks[-50:]:
            if sock.recv(64).startswith(b"HTTP/1.1 200"):
                answered += 1
        assert answered == 50
        assert len(worker.net_connections()) >= CONNECTIONS, "the worker holds every connection"
        assert call("GET", url + "/api/v1/namespaces", timeout=10.0).status_code == 200
        assert worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE, "the same API worker still serves"
    finally:
        for sock in socks:
            sock.close()
        cluster.stop_all()
