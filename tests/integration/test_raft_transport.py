"""The Raft port is not a way in (issue 14, findings 1 and 2), on real replica processes.

- finding 1's message (a pickle whose __reduce__ runs a command, encrypted with the
  real Raft password) runs nothing, as a first message or after the key exchange; the
  connection is dropped and the replicas keep serving;
- 32 MB of junk (and a 0x7fffffff length prefix) to every replica under writes: no
  election, the same leader, every write acknowledged (bench/bench_raft_junk.py measures
  the longest gap between acknowledgements);
- 100 idle connections are closed by the handshake deadline.
"""
import os
import socket
import struct
import threading
import time

import pytest

from shepherd_ha.store.pysyncobj_overrides.transport import HANDSHAKE_SECONDS

from .helpers import call, ensure_namespace, expect, unique, write_with_retry
from .raft_wire import RaftWire, RunsCommand, closed_by_peer, send_junk, touch_command

pytestmark = pytest.mark.integration

NAMESPACE = "rafthard"


def _secrets(cluster):
    with open(os.path.join(cluster.lc.dir, "raft-password")) as fh:
        password = fh.read().strip()
    salt = cluster.lc.spec().get("raft_salt")
    return password, salt


def _raft(cluster, ident):
    return cluster.lc.replica(ident)["raft"]


def _terms(cluster):
    return {ident: expect(call("GET", cluster.url(ident) + "/shepherd/v1/replica"), 200)["term"]
            for ident in cluster.ids}


def _write(cluster, name):
    resp, _ = write_with_retry("POST", [cluster.url(i) for i in cluster.ids],
                               "/api/v1/namespaces/%s/configmaps" % NAMESPACE,
                               json={"metadata": {"name": name}, "data": {"k": "v"}})
    return resp


def test_a_pickle_that_runs_a_command_runs_nothing(cluster, tmp_path):
    password, salt = _secrets(cluster)
    markers = []
    for ident in cluster.ids:
        # As the very first message (before any key exchange) ...
        first = str(tmp_path / ("first-" + ident))
        wire = RaftWire(_raft(cluster, ident), password, salt, cluster.lc.cluster_id())
        wire.send(RunsCommand(touch_command(first)))
        assert wire.closed_by_peer(5.0), "replica %s kept a connection that sent a pickled global" % ident
        wire.close()
        # ... and after it, where a peer names itself.
        second = str(tmp_path / ("second-" + ident))
        wire = RaftWire(_raft(cluster, ident), password, salt, cluster.lc.cluster_id())
        wire.exchange_keys()
        wire.send(RunsCommand(touch_command(second)))
        assert wire.closed_by_peer(5.0), "replica %s kept a connection that sent a pickled global" % ident
        wire.close()
        markers += [first, second]
    time.sleep(1.0)
    ran = [m for m in markers if os.path.exists(m)]
    assert not ran, "a replica ran the pickled command: %s exist" % ran
    ensure_namespace(cluster.url(cluster.ids[0]), NAMESPACE)
    for ident in cluster.ids:       # every replica still takes writes
        resp = call("POST", cluster.url(ident) + "/api/v1/namespaces/%s/configmaps" % NAMESPACE,
                    json={"metadata": {"name": unique("after-rce")}})
        assert resp.status_code == 201, resp.text


def test_junk_to_every_replica_under_writes_causes_no_election(cluster):
    ensure_namespace(cluster.url(cluster.ids[0]), NAMESPACE)
    leader = cluster.leader()
    terms = _terms(cluster)
    stop = threading.Event()
    acked, failed = [], []

    def writer():
        n = 0
        while not stop.is_set() and n < 5000:
            n += 1
            try:
                resp = _write(cluster, unique("junk-w"))
            except AssertionError as exc:
                failed.append(str(exc))
                continue
            (acked if resp.status_code == 201 else failed).append(resp.status_code)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(0.5)
    size = 32 * 1024 * 1024
    senders = []
    for ident in cluster.ids:
        for prefix in (struct.pack("i", 0x7fffffff), b""):
            t = threading.Thread(target=send_junk, args=(_raft(cluster, ident), prefix, size), daemon=True)
            t.start()
            senders.append(t)
    for t in senders:
        t.join(60)
    time.sleep(1.0)
    stop.set()
    thread.join(30)
    assert not thread.is_alive()
    assert not failed, "writes not acknowledged during the junk: %s" % failed[:5]
    assert len(acked) > 10, "too few writes went through (%d)" % len(acked)
    assert _terms(cluster) == terms, "an election happened: terms %s -> %s" % (terms, _terms(cluster))
    assert cluster.leader() == leader


def test_idle_connections_are_closed_after_the_handshake_deadline(cluster):
    host, _, port = _raft(cluster, cluster.ids[0]).rpartition(":")
    socks = [socket.create_connection((host, int(port)), timeout=5.0) for _ in range(100)]
    try:
        start = time.monotonic()
        deadline = start + HANDSHAKE_SECONDS + 3.0
        open_ones = list(socks)
        while open_ones and time.monotonic() < deadline:
            open_ones = [s for s in open_ones if not closed_by_peer(s, 0.05)]
        assert not open_ones, "%d of 100 idle connections still open %.0f s after they connected" % (
            len(open_ones), time.monotonic() - start)
    finally:
        for s in socks:
            s.close()
    resp = call("GET", cluster.url(cluster.ids[0]) + "/readyz")
    assert resp.status_code == 200, resp.text


def _mtime(path):
    try:
        return os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return None


def test_a_lagging_replica_loads_the_leaders_snapshot_through_the_restricted_loader(make_cluster):
    # The snapshot arrives over the Raft port and is unpickled with the dump's allow-list:
    # a follower that missed compacted entries must still catch up from it.
    cluster = make_cluster(server_options={"log_compaction_entries": 20})
    leader = cluster.leader()
    lagging = [i for i in cluster.ids if i != leader][0]
    assert cluster.lc.stop(lagging)
    url = cluster.url(leader)
    ensure_namespace(url, NAMESPACE)
    dump = os.path.join(cluster.lc.dir, leader, "data", "raft.dump")
    before = _mtime(dump)
    names = [unique("snap") for _ in range(80)]
    for name in names:
        assert _write(cluster, name).status_code == 201
    # The leader's dump (a thread of its store writes it, in its turn: store/dump_turns.py)
    # is what the lagging replica must load.
    deadline = time.monotonic() + 20
    while _mtime(dump) == before:
        assert time.monotonic() < deadline, "the leader wrote no dump in 20 s"
        time.sleep(0.1)
    cluster.lc.start(lagging)
    cluster.wait_ready()
    deadline = time.monotonic() + 30
    have = set()
    while time.monotonic() < deadline:
        resp = call("GET", cluster.url(lagging) + "/api/v1/namespaces/%s/configmaps" % NAMESPACE,
                    params={"resourceVersion": "0"})
        if resp.status_code == 200:
            have = {o["metadata"]["name"] for o in resp.json()["items"]}
            if set(names) <= have:
                break
        time.sleep(0.2)
    assert set(names) <= have, "the lagging replica lacks %d objects" % len(set(names) - have)
    with open(os.path.join(cluster.lc.dir, lagging, "server.log"), errors="replace") as fh:
        log = fh.read()
    assert "failed to load full dump" not in log and "refused" not in log.lower(), log[-3000:]
