"""A lean asyncio HTTP/1.1 keep-alive connection, for the hollow fleet.

One connection per simulated node is what real agents hold; with asyncio a
thousand of them cost one thread and a few hundred microseconds of CPU per
request. Only what the Shepherd HA API answers is handled: Content-Length or
chunked bodies, keep-alive unless the server says `Connection: close`.
No streaming: the kubelet simulator's watch of all pods goes through the project's client
(shepherd_ha/client), the node watches through hollow_node_watch.py.
Requests on one connection are serialized (a node's lease and status loops share
it): two coroutines reading one stream would take each other's answers.
"""
import asyncio
import json
import urllib.parse

MERGE_PATCH = "application/merge-patch+json"


class HttpError(Exception):
    """The connection failed or the answer could not be read (the request may have applied)."""


def host_port(url):
    parsed = urllib.parse.urlsplit(url if "://" in url else "http://" + url)
    return parsed.hostname, parsed.port or 80


def _replayable(method, headers):
    """As Go's net/http: a safe method, or a request that names its idempotency key."""
    return method in ("GET", "HEAD", "OPTIONS", "TRACE") or any(
        name.lower() in ("idempotency-key", "x-idempotency-key") for name in (headers or {}))


class AsyncConnection:
    def __init__(self, url, timeout=10.0):
        self.host, self.port = host_port(url)
        self.timeout = timeout
        self._reader = self._writer = None
        self._lock = None               # created on first use, inside the loop
        self._host_header = ("%s:%d" % (self.host, self.port)).encode()
        self.stale_retries = 0          # requests sent again after the server closed a reused connection

    async def request(self, method, path, body=None, content_type="application/json", headers=None,
                      timeout=None):
        """(status, body bytes). Raises HttpError (connection closed first) on any failure."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        try:
            return await asyncio.wait_for(self._locked(method, path, body, content_type, headers),
                                          timeout or self.timeout)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - _locked closed the connection if it was in use
            raise HttpError("%s %s: %s: %s" % (method, path, type(exc).__name__, exc)) from None

    async def json(self, method, path, obj=None, content_type="application/json", headers=None, timeout=None):
        """(status, decoded JSON or None)."""
        body = None if obj is None else json.dumps(obj, separators=(",", ":")).encode()
        status, data = await self.request(method, path, body, content_type, headers, timeout)
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            return status, None

    async def _locked(self, *args):
        async with self._lock:
            try:
                return await self._exchange(*args)
            except BaseException:
                self.close()        # failed or cut off mid-answer: the stream is out of step
                raise

    async def _exchange(self, method, path, body, content_type, headers):
        reused = self._usable()
        if not reused:
            # (A connection the server closed or reset while idle, as a replica does after
            # --idle-connection-timeout, has its EOF or error read already: opened afresh.)
            await self._reopen()
        try:
            raw = await self._send_for_head(method, path, body, content_type, headers)
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as exc:
            if not reused or getattr(exc, "partial", b"") != b"" or not _replayable(method, headers):
                raise
            first = exc
        else:
            return await self._rest(raw)
        # A reused connection closed before a byte of the answer came back: most likely
        # the server closed it as the request went out. Sent again once on a new
        # connection, as Go's transport does, and only when a replay is safe (a server
        # that died after applying it must not apply it twice): GET, HEAD, OPTIONS, TRACE or an
        # Idempotency-Key (which every write of the hollow fleet carries).
        await self._reopen()
        self.stale_retries += 1
        try:
            raw = await self._send_for_head(method, path, body, content_type, headers)
        except Exception as exc:  # noqa: BLE001 - both failures told
            raise ConnectionError("sent again on a new connection after %s: %s: %s"
                                  % (type(first).__name__, type(exc).__name__, exc)) from None
        return await self._rest(raw)

    def _usable(self):
        return (self._writer is not None and not self._writer.is_closing() and not self._reader.at_eof()
                and self._reader.exception() is None)

    async def _reopen(self):
        self.close()
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    async def _send_for_head(self, method, path, body, content_type, headers):
        """Send the request; the answer's head (status line and fields)."""
        head = [b"%s %s HTTP/1.1" % (method.encode(), path.encode()), b"Host: " + self._host_header,
                b"Accept: application/json", b"User-Agent: hollow-fleet"]
        for name, value in (headers or {}).items():
            head.append(("%s: %s" % (name, value)).encode())
        if body is not None:
            head.append(b"Content-Type: " + content_type.encode())
        head.append(b"Content-Length: %d" % (len(body) if body is not None else 0))
        self._writer.write(b"\r\n".join(head) + b"\r\n\r\n" + (body or b""))
        await self._writer.drain()
        return await self._reader.readuntil(b"\r\n\r\n")

    async def _rest(self, raw):
        """(status, body) of an answer whose head is `raw`; the body read from the stream."""
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                fields[name.strip().lower()] = value.strip()
        if "chunked" in fields.get("transfer-encoding", "").lower():
            data = await self._read_chunked()
        else:
            data = await self._reader.readexactly(int(fields.get("content-length", "0")))
        if fields.get("connection", "").lower() == "close":
            self.close()
        return status, data

    async def _read_chunked(self):
        parts = []
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                await self._reader.readuntil(b"\r\n")     # no trailers from waitress
                return b"".join(parts)
            parts.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)

    def close(self):
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001 - the socket may be gone already
                pass
        self._reader = self._writer = None
