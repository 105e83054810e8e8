"""PySyncObj's dumps written by a thread of the store process (store/pysyncobj_overrides/
dump_writer.py): the dump holds the state at the entry it names while applies go on,
no process is forked, a failed dump is reported and the next one written, and a dump
overtaken by a newer one (a leader's snapshot, a shutdown) is not renamed over it."""
import os
import threading
import time

import pytest
from pysyncobj.config import SERIALIZER_STATE

from shepherd_ha.store import commands
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.pysyncobj_overrides import dump_writer
from shepherd_ha.store.pysyncobj_overrides.dump_file import dump_bytes, read_dump


def configmap(name, value):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"},
            "data": {"k": value}}


def stored_fsm(count):
    fsm = StoreFSM()
    ok = fsm.apply(commands.write([commands.create("namespaces", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})]))
    assert ok["ok"], ok
    for i in range(count):
        ok = fsm.apply(commands.write([commands.create("configmaps", configmap("c%d" % i, "v%d" % i))],
                                      key="idem:u/%d" % i))
        assert ok["ok"], ok
    return fsm


def dump_data(fsm):
    """What PySyncObj hands its serializer: (consumers' data, last entry, entry before, cluster)."""
    return ([{"_SyncObj__enabledCodeVersion": 0}, {"fsm": fsm}], (b"\x00", 12, 1), (b"\x00", 11, 1), set())


class HeldPickle:
    """Stands for the pickler: the dump thread waits at its start until the test lets it go."""

    def __init__(self):
        self.go = threading.Event()
        self.thread_names = []
        self.then_raise = None

    def dump(self, obj, file):
        self.thread_names.append(threading.current_thread().name)
        assert self.go.wait(30), "the test never let the dump go"
        if self.then_raise is not None:
            raise self.then_raise
        self.real(obj, file)


@pytest.fixture
def held(monkeypatch):
    pickle = HeldPickle()
    pickle.real = dump_writer.write_pickle
    monkeypatch.setattr(dump_writer, "write_pickle", pickle.dump)
    return pickle


def writer_in(directory):
    return dump_writer.DumpWriter(os.path.join(str(directory), "raft.dump"), 4096, True, None, None, None)


