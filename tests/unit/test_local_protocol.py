"""The store process's local protocol: framing, caps, versions, a pickle that may hold no global."""
import os
import pickle
import socket
import struct
import threading

import pytest

from shepherd_ha.store import local_protocol as lp
from shepherd_ha.store.entry_size import CommandTooLarge
from shepherd_ha.store.raft_node import Unavailable


def pair():
    a, b = socket.socketpair()
    return lp.Connection(a), lp.Connection(b)


def test_frames_round_trip_builtins_in_order():
    left, right = pair()
    bodies = [{"id": 1, "op": "submit", "args": {"command": {"ops": [1, 2.5, None, True]}, "b": b"\x00"}},
              ("tuple", 3), "x" * 100000]
    for body in bodies:
        left.send(body)
    assert [right.recv() for _ in bodies] == bodies


def test_a_global_in_a_frame_is_refused_and_runs_nothing():
    class Evil:
        def __reduce__(self):
            return (os.system, ("touch /tmp/should-not-exist-local-protocol",))
    data = pickle.dumps(Evil())
    with pytest.raises(lp.ProtocolError, match="refused"):
        lp.decode(data)
    assert not os.path.exists("/tmp/should-not-exist-local-protocol")


def test_an_announced_frame_over_the_cap_is_refused_before_it_is_read():
    a, b = socket.socketpair()
    a.sendall(struct.pack(">I", lp.MAX_FRAME + 1))
    with pytest.raises(lp.ProtocolError, match="limit"):
        lp.read_frame(b)


def test_sending_a_frame_over_the_cap_fails_on_the_sender(monkeypatch):
    monkeypatch.setattr(lp, "MAX_FRAME", 1000)
    with pytest.raises(lp.ProtocolError, match="exceeds"):
        lp.encode("y" * 2000)


def test_truncated_frame_is_end_of_stream():
    a, b = socket.socketpair()
    a.sendall(lp.encode({"id": 1})[:-3])
    a.close()
    with pytest.raises(EOFError):
        lp.read_frame(b)


def test_version_mismatch_is_told_to_the_client():
    client, server = pair()
    client.send({"hello": lp.VERSION + 1})
    assert lp.accept_hello(server) is False
    assert "mismatch" in client.recv()["error"]
    server.send({"hello": lp.VERSION + 1})
    client.send({"hello": lp.VERSION})       # as hello() would have
    with pytest.raises(lp.ProtocolError, match="protocol"):
        lp.hello(client)


def test_errors_cross_as_values():
    with pytest.raises(Unavailable) as info:
        lp.raise_error(lp.error_value(Unavailable("no quorum", "unknown")))
    assert info.value.outcome == "unknown" and "no quorum" in str(info.value)
    with pytest.raises(CommandTooLarge) as too_large:
        lp.raise_error(lp.error_value(CommandTooLarge(10, 5)))
    assert (too_large.value.size, too_large.value.limit) == (10, 5)


def test_socket_is_private(tmp_path):
    path = str(tmp_path / "run" / "s.sock")
    sock = lp.listen(path)
    try:
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    finally:
        sock.close()


def test_client_multiplexes_answers_out_of_order(tmp_path):
    path = str(tmp_path / "s.sock")
    listener = lp.listen(path)

    def serve():
        conn = lp.Connection(listener.accept()[0])
        assert lp.accept_hello(conn)
        first, second = conn.recv(), conn.recv()
        conn.send({"id": second["id"], "result": second["op"]})
        conn.send({"id": first["id"], "error": lp.error_value(Unavailable("late", "not-applied"))})
    threading.Thread(target=serve, daemon=True).start()
    client = lp.Client(path)
    answers = {}

    def slow():
        try:
            client.call("first", 5)
        except Unavailable as exc:
            answers["first"] = str(exc)
    t = threading.Thread(target=slow)
    t.start()
    while not client._pending:
        pass
    answers["second"] = client.call("second", 5)
    t.join(5)
    assert answers == {"second": "second", "first": "late"}
    client.close()
    listener.close()


def test_client_of_a_missing_store_raises_unavailable(tmp_path):
    client = lp.Client(str(tmp_path / "nothing.sock"))
    with pytest.raises(Unavailable, match="unreachable") as info:
        client.call("status", 1)
    assert info.value.outcome == "not-applied"


def test_a_batch_too_big_for_one_frame_goes_in_several(monkeypatch):
    monkeypatch.setattr(lp, "MAX_FRAME", 5000)
    left, right = pair()
    items = ["z%d" % i + "z" * 1000 for i in range(12)]
    left.send_split(lambda part: {"kind": "changes", "changes": part}, items)
    got, frames = [], 0
    while len(got) < len(items):
        got += right.recv()["changes"]
        frames += 1
    assert got == items and frames > 1
    with pytest.raises(lp.ProtocolError):
        left.send_split(lambda part: {"changes": part}, ["w" * 6000])   # one item alone must fit
