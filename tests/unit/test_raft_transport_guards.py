"""What the Raft port accepts (pysyncobj_overrides/restricted_pickle.py, transport.py):
no pickled globals, checked frame lengths, bounded inflation, a handshake deadline."""
import collections
import os
import pickle
import socket
import struct
import time
import zlib

import pysyncobj.serializer
import pysyncobj.syncobj
import pytest
from pysyncobj.node import TCPNode
from pysyncobj.poller import createPoller

from shepherd_ha.cli.local_cluster import find_base_port
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.pysyncobj_overrides import restricted_pickle, transport
from shepherd_ha.store.pysyncobj_overrides.restricted_pickle import RefusedPickle, load_dump, loads_plain
from shepherd_ha.store.raft_cipher import RaftCipher
from shepherd_ha.store.raft_node import RaftNode, RaftSettings
from tests.integration.raft_wire import RunsCommand, touch_command

SALT = "00112233445566778899aabbccddeeff"


def test_a_pickled_global_is_refused_and_never_called(tmp_path):
    marker = tmp_path / "ran"
    evil = pickle.dumps({"type": "append_entries", "x": RunsCommand(touch_command(str(marker)))}, 5)
    with pytest.raises(RefusedPickle, match="posix.system"):
        loads_plain(evil)
    with pytest.raises(RefusedPickle):
        load_dump(__import__("io").BytesIO(evil))      # nor from a dump
    assert not marker.exists()


def test_plain_data_passes_in_protocols_2_and_5():
    message = {"type": "append_entries", "term": 3, "entries": [(b"\x00\x80cmd", 7, 3)], "f": 1.5,
               "ok": True, "none": None, "nested": [[1, "a"], {"k": (2, 3)}]}
    assert loads_plain(pickle.dumps(message, 5)) == message
    command = (0, ({"type": "write", "ops": [{"op": "create", "object": {"a": [1, 2.5, None]}}]},))
    assert loads_plain(pickle.dumps(command, 2)) == command          # PySyncObj's log entries


def test_protocol_2_bytes_need_a_global_and_are_refused_on_the_wire():
    with pytest.raises(RefusedPickle, match="_codecs.encode"):
        loads_plain(pickle.dumps(b"\x80bytes", 2))


def test_a_dump_resolves_exactly_its_few_names():
    fsm = StoreFSM()
    fsm.dedup["k"] = {"ok": True}
    dump = ([{}, {"fsm": fsm}], (b"\x00cmd", 5, 1), (b"\x00cmd", 4, 1), {TCPNode("127.0.0.1:1")})
    import io
    loaded = load_dump(io.BytesIO(pickle.dumps(dump, 2)))
    assert isinstance(loaded[0][1]["fsm"], StoreFSM)
    assert isinstance(loaded[0][1]["fsm"].dedup, collections.OrderedDict)
    assert loaded[1] == (b"\x00cmd", 5, 1) and {n.address for n in loaded[3]} == {"127.0.0.1:1"}
    with pytest.raises(RefusedPickle):
        restricted_pickle._latin1("x", "rot13")           # _codecs.encode only as protocol 2's bytes
    with pytest.raises(RefusedPickle, match="collections.Counter"):
        load_dump(io.BytesIO(pickle.dumps(collections.Counter(a=1), 2)))


def test_pysyncobj_unpickles_entries_and_dumps_through_the_restricted_loaders():
    assert pysyncobj.syncobj.pickle is restricted_pickle.SAFE_PICKLE
    assert pysyncobj.serializer.pickle is restricted_pickle.SAFE_PICKLE


def test_a_log_entry_with_a_global_is_refused_as_a_value(tmp_path):
    marker = tmp_path / "ran"
    settings = RaftSettings(self_address="127.0.0.1:%d" % (find_base_port(1) + 100), peer_addresses=[],
                            data_dir=str(tmp_path / "d"), password="p" * 32, salt=SALT)
    node = RaftNode(settings, lambda changes: None, lambda revision: None)
    try:
        entry = b"\x00" + pickle.dumps((0, (RunsCommand(touch_command(str(marker))),)), 2)
        result = node.syncobj._SyncObj__doApplyCommand(entry)
        assert result["ok"] is False and "refused a Raft log entry" in result["message"]
        assert not marker.exists()
    finally:
        node.destroy()


