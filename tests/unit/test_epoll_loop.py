"""The API's event loop (api/epoll_loop.py) on a real waitress server over loopback:
quiet connections parked and still answered, idle ones still closed, big responses to
slow readers delivered whole, and no writing interest while a task holds its output."""
import gc
import http.client
import io
import socket
import threading
import time

import pytest

from waitress.channel import HTTPChannel

from shepherd_ha.api import epoll_loop, http_server

BIG = 8 * 1024 * 1024
HUGE = 48 * 1024 * 1024      # past waitress's 16 MiB output high-water mark, three times
MEDIUM = 512 * 1024


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def app(environ, start_response):
    path = environ["PATH_INFO"]
    if path == "/huge":
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(HUGE))])
        return (b"z" * (1 << 20) for _ in range(HUGE >> 20))
    if path == "/medium":            # one write: past waitress's 8 KiB string buffer, under its 1 MiB overflow
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(MEDIUM))])
        return [b"m" * MEDIUM]
    if path == "/big":
        start_response("200 OK", [("Content-Type", "application/octet-stream"), ("Content-Length", str(BIG))])
        return [b"x" * (BIG // 2), b"y" * (BIG // 2)]
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


def start_server(idle_timeout=2.0, **options):
    port = _free_port()
    thread = threading.Thread(target=http_server.serve, daemon=True, kwargs=dict(
        app=app, limits=http_server.Limits(0, 0), max_body=1 << 20, idle_timeout=idle_timeout,
        host="127.0.0.1", port=port, threads=8, _quiet=True, channel_request_lookahead=1, **options))
    thread.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return port
        except OSError:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def server():
    return start_server()


def get(conn, path):
    conn.request("GET", path)
    response = conn.getresponse()
    return response.status, response.read()


def test_a_quiet_keep_alive_connection_is_answered_again_later(server):
    port = server
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    assert get(conn, "/healthz") == (200, b"ok")
    time.sleep(0.8)                      # parked, and past a full pass
    assert get(conn, "/healthz") == (200, b"ok")
    conn.close()


def test_an_idle_connection_is_still_closed_by_the_idle_timeout(server):
    port = server
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while not answer.endswith(b"ok"):
        answer += sock.recv(1024)
    assert answer.startswith(b"HTTP/1.1 200")
    started = time.monotonic()
    assert sock.recv(1024) == b"", "closed by the server (idle_timeout 2 s)"
    assert time.monotonic() - started < 8
    sock.close()


def read_response(sock, body_length):
    """(head, body) of one response of `body_length` body bytes; closes the socket."""
    received, head_end = bytearray(), -1
    while head_end < 0 or len(received) - head_end - 4 < body_length:
        chunk = sock.recv(1 << 20)
        assert chunk, "the connection closed after %d bytes" % len(received)
        received += chunk
        if head_end < 0:
            head_end = received.find(b"\r\n\r\n")
    sock.close()
    return bytes(received[:head_end]), bytes(received[head_end + 4:])


def test_a_big_response_reaches_a_slow_reader_whole(server):
    port = server
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.3)          # read nothing yet: the socket's buffers fill, the rest waits for the loop
    head, body = read_response(sock, BIG)
    assert head.startswith(b"HTTP/1.1 200")
    assert len(body) == BIG and body[:1] == b"x" and body[-1:] == b"y"


def test_a_response_past_the_high_water_mark_flows_without_waiting_for_the_loop_timeout():
    """The task waits on its output lock above 16 MiB for the loop to flush: the loop
    must poll that channel for writing (a miss stalls until the loop's 60 s timeout,
    past this socket's 20 s timeout)."""
    port = start_server(asyncore_loop_timeout=60)
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    sock.sendall(b"GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.5)          # read nothing yet: past the mark, the task waits for the loop
    _, body = read_response(sock, HUGE)
    assert len(body) == HUGE


def test_a_channel_is_not_polled_for_writing_while_its_task_holds_its_output():
    """The spin: writable() is true (bytes buffered) but handle_write cannot take the lock."""
    from waitress.channel import HTTPChannel
    channel = object.__new__(HTTPChannel)
    channel.requests, channel.total_outbufs_len, channel.accepting = ["a request"], 119, False
    channel.adj = type("Adj", (), {"outbuf_high_watermark": 16 * 1024 * 1024})()
    channel.outbuf_lock = threading.Condition()
    assert channel.writable()
    held, release = threading.Event(), threading.Event()

    def task():
        with channel.outbuf_lock:
            held.set()
            release.wait(5)
    thread = threading.Thread(target=task)
    thread.start()
    held.wait(5)
    try:
        assert epoll_loop.wants_write(channel) is epoll_loop.BUSY, "the task holds the lock: the loop would spin"
        channel.total_outbufs_len = 17 * 1024 * 1024
        assert epoll_loop.wants_write(channel) is True, "above the mark the task waits for the loop to flush"
        channel.total_outbufs_len = 119
    finally:
        release.set()
        thread.join(5)
    assert epoll_loop.wants_write(channel) is True, "lock free: handle_write can flush"
    channel.requests = []
    assert epoll_loop.wants_write(channel) is True


def test_many_quiet_connections_and_one_busy_one(server):
    port = server
    quiet = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(300)]
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        assert all(get(conn, "/healthz") == (200, b"ok") for _ in range(50))
        conn.close()
        for sock in quiet[:20]:          # parked ones wake when they speak
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        for sock in quiet[:20]:
            answer = b""
            while not answer.endswith(b"ok"):
                chunk = sock.recv(1024)
                assert chunk, "closed before answering"
                answer += chunk
            assert answer.startswith(b"HTTP/1.1 200")
    finally:
        for sock in quiet:
            sock.close()


def test_the_channel_map_hands_each_added_descriptor_over_once():
    channels = epoll_loop.ChannelMap()
    channels[5] = "a"
    channels[7] = "b"
    del channels[5]
    assert channels.take_added() == {5, 7}
    assert channels.take_added() == set()
    channels[5] = "c"                    # a descriptor reused by a new channel
    assert channels.take_added() == {5} and channels == {5: "c", 7: "b"}


def test_between_full_passes_new_reused_and_parked_connections_are_all_served(monkeypatch):
    # No full pass after the first: every channel is found through the awake set and
    # the map's added descriptors alone.
    monkeypatch.setattr(epoll_loop, "FULL_PASS_SECONDS", 3600.0)
    port = start_server(idle_timeout=120.0)      # no connection here is idle long enough to be closed
    conns = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for _ in range(30)]
    for conn in conns:                   # each a new channel, added between passes
        assert get(conn, "/healthz") == (200, b"ok")
    time.sleep(0.2)                      # all quiet now: parked
    for conn in conns:                   # parked ones wake on their request
        assert get(conn, "/healthz") == (200, b"ok")
    for conn in conns[:15]:              # closed: their descriptors are reused below
        conn.close()
    fresh = [http.client.HTTPConnection("127.0.0.1", port, timeout=5) for _ in range(15)]
    for conn in fresh + conns[15:]:
        assert get(conn, "/healthz") == (200, b"ok")
        assert get(conn, "/big")[1] == b"x" * (BIG // 2) + b"y" * (BIG // 2)
    for conn in fresh + conns[15:]:
        conn.close()


def _output_held(port):
    """Bytes the server's connections on `port` keep in their output buffers."""
    held = 0
    for obj in gc.get_objects():
        server = getattr(obj, "server", None) if isinstance(obj, HTTPChannel) else None
        if server is None or str(getattr(server, "effective_port", None)) != str(port):
            continue                          # (no socket calls: other tests' servers may be closing)
        for buffer in list(obj.outbufs):
            held += len(buffer.strbuf)
            inner = getattr(buffer.buf, "file", None)
            if isinstance(inner, io.BytesIO):
                try:
                    held += len(inner.getvalue())     # (a copy, no view: the server may close it meanwhile)
                except ValueError:
                    pass                              # closed: let go since
    return held


@pytest.mark.parametrize("event_loop", ["epoll", "poll"])
def test_an_idle_connection_does_not_keep_its_last_answer_in_memory(event_loop):
    port = start_server(idle_timeout=120.0, event_loop=event_loop)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    for _ in range(3):
        assert get(conn, "/medium") == (200, b"m" * MEDIUM)
    deadline = time.monotonic() + 5
    while _output_held(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _output_held(port) == 0           # waitress alone keeps the whole 512 KiB until the next request
    assert get(conn, "/healthz") == (200, b"ok")     # and the connection still serves
    conn.close()