def finished(writer, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        state, entry = writer.checkSerializing()
        if state != SERIALIZER_STATE.SERIALIZING:
            return state, entry
        assert time.monotonic() < deadline, "the dump was not written in %s s" % timeout
        time.sleep(0.01)


def test_the_dump_holds_the_state_at_its_entry_while_applies_go_on(tmp_path, held):
    fsm = stored_fsm(300)
    before = fsm.digest()
    revision, dedup = fsm.revision, list(fsm.dedup)
    writer = writer_in(tmp_path)
    writer.serialize(dump_data(fsm), 12)
    assert writer.writing()
    assert writer.getTransmissionData("follower") is None, "a dump being written is not sent to anyone"
    # The store moves on while the dump is held: updates, deletes, creates, new idempotency keys.
    for i in range(0, 300, 3):
        assert fsm.apply(commands.write([commands.update("configmaps", "default", "c%d" % i,
                                                         configmap("c%d" % i, "changed"))],
                                        key="idem:u/later-%d" % i))["ok"]
        assert fsm.apply(commands.write([commands.delete("configmaps", "default", "c%d" % (i + 1))]))["ok"]
        assert fsm.apply(commands.write([commands.create("configmaps", configmap("n%d" % i, "new"))]))["ok"]
    assert fsm.digest() != before
    held.go.set()
    assert finished(writer) == (SERIALIZER_STATE.SUCCESS, 12)
    assert not writer.writing()
    dumped = read_dump(str(tmp_path))
    assert dumped.digest() == before, "the dump holds the store as it was at the entry it names"
    assert (dumped.revision, list(dumped.dedup)) == (revision, dedup)
    assert dumped.get("configmaps", "default", "c0")["data"] == {"k": "v0"}
    assert held.thread_names == ["raft-dump"]
    assert not os.path.exists(str(tmp_path / "raft.dump.tmp"))


def test_no_process_is_forked_and_the_store_keeps_serving_meanwhile(tmp_path, held, monkeypatch):
    def no_fork():
        raise AssertionError("the dump forked a process")
    monkeypatch.setattr(os, "fork", no_fork)
    fsm = stored_fsm(50)
    writer = writer_in(tmp_path)
    writer.serialize(dump_data(fsm), 12)
    writer.serialize(dump_data(fsm), 13)        # PySyncObj never asks twice at once; ignored if it did
    assert writer.checkSerializing() == (SERIALIZER_STATE.SERIALIZING, 12)
    assert fsm.apply(commands.write([commands.create("configmaps", configmap("during", "x"))]))["ok"]
    held.go.set()
    assert finished(writer) == (SERIALIZER_STATE.SUCCESS, 12)
    assert writer.checkSerializing()[0] == SERIALIZER_STATE.NOT_SERIALIZING
    assert read_dump(str(tmp_path)).get("configmaps", "default", "during") is None


def test_a_failed_dump_is_reported_and_the_next_one_is_written(tmp_path):
    directory = tmp_path / "not-yet"
    writer = writer_in(directory)
    fsm = stored_fsm(5)
    writer.serialize(dump_data(fsm), 12)
    assert finished(writer) == (SERIALIZER_STATE.FAILED, 12)
    assert not writer.writing()
    directory.mkdir()
    writer.serialize(dump_data(fsm), 14)
    assert finished(writer) == (SERIALIZER_STATE.SUCCESS, 14)
    assert read_dump(str(directory)).digest() == fsm.digest()
    data = writer.getTransmissionData("follower")      # the written dump can be sent to a follower
    assert data is not None and data[1] and len(data[0]) > 0


def test_a_leaders_snapshot_installed_meanwhile_is_not_replaced_by_the_older_dump(tmp_path, held):
    fsm = stored_fsm(20)
    writer = writer_in(tmp_path)
    writer.serialize(dump_data(fsm), 12)
    newer = StoreFSM()
    snapshot = dump_bytes(newer, ["127.0.0.1:1"])
    # The leader's snapshot arrives in two chunks while our dump is held; the last one installs it.
    assert writer.setTransmissionData((snapshot[:100], True, False)) is False
    assert writer.setTransmissionData((snapshot[100:], False, True)) is True
    held.go.set()
    assert finished(writer) == (SERIALIZER_STATE.FAILED, 12), "the older dump is reported not written"
    assert (tmp_path / "raft.dump").read_bytes() == snapshot, "the leader's snapshot stays"
    # The next dump is ours again.
    writer.serialize(dump_data(fsm), 14)
    assert finished(writer) == (SERIALIZER_STATE.SUCCESS, 14)
    assert read_dump(str(tmp_path)).digest() == fsm.digest()


def test_a_dump_still_written_at_shutdown_is_not_renamed_into_place(tmp_path, held):
    writer = writer_in(tmp_path)
    writer.serialize(dump_data(stored_fsm(5)), 12)
    writer.abandon()
    held.go.set()
    assert finished(writer) == (SERIALIZER_STATE.FAILED, 12)
    assert not (tmp_path / "raft.dump").exists()
    writer.serialize(dump_data(stored_fsm(5)), 14)      # a tick after the shutdown: no new dump
    assert not writer.writing() and writer.checkSerializing()[0] == SERIALIZER_STATE.NOT_SERIALIZING


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")   # the death is the point
def test_a_dump_thread_that_dies_is_reported_failed_not_writing_forever(tmp_path, held):
    held.then_raise = SystemExit(3)        # not an Exception: would skip an `except Exception`
    writer = writer_in(tmp_path)
    writer.serialize(dump_data(stored_fsm(5)), 12)
    held.go.set()
    assert finished(writer) == (SERIALIZER_STATE.FAILED, 12)
    assert not writer.writing()


def test_the_frozen_state_pickles_as_the_store_and_its_dump_loads_as_one():
    import io
    import pickle
    from shepherd_ha.store.pysyncobj_overrides.restricted_pickle import DUMP_PROTOCOL, load_dump
    fsm = stored_fsm(30)
    frozen = dump_writer.frozen(fsm)
    assert pickle.dumps(frozen, DUMP_PROTOCOL) == pickle.dumps(fsm, DUMP_PROTOCOL), "the same opcodes as the store"
    written = io.BytesIO()
    dump_writer.write_pickle(frozen, written)       # as a dump is written: no memo
    loaded = load_dump(io.BytesIO(written.getvalue()))     # through the dump allow-list
    assert type(loaded) is StoreFSM and loaded.digest() == fsm.digest()
    assert list(loaded.dedup) == list(fsm.dedup) and loaded.revision == fsm.revision


def test_pysyncobj_builds_its_serializer_from_ours():
    import pysyncobj.syncobj
    assert pysyncobj.syncobj.Serializer is dump_writer.DumpWriter
