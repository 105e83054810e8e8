"""The store service and a RemoteReplica over a real Unix socket, with an in-memory
FSM standing in for Raft: the change stream, snapshots, state frames, read-your-writes."""
import logging
import types

import pytest

from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.store import commands
from shepherd_ha.store.fsm import Change
from shepherd_ha.store.remote_replica import RemoteReplica
from shepherd_ha.store.replica import Replica
from shepherd_ha.store.store_service import StoreService
from shepherd_ha.store.watch_log import WatchLog
from tests import waiting


class FakeReplica:
    """Replica's surface the service uses, over MemoryStore (commands apply at once)."""

    def __init__(self, log_size):
        self.store = MemoryStore()
        # The service streams the FSM's changes as made (objects as stored bytes), as in a store process.
        self.store.change_log = self.change_log = WatchLog(log_size)
        self.change_log.reset(self.store.fsm.revision)     # as a store process starts: log from its state on
        self.node = self
        self.lock = self.store._lock
        self.committer = self.barrier = self
        self.barriers_sent = 0
        self.leading, self.current_term = False, 1

    @property
    def fsm(self):
        return self.store.fsm

    def term(self):
        return self.current_term

    def call(self, command, timeout):
        return self.store.apply(command)

    def call_many(self, commands_, timeout):
        return [self.store.apply(c) for c in commands_]

    def wait(self):
        self.barriers_sent += 1

    def revision(self):
        return self.store.fsm.revision


def wait_for(predicate, timeout=5.0):
    waiting.wait_for("condition", predicate, timeout, interval=0.01)


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": name,
                                                            "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}


def create(name):
    return commands.write([commands.create("pods", pod(name))], "k-" + name, None)


@pytest.fixture
def served(tmp_path):
    fake = FakeReplica(log_size=5)
    service = StoreService(fake, str(tmp_path / "run" / "store.sock"))
    service.start()
    leadership = []
    remote = RemoteReplica("r1", service.path, [], write_timeout=2.0, on_leadership=leadership.append).start()
    # The store's side too: a test that drops subscribers must find this one (CI saw it missed).
    wait_for(lambda: remote.connected and service.subscribers == 1)
    yield fake, service, remote, leadership
    remote.close()
    service.close()


def test_write_is_visible_in_the_mirror_when_it_returns(served):
    fake, service, remote, _ = served
    result = remote.write([commands.create("pods", pod("a"))], key="ka")
    assert result["ok"]
    obj, revision = remote.get("pods", "default", "a", consistent=False)
    assert obj["metadata"]["uid"] == "a" and revision == fake.revision() == result["revision"]
    assert remote.watch_log.last_revision == result["revision"]


def test_linearizable_read_sees_a_write_made_behind_the_worker(served):
    fake, service, remote, _ = served
    fake.call(create("b"), 1)
    obj, revision = remote.get("pods", "default", "b", consistent=True)
    assert obj is not None and revision >= fake.revision()


def test_stream_resumes_from_its_revision_after_a_reconnect(served):
    fake, service, remote, _ = served
    fake.call(create("c1"), 1)
    wait_for(lambda: remote.mirror.revision == fake.revision())
    resets, before = remote.watch_log.resets, fake.revision()
    service.drop_subscribers()
    wait_for(lambda: service.subscribers == 1 and remote.connected)
    fake.call(create("c2"), 1)
    wait_for(lambda: remote.mirror.revision == fake.revision())
    assert remote.watch_log.resets == resets          # no snapshot: resumed where it was
    assert [c.object["metadata"]["name"] for c in remote.watch_log.since(before)] == ["c2"]


def test_subscriber_behind_the_watch_log_gets_a_snapshot(served, caplog):
    fake, service, remote, _ = served
    caplog.set_level(logging.INFO)
    service.close()
    service.drop_subscribers()
    wait_for(lambda: not remote.connected)
    for i in range(20):                               # the store's log keeps 5
        fake.call(create("s%d" % i), 1)
    resets = remote.watch_log.resets
    service.start()
    wait_for(lambda: remote.mirror.revision == fake.revision())
    assert remote.watch_log.resets == resets + 1
    # Both sides say so: the store why, the worker how long its copy took to load.
    assert any("is behind" in r.getMessage() and "sending a snapshot" in r.getMessage() for r in caplog.records)
    wait_for(lambda: any("loaded from a snapshot at revision %d" % fake.revision() in r.getMessage()
                         for r in caplog.records))
    assert sorted(o["metadata"]["name"] for o in remote.list("pods", consistent=False)[0]) == \
        sorted("s%d" % i for i in range(20))
    assert remote.get("namespaces", None, "default", consistent=False)[0] is not None


def test_a_reset_of_the_store_sends_a_snapshot(served):
    fake, service, remote, _ = served
    fake.call(create("r"), 1)
    wait_for(lambda: remote.mirror.revision == fake.revision())
    resets = remote.watch_log.resets
    with fake.lock:
        fake.store.fsm.objects["pods"].clear()        # as a snapshot install replaces the state
        fake.store.fsm.revision += 1
    fake.change_log.reset(fake.revision())
    wait_for(lambda: remote.watch_log.resets == resets + 1)
    assert remote.get("pods", "default", "r", consistent=False)[0] is None


def test_state_frames_carry_leadership_and_term(served):
    fake, service, remote, leadership = served
    fake.current_term = 7
    service.leadership_changed(True)
    wait_for(lambda: remote.node.is_leader())
    assert remote.node.term() == 7 and leadership[-1] is True
    service.leadership_changed(False)
    wait_for(lambda: not remote.node.is_leader())


