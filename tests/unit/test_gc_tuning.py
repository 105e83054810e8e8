"""A store loaded at once (our dump on start, a leader's snapshot) is built with the cyclic
collector off and then frozen, so full collections never walk it."""
import gc
import os
import time

import pytest

from shepherd_ha.cli.local_cluster import find_base_port
from shepherd_ha.store import gc_tuning
from shepherd_ha.store.raft_node import DUMP_FILE, RaftNode, RaftSettings


@pytest.fixture(autouse=True)
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()
    gc.enable()


def _tracked(obj):
    return any(o is obj for o in gc.get_objects())


def test_a_bulk_load_runs_without_collections_and_freezes_what_it_built():
    frozen_before = gc_tuning.status()["frozenObjects"]
    with gc_tuning.bulk_load():
        assert not gc.isenabled()
        store = {"pod-%d" % i: {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{}]}}
                 for i in range(1000)}
    assert gc.isenabled()
    assert gc.get_freeze_count() > 3000
    assert gc_tuning.status()["frozenObjects"] - frozen_before >= 3000, "counted as they were frozen"
    assert not _tracked(store) and not _tracked(store["pod-7"]["spec"]["containers"])


def test_a_bulk_load_leaves_a_disabled_collector_disabled():
    gc.disable()
    with gc_tuning.bulk_load():
        with gc_tuning.bulk_load():
            pass
        assert not gc.isenabled()
    assert not gc.isenabled()


def _namespace(name):
    return {"op": "create", "resource": "namespaces",
            "object": {"apiVersion": "v1", "kind": "Namespace", "spec": {}, "status": {"phase": "Active"},
                       "metadata": {"name": name, "uid": "uid-" + name, "creationTimestamp": "2026-01-01T00:00:00Z"}}}


def _wait(predicate, timeout=20):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_replica_restarted_from_its_dump_has_its_store_frozen(tmp_path):
    settings = RaftSettings(self_address="127.0.0.1:%d" % (find_base_port(1) + 100), peer_addresses=[],
                            data_dir=str(tmp_path), password="x", salt="00112233445566778899aabbccddeeff")
    node = RaftNode(settings, lambda changes: None, lambda revision: None)
    try:
        _wait(lambda: node.leader_address() is not None)
        node.submit({"type": "write", "key": "k1", "epoch": None,
                     "ops": [_namespace("ns-%d" % i) for i in range(200)]}, timeout=10)
        node.syncobj.forceLogCompaction()
        _wait(lambda: os.path.exists(os.path.join(str(tmp_path), DUMP_FILE)))
        time.sleep(0.5)                # the forked writer renames the dump into place when complete
    finally:
        node.destroy()
    _wait(lambda: not node.syncobj.tick_thread_alive())
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    node = RaftNode(settings, lambda changes: None, lambda revision: None)
    try:
        _wait(lambda: node.fsm.get("namespaces", None, "ns-199") is not None)
        # The load's freeze counts what it moves, just after the store is in place.
        _wait(lambda: gc.get_freeze_count() > 0, timeout=5)
        assert gc.isenabled()
        assert not _tracked(node.fsm.get("namespaces", None, "ns-3")["metadata"])
    finally:
        node.destroy()


def test_the_status_does_not_walk_the_frozen_objects(monkeypatch):
    # gc.get_freeze_count() walks the whole permanent generation with the GIL held (360 ms
    # at 1.5 million objects here): the status every readiness probe asks for must not.
    with gc_tuning.bulk_load():
        kept = [{"i": [i]} for i in range(100)]

    def walk():
        raise AssertionError("status() walked the permanent generation")
    monkeypatch.setattr(gc, "get_freeze_count", walk)
    assert gc_tuning.status()["frozenObjects"] >= 200
    assert kept



class _Node:
    pass


def _cycle_frozen_alive_then_dropped():
    """A weak reference to two objects in a cycle, frozen while alive (a request in flight
    at the periodic freeze), then dropped."""
    import weakref
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    gc_tuning.freeze_survivors()
    del a, b
    gc.collect()
    return ref


def test_garbage_frozen_while_alive_is_never_freed():
    """Why an API worker does not freeze periodically: what its requests in flight hold
    at a freeze (in cycles: waitress's tasks, closures) would stay for good."""
    ref = _cycle_frozen_alive_then_dropped()
    assert ref() is not None, "frozen objects are out of every collection's reach"
    gc.unfreeze()
    gc.collect()
    assert ref() is None


def test_a_worker_sets_the_thresholds_and_freezes_nothing(monkeypatch):
    started = []
    monkeypatch.setattr(gc_tuning.threading, "Thread", lambda *a, **k: started.append(k) or None)
    monkeypatch.setattr(gc, "set_threshold", lambda *t: started.append(t))
    assert gc_tuning.configure_process(freeze_periodically=False) is None
    assert started == [gc_tuning.THRESHOLDS], "thresholds only, no freezing thread"
