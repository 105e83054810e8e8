"""The FSM's apply never raises: malformed commands committed through Raft are refused as
values on every replica and the cluster keeps committing.

In-process: three Replica objects (real PySyncObj nodes on loopback ports) in this
test process, so commands the HTTP API would never build can be submitted.
"""
import time
import uuid

import pytest

from shepherd_ha.store.raft_node import RaftSettings
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store.replica import Peer, Replica

from .helpers import free_base_port

pytestmark = pytest.mark.integration


def _wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.0fs waiting for %s" % (timeout, what))
        time.sleep(0.02)


@pytest.fixture
def replicas(tmp_path, request):
    base = free_base_port(3)
    members = [("r%d" % i, "127.0.0.1:%d" % (base + 100 + i)) for i in (1, 2, 3)]
    password = uuid.uuid4().hex
    started = []
    request.addfinalizer(lambda: [r.close() for r in started])
    for ident, address in members:
        others = [(i, a) for i, a in members if i != ident]
        settings = RaftSettings(self_address=address, peer_addresses=[a for _, a in others],
                                data_dir=str(tmp_path / ident), password=password,
                                salt="00112233445566778899aabbccddeeff")
        started.append(Replica(ident, settings, [Peer(i, a) for i, a in others]))
    _wait(lambda: sum(r.node.is_leader() for r in started) == 1 and all(r.ready()[0] for r in started),
          20.0, "a leader and three ready replicas")
    return started


def _namespace(name):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": now_rfc3339()},
            "spec": {}, "status": {"phase": "Active"}}


def test_malformed_commands_are_refused_and_the_cluster_keeps_going(replicas):
    leader = [r for r in replicas if r.node.is_leader()][0]
    follower = [r for r in replicas if r is not leader][0]
    malformed = [
        {"type": "write", "ops": "garbage"},
        {"type": "nonsense"},
        ["not", "a", "dict"],
        "just a string",
        42,
        None,
        {"type": "write", "ops": [{"op": "create", "resource": "pods"}]},      # op without an object
        {"type": "write", "ops": [{"op": "explode"}]},
        {"type": "write", "ops": [7]},
        {"type": "claim", "term": "not a number", "replica": "r1"},
        {"type": "write", "key": ["unhashable"], "ops": []},
        {"no type": True},
    ]
    before = {r.id: r.node.fsm.malformed_commands for r in replicas}
    assert len(set(before.values())) == 1
    for i, command in enumerate(malformed):
        via = (leader, follower)[i % 2]
        result = via.node.submit(command, timeout=5)
        assert isinstance(result, dict) and result.get("ok") is False, (command, result)
        assert result.get("code") == 400 and result.get("message"), (command, result)

    # A group mixing garbage and a good write: the good one applies, the bad one is refused.
    good = {"type": "write", "key": uuid.uuid4().hex, "epoch": None,
            "ops": [{"op": "create", "resource": "namespaces", "object": _namespace("in-a-group")}]}
    result = leader.node.submit({"type": "group", "commands": [{"type": "nonsense"}, good]}, timeout=5)
    assert result["ok"] is True
    assert result["results"][0]["ok"] is False and result["results"][1]["ok"] is True, result

    # A normal write still commits, and reaches all three.
    written = follower.write([{"op": "create", "resource": "namespaces", "object": _namespace("after-garbage")}],
                             timeout=5)
    assert written["ok"] is True, written
    revision = written["revision"]
    _wait(lambda: all(r.node.fsm.revision >= revision for r in replicas), 10.0, "the write on every replica")
    for r in replicas:
        assert r.node.fsm.get("namespaces", None, "after-garbage") is not None, r.id
        assert r.node.fsm.get("namespaces", None, "in-a-group") is not None, r.id

    counts = {r.id: r.node.fsm.malformed_commands for r in replicas}
    assert len(set(counts.values())) == 1, "replicas disagree on refused commands: %s" % counts
    assert counts[leader.id] - before[leader.id] >= len(malformed) + 1
    digests = {r.id: r.node.fsm.digest() for r in replicas}
    assert len(set(digests.values())) == 1, "replica states diverged: %s" % digests
    # Every replica can still get writes committed (each submits through Raft).
    for r in replicas:
        result = r.write([{"op": "create", "resource": "namespaces", "object": _namespace("from-" + r.id)}],
                         timeout=5)
        assert result["ok"] is True, (r.id, result)