def test_worker_cut_off_from_its_store_stops_leading_and_is_not_ready(served):
    fake, service, remote, _ = served
    service.leadership_changed(True)
    wait_for(lambda: remote.node.is_leader())
    service.close()
    service.drop_subscribers()
    wait_for(lambda: not remote.node.is_leader())
    ready, reason = remote.ready()
    assert not ready and "store process unreachable" in reason


def test_big_objects_reach_the_mirror_in_frames_under_the_cap(served, monkeypatch):
    from shepherd_ha.store import local_protocol
    fake, service, remote, _ = served
    monkeypatch.setattr(local_protocol, "MAX_FRAME", 20000)
    big = []
    for i in range(6):
        obj = pod("big%d" % i)
        obj["metadata"]["annotations"] = {"pad": "b" * 6000}
        big.append(commands.write([commands.create("pods", obj)], "kb%d" % i, None))
    fake.call_many(big, 1)                   # one batch in the store's log: more than one frame's worth
    wait_for(lambda: remote.mirror.revision == fake.revision())
    assert len(remote.list("pods", consistent=False)[0]) == 6
    results = remote.committer.call_many([create("many%d" % i) for i in range(40)] +
                                         [commands.write([commands.create("pods", dict(pod("wide"), data="c" * 15000))],
                                                         "kw", None)], 2)
    assert len(results) == 41 and all(r["ok"] for r in results)


def test_a_frame_the_worker_cannot_apply_is_recovered_from_a_snapshot(served):
    fake, service, remote, _ = served
    real, failed = remote.mirror.apply_frame, []

    def flaky(frame):
        if frame.get("kind") == "changes" and not failed:
            failed.append(frame)
            raise ValueError("cannot apply")
        return real(frame)
    remote.mirror.apply_frame = flaky
    resets = remote.watch_log.resets
    fake.call(create("lost-once"), 1)
    wait_for(lambda: remote.mirror.revision == fake.revision())
    assert failed and remote.watch_log.resets == resets + 1
    assert remote.get("pods", "default", "lost-once", consistent=False)[0] is not None


def test_a_write_is_not_answered_ok_while_this_workers_copy_is_behind(tmp_path):
    """Read-your-writes: when the mirror cannot reach the write's revision in time (its
    stream is down), the write is a 503 that says it applied and how to get its result,
    never an 'ok' that a following read at resourceVersion=0 would contradict."""
    from shepherd_ha.store.raft_node import Unavailable
    fake = FakeReplica(log_size=5)
    service = StoreService(fake, str(tmp_path / "run" / "store.sock"))
    service.start()
    remote = RemoteReplica("r1", service.path, [], write_timeout=0.5)    # stream never started
    try:
        with pytest.raises(Unavailable) as info:
            remote.write([commands.create("pods", pod("late"))], key="k-late", timeout=0.5)
        assert info.value.outcome == "unknown"
        assert "applied" in str(info.value) and "Idempotency-Key" in str(info.value)
        assert fake.store.get("pods", "default", "late") is not None, "the write itself went through"
        remote.start()
        wait_for(lambda: remote.mirror.revision == fake.revision())
        again = remote.write([commands.create("pods", pod("late"))], key="k-late")
        assert again["ok"], "the retry with the same key returns the first outcome"
    finally:
        remote.close()
        service.close()


def test_a_modification_travels_without_its_previous_and_the_mirror_supplies_it(served, monkeypatch):
    fake, service, remote, _ = served
    fake.call(create("m"), 1)
    wait_for(lambda: remote.mirror.revision == fake.revision())
    before, _ = remote.get("pods", "default", "m", consistent=False)
    frames = []
    real_apply = remote.mirror.apply_frame
    monkeypatch.setattr(remote.mirror, "apply_frame", lambda frame: (frames.append(frame), real_apply(frame)))
    changed = dict(pod("m"), metadata=dict(pod("m")["metadata"], labels={"tier": "x"}))
    assert fake.call(commands.write([commands.update("pods", "default", "m", changed)], "k-m2", None), 1)["ok"]
    fake.call(commands.write([commands.delete("pods", "default", "m")], "k-m3", None), 1)
    wait_for(lambda: remote.mirror.revision == fake.revision())
    sent = [c for f in frames if f.get("kind") == "changes" for c in f["changes"]]
    assert [(c[1], c[4] is None) for c in sent] == [("MODIFIED", True), ("DELETED", False)]
    # The store's bytes travel as they are; the mirror decodes them once.
    assert isinstance(sent[0][3], bytes) and isinstance(sent[1][4], bytes)
    modified, deleted = remote.watch_log.since(fake.revision() - 2)
    assert modified.type == "MODIFIED" and modified.previous is before
    assert modified.object["metadata"]["labels"] == {"tier": "x"}
    assert deleted.type == "DELETED" and deleted.previous["metadata"]["labels"] == {"tier": "x"}


def test_a_store_process_keeps_no_previous_version_of_a_modification_in_its_log():
    """The stream drops it anyway (the mirror has it): a store process's log does not hold it."""
    changes = [Change(1, "ADDED", "pods", b'{"a":1}', None), Change(2, "MODIFIED", "pods", b'{"a":2}', b'{"a":1}'),
               Change(3, "DELETED", "pods", None, b'{"a":2}')]
    for keep, previous in ((True, [None, b'{"a":1}', b'{"a":2}']), (False, [None, None, b'{"a":2}'])):
        holder = types.SimpleNamespace(_previous_in_log=keep, change_log=WatchLog(10))
        Replica._log_changes(holder, changes)
        assert [c.previous for c in holder.change_log.since(0)] == previous
