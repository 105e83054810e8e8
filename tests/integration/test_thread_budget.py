"""An API worker's server threads follow its watches (shepherd_ha/api/thread_budget.py),
on a real one-replica server: it starts with the threads its seats, queues and spares
need, not one per watch slot; 100 agents' watches make it start threads for them while
other requests are still answered; once they end, it stops threads again."""
import http.client
import os
import threading
from urllib.parse import urlsplit

import psutil
import pytest

from .helpers import call, expect, start_cluster, wait_for

pytestmark = pytest.mark.integration

OPTIONS = {"max_requests_inflight": 8, "max_watches": 200, "request_queue_wait": 0.5}
WATCHES = 100


def metric(url, name):
    for line in call("GET", url + "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    raise AssertionError("no metric %s in /metrics of %s" % (name, url))


def os_threads(pid):
    """Threads of every process of the replica (the supervisor, its store and API worker)."""
    parent = psutil.Process(pid)
    return sum(p.num_threads() for p in [parent] + parent.children(recursive=True))


def open_watch(url, node):
    """An agent-shaped watch (its node's pods), open: the answer's head read, the stream not."""
    where = urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=30)
    conn.request("GET", "/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=120"
                        "&fieldSelector=spec.nodeName%%3D%s" % node)
    resp = conn.getresponse()
    assert resp.status == 200, (resp.status, resp.read(300))
    return conn, resp


def close(watches):
    for conn, resp in watches:
        resp.close()        # the response holds the socket too: both, or it stays open
        conn.close()


def test_threads_grow_with_watches_and_shrink_after(tmp_path):
    cluster = start_cluster(tmp_path / "c", replicas=1, server_options=OPTIONS)
    watches = []
    try:
        ident = cluster.ids[0]
        url = cluster.url(ident)
        pid = cluster.lc.pid(ident)
        idle = metric(url, "shepherd_api_threads")
        ceiling = metric(url, "shepherd_api_threads_max")
        assert ceiling - idle >= 150, (idle, ceiling)      # not a thread for each of 200 slots
        idle_os = os_threads(pid)

        for n in range(WATCHES):
            watches.append(open_watch(url, "node-%03d" % n))
        grown = metric(url, "shepherd_api_threads")
        assert idle + WATCHES <= grown <= ceiling, (idle, grown, ceiling)
        assert os_threads(pid) >= idle_os + WATCHES, (idle_os, os_threads(pid))

        # Other requests still find a thread (none waits unclassified behind the watches).
        answers, failures = [], []

        def ask():
            for _ in range(5):
                try:
                    answers.append(call("GET", url + "/api/v1/namespaces", timeout=10).status_code)
                except Exception as exc:      # noqa: BLE001 - reported below
                    failures.append(repr(exc))
        askers = [threading.Thread(target=ask) for _ in range(4)]      # within the seats and queues
        for t in askers:
            t.start()
        for t in askers:
            t.join(30)
        assert not failures and answers == [200] * 20, (answers, failures)
        expect(call("POST", url + "/api/v1/namespaces/default/configmaps",
                    json={"metadata": {"name": "still-writable"}, "data": {}}), 201)

        close(watches)
        watches = []
        # The server notices within a second that a watch's client is gone (its check of
        # waitress' client_disconnected); then the budget stops threads.
        wait_for("threads given back", lambda: metric(url, "shepherd_api_threads") < idle + 2 * 32, 60.0, 0.2)
        wait_for("OS threads stopped", lambda: os_threads(pid) < idle_os + 2 * 32, 30.0, 0.2)
        assert metric(url, "shepherd_api_thread_resizes_total") >= 2
        assert metric(url, "shepherd_api_thread_resize_failures_total") == 0
        # No request waited unclassified in waitress' own queue (it warns when one does).
        with open(os.path.join(cluster.lc.dir, ident, "server.log"), errors="replace") as fh:
            queued = [line for line in fh if "Task queue depth" in line]
        assert not queued, queued[:3]
    finally:
        close(watches)
        cluster.stop_all()