# ---- one connection, on a socketpair, with PySyncObj's own poller ----

class _Conn:
    def __init__(self, authenticated=False):
        self.poller = createPoller("auto")
        self.ours, self.theirs = socket.socketpair()
        self.ours.setblocking(False)
        self.messages = []
        self.conn = transport.GuardedConnection(poller=self.poller, socket=self.ours, timeout=10 ** 7,
                                                onMessageReceived=self.messages.append)
        self.cipher = RaftCipher("p" * 32, SALT)
        self.conn.encryptor = self.cipher
        if authenticated:
            self.conn.authenticated()

    def push(self, data, polls=20):
        self.theirs.setblocking(False)
        try:
            self.theirs.sendall(data)
        except (BlockingIOError, BrokenPipeError, ConnectionResetError):
            pass
        for _ in range(polls):
            self.poller.poll(0.01)
            if self.conn.state == transport.CONNECTION_STATE.DISCONNECTED:
                break

    def frame(self, message, compressed=None):
        data = compressed if compressed is not None else zlib.compress(pickle.dumps(message, 5))
        data = self.cipher.encrypt_at_time(data, int(time.monotonic()))
        return struct.pack("i", len(data)) + data

    @property
    def closed(self):
        return self.conn.state == transport.CONNECTION_STATE.DISCONNECTED


def test_a_valid_frame_is_delivered():
    c = _Conn()
    c.push(c.frame(os.urandom(32)))
    assert len(c.messages) == 1 and not c.closed


@pytest.mark.parametrize("prefix", [0x7fffffff, -1, 0, transport.HANDSHAKE_FRAME_BYTES + 1])
def test_a_bad_length_prefix_drops_the_connection_before_the_body(prefix):
    c = _Conn()
    c.push(struct.pack("i", prefix) + b"\x00" * 100)
    assert c.closed and not c.messages


def test_junk_and_a_wrong_password_drop_the_connection():
    c = _Conn()
    c.push(struct.pack("i", 200) + os.urandom(200))
    assert c.closed
    other = _Conn()
    other.cipher = RaftCipher("q" * 32, SALT)
    other.push(other.frame({"type": "x"}))
    assert other.closed and not other.messages


def test_big_frames_only_once_authenticated():
    big = {"type": "append_entries", "entries": [(os.urandom(100000), 1, 1)]}
    c = _Conn()
    c.push(c.frame(big), polls=50)
    assert c.closed and not c.messages
    c = _Conn(authenticated=True)
    c.push(c.frame(big), polls=200)
    assert not c.closed and c.messages == [big]


def test_a_zlib_bomb_stops_at_the_inflation_cap():
    c = _Conn(authenticated=True)
    bomb = zlib.compress(b"\x00" * (transport.MAX_MESSAGE_BYTES + 1), 9)
    c.push(c.frame(None, compressed=bomb), polls=50)
    assert c.closed and not c.messages


def test_a_global_in_a_frame_drops_the_connection(tmp_path):
    marker = tmp_path / "ran"
    c = _Conn()
    c.push(c.frame(RunsCommand(touch_command(str(marker)))))
    assert c.closed and not c.messages and not marker.exists()


def test_a_chunked_entry_with_a_global_is_dropped_not_run(tmp_path):
    marker = tmp_path / "ran"
    settings = RaftSettings(self_address="127.0.0.1:%d" % (find_base_port(1) + 100), peer_addresses=[],
                            data_dir=str(tmp_path / "d"), password="p" * 32, salt=SALT)
    node = RaftNode(settings, lambda changes: None, lambda revision: None)
    try:
        evil = pickle.dumps((b"\x00" + pickle.dumps(0, 2), 99, 1, RunsCommand(touch_command(str(marker)))), 2)
        peer = TCPNode("127.0.0.1:1")
        base = {"type": "append_entries", "term": node.term() + 1, "commit_index": 0, "prevLogIdx": 1,
                "prevLogTerm": 0}
        with node.lock:
            node.syncobj._SyncObj__onMessageReceived(peer, dict(base, transmission="start", data=evil))
            node.syncobj._SyncObj__onMessageReceived(peer, dict(base, transmission="finish", data=b""))
        assert not marker.exists()
    finally:
        node.destroy()
