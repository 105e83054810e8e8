"""The Raft secret is rotated one replica at a time, with writes going on throughout
(docs/security.md, "How to rotate the Raft secret"), on real replica processes:
1. every replica also accepts the new password (still sending with the old one);
2. every replica sends with the new one (still accepting the old one);
3. every replica forgets the old one.
Every write is acknowledged, and at the end the old password opens nothing on the
Raft port while the new one does."""
import os
import threading
import time

import pytest
import requests
import yaml

from shepherd_ha.store import raft_secrets

from .helpers import call, ensure_namespace, expect, unique, write_with_retry
from .raft_wire import RaftWire

pytestmark = pytest.mark.integration

NAMESPACE = "rotation"


def _configure(cluster, ident, **changes):
    path = os.path.join(cluster.lc.dir, ident, "server.yaml")
    with open(path) as fh:
        server = yaml.safe_load(fh)
    for key, value in changes.items():
        if value is None:
            server.pop(key, None)
        else:
            server[key] = value
    with open(path, "w") as fh:
        yaml.safe_dump(server, fh)


def _all_linked(cluster, timeout=15.0):
    """Every replica connected to every other: mid-rotation nobody is cut off."""
    deadline = time.monotonic() + timeout
    while True:
        links = {}
        for ident in cluster.ids:
            try:
                links[ident] = sorted(call("GET", cluster.url(ident) + "/shepherd/v1/replica",
                                           timeout=2.0).json()["connectedPeers"])
            except (requests.RequestException, ValueError, KeyError):
                links[ident] = None
        if all(links[i] == sorted(j for j in cluster.ids if j != i) for i in cluster.ids):
            return
        assert time.monotonic() < deadline, "replicas cut off from each other mid-rotation: %s" % links
        time.sleep(0.2)


def _rolling(cluster, **changes):
    for ident in cluster.ids:
        _configure(cluster, ident, **changes)
        assert cluster.lc.stop(ident)
        cluster.lc.start(ident)
        cluster.wait_ready()
        _all_linked(cluster)


def _secret_file(cluster, name, text):
    path = os.path.join(cluster.lc.dir, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
        fh.write(text + "\n")
    return path


def test_a_rolling_rotation_keeps_every_write(make_cluster):
    cluster = make_cluster()
    urls = [cluster.url(i) for i in cluster.ids]
    ensure_namespace(urls[0], NAMESPACE)
    old_file = os.path.join(cluster.lc.dir, "raft-password")
    with open(old_file) as fh:
        old = fh.read().strip()
    new = raft_secrets.new_password()
    new_file = _secret_file(cluster, "raft-password-new", new)
    salt = cluster.lc.spec()["raft_salt"]

    stop, acked, failed = threading.Event(), [], []

    def writer():
        while not stop.is_set() and len(acked) + len(failed) < 20000:
            name = unique("rot")
            try:
                resp, _ = write_with_retry("POST", urls, "/api/v1/namespaces/%s/configmaps" % NAMESPACE,
                                           deadline_s=15.0, json={"metadata": {"name": name}})
            except AssertionError as exc:
                failed.append(str(exc))
                continue
            (acked if resp.status_code == 201 else failed).append(name if resp.status_code == 201 else resp.text)
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        _rolling(cluster, raft_accepted_password_file=new_file)                       # 1. accept the new
        _rolling(cluster, raft_password_file=new_file, raft_accepted_password_file=old_file)   # 2. send it
        _rolling(cluster, raft_accepted_password_file=None)                           # 3. forget the old
    finally:
        stop.set()
        thread.join(30)
    assert not failed, failed[:3]
    assert len(acked) > 20
    items = expect(call("GET", urls[0] + "/api/v1/namespaces/%s/configmaps" % NAMESPACE), 200)["items"]
    assert set(acked) <= {o["metadata"]["name"] for o in items}
    raft = cluster.lc.replica(cluster.ids[0])["raft"]
    stale = RaftWire(raft, old, salt, cluster.lc.cluster_id())
    stale.send(os.urandom(32))
    assert stale.closed_by_peer(5.0), "the old password still opens the Raft port"
    stale.close()
    fresh = RaftWire(raft, new, salt, cluster.lc.cluster_id())
    fresh.exchange_keys()
    fresh.close()
