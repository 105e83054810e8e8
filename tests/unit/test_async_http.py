"""The hollow fleet's keep-alive connection (bench/async_http.py) against a server that
closes connections: one closed while idle is opened afresh, and one closed as a request
went out is sent again on a new connection only when a replay is safe."""
import asyncio
import os
import sys

import pytest

BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

from async_http import AsyncConnection, HttpError  # noqa: E402


class ClosingServer:
    """Answers `200 <n>` (n: requests it answered so far) on keep-alive connections. With
    `drop_second`, it reads a connection's second request and closes without answering;
    with `close_idle`, it closes each connection right after its first answer."""

    def __init__(self, drop_second=False, close_idle=False, head_only_second=False, refuse_after=None):
        self.drop_second, self.close_idle = drop_second, close_idle
        self.head_only_second = head_only_second     # the second request: its head, then close
        self.refuse_after = refuse_after             # connections after this many: closed at once
        self.connections = 0
        self.requests = []            # (method, headers) of every request read
        self.answered = 0

    async def handle(self, reader, writer):
        self.connections += 1
        served = 0
        if self.refuse_after is not None and self.connections > self.refuse_after:
            writer.close()
            return
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                await reader.readexactly(int(headers.get("Content-Length", "0")))
                self.requests.append((lines[0].split(" ")[0], headers))
                served += 1
                if self.drop_second and served == 2:
                    break
                if self.head_only_second and served == 2:
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n")
                    await writer.drain()
                    break
                self.answered += 1
                body = str(self.answered).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                if self.close_idle:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def run(server, exchange):
    async def main():
        listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        conn = AsyncConnection("http://127.0.0.1:%d" % port, timeout=5.0)
        try:
            return await exchange(conn)
        finally:
            conn.close()
            listener.close()
            await listener.wait_closed()
    return asyncio.run(main())


def test_a_connection_the_server_closed_while_idle_is_opened_afresh():
    server = ClosingServer(close_idle=True)

    async def exchange(conn):
        first = await conn.request("GET", "/a")
        for _ in range(100):              # the server's close reaches the client
            if conn._reader.at_eof():
                break
            await asyncio.sleep(0.02)
        second = await conn.request("POST", "/b", b"{}")
        return first, second, conn.stale_retries

    first, second, retries = run(server, exchange)
    assert (first, second) == ((200, b"1"), (200, b"2"))
    assert server.connections == 2 and retries == 0
    assert [m for m, _ in server.requests] == ["GET", "POST"]     # nothing sent twice


def test_a_write_with_an_idempotency_key_is_sent_again_when_the_server_closes_as_it_goes_out():
    server = ClosingServer(drop_second=True)

    async def exchange(conn):
        await conn.request("GET", "/a")
        answer = await conn.request("PATCH", "/b", b"{}", headers={"Idempotency-Key": "k1"})
        return answer, conn.stale_retries

    answer, retries = run(server, exchange)
    assert answer == (200, b"2") and retries == 1
    assert server.connections == 2
    assert [(m, h.get("Idempotency-Key")) for m, h in server.requests] == [("GET", None), ("PATCH", "k1"),
                                                                           ("PATCH", "k1")]


def test_a_write_without_a_key_is_not_replayed_the_failure_is_the_callers():
    server = ClosingServer(drop_second=True)

    async def exchange(conn):
        await conn.request("GET", "/a")
        with pytest.raises(HttpError, match="IncompleteReadError"):
            await conn.request("POST", "/b", b"{}")
        return conn.stale_retries

    assert run(server, exchange) == 0
    assert [m for m, _ in server.requests] == ["GET", "POST"]


def test_a_request_whose_answer_had_begun_is_never_sent_again():
    # The head came back: the server had the request, whatever happened after.
    server = ClosingServer(head_only_second=True)

    async def exchange(conn):
        await conn.request("GET", "/a")
        with pytest.raises(HttpError, match="IncompleteReadError"):
            await conn.request("PATCH", "/b", b"{}", headers={"Idempotency-Key": "k1"})
        return conn.stale_retries

    assert run(server, exchange) == 0
    assert [m for m, _ in server.requests] == ["GET", "PATCH"]


def test_a_get_is_sent_again_and_a_failed_resend_names_both_failures():
    server = ClosingServer(drop_second=True, refuse_after=1)

    async def exchange(conn):
        await conn.request("GET", "/a")
        with pytest.raises(HttpError, match="sent again on a new connection after IncompleteReadError"):
            await conn.request("GET", "/b")
        return conn.stale_retries

    assert run(server, exchange) == 1
    assert server.connections == 2
