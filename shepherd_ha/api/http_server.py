"""The API's waitress server, with the limits waitress lacks.

Waitress reads a whole request (headers and body, to a temporary file past 512 KiB)
before the app runs, accepts connections until one global limit and then stops
accepting altogether, and keeps idle connections as long as `channel_timeout`. So
1,000 idle connections from one address stopped `/readyz` for everyone, and 20
unauthenticated 11 MB bodies held 220 MB of temporary files. Here, in waitress's
own hooks (its channel and parser classes, its accept and maintenance calls):

- connections: at most `per_address` from one client address (beyond: 429 and
  close) and `total` in all; at the total, the longest-idle connection is closed
  to make room (none idle: 503 and close). Idle connections close after
  `idle_timeout` s, and a request's headers must arrive within `header_timeout` s.
- bodies: checked when the headers are in, before a byte of body is read: a
  Content-Length over `max_body` is a 413, and `gate(method, path, headers)` (the
  token check) may refuse (401/403); a refused request's body is read and dropped,
  never stored, while its answer goes out (a client still sending would otherwise
  get a reset instead of the answer). Chunked bodies are counted as they come.
- `Expect: 100-continue` on a request without a body (waitress sends `100 Continue`
  and then waits forever for a body that never comes) or on a refused one: no 100,
  the answer at once.
Every refusal is a Kubernetes Status object, as the app's own errors.
"""
import collections
import http
import inspect
import json
import logging
import socket
import threading
import time

import waitress
from waitress.buffers import OverflowableBuffer
from waitress.channel import HTTPChannel
from waitress.parser import HTTPRequestParser
from waitress.server import BaseWSGIServer
from waitress.utilities import Error, RequestEntityTooLarge

from .epoll_loop import EPOLL_LOOP, ChannelMap
from .errors import status_body

log = logging.getLogger(__name__)


def _check_waitress():
    """What Channel._flush_some relies on in waitress 3 (epoll_loop.py checks the rest):
    an upgrade that moves it fails here, not as connections closed after each answer."""
    needs = [(HTTPChannel, "sent_continue"), (HTTPChannel, "outbuf_lock"), (OverflowableBuffer, "buf"),
             (OverflowableBuffer, "overflowed"), (OverflowableBuffer, "close")]
    for owner, name in needs:
        if not hasattr(owner, name) and name not in owner.__init__.__code__.co_names:   # (set in __init__)
            raise ImportError("api/http_server.py: waitress's %s has no %r any more" % (owner.__name__, name))
    if "do_close" not in inspect.signature(HTTPChannel._flush_some).parameters:
        raise ImportError("api/http_server.py: waitress's HTTPChannel._flush_some takes no do_close any more")


_check_waitress()

# Defaults of --max-connections, --max-connections-per-address, --idle-connection-timeout.
MAX_CONNECTIONS = 4096
MAX_CONNECTIONS_PER_ADDRESS = 128
IDLE_TIMEOUT = 60.0
HEADER_TIMEOUT = 10.0
LINGER_SECONDS = 5.0            # a refused request's body is drained (and dropped) this long at most
MAX_CHUNK_LINE = 1024           # a chunk-size line (hex size and extensions) longer than this is garbage
CLEANUP_INTERVAL = 2.0          # how often waitress looks for idle connections


class StatusError(Error):
    """A waitress error answered as a Kubernetes Status (JSON), with extra headers."""

    def __init__(self, code, message, reason=None, headers=None):
        super().__init__(message)
        self.code, self.message, self.status_reason, self.extra = code, message, reason, dict(headers or {})
        self.reason = http.HTTPStatus(code).phrase

    def to_response(self, ident=None):
        body = json.dumps(status_body(self.code, self.message, self.status_reason)).encode()
        headers = [("Content-Type", "application/json")] + list(self.extra.items())
        return "%d %s" % (self.code, self.reason), headers, body


def too_large(max_body):
    return StatusError(413, "request body is larger than %d bytes" % max_body)


class Limits:
    """Connections per client address and in all, counted across one process's listeners."""

    def __init__(self, total=MAX_CONNECTIONS, per_address=MAX_CONNECTIONS_PER_ADDRESS):
        self.total, self.per_address = total, per_address
        self.by_address = collections.Counter()
        self.open = 0
        self.refused = collections.Counter()      # reason -> count, for /metrics and tests
        self._lock = threading.Lock()

    def take(self, address):
        """None if a connection from `address` may open (counted), else the reason."""
        with self._lock:
            if self.per_address and self.by_address[address] >= self.per_address:
                self.refused["per-address"] += 1
                return "per-address"
            if self.total and self.open >= self.total:
                return "total"
            self.by_address[address] += 1
            self.open += 1
            return None

    def give_back(self, address):
        with self._lock:
            self.open -= 1
            self.by_address[address] -= 1
            if self.by_address[address] <= 0:
                del self.by_address[address]

    def snapshot(self):
        with self._lock:
            return {"open": self.open, "addresses": len(self.by_address), "refused": dict(self.refused),
                    "maxConnections": self.total, "maxConnectionsPerAddress": self.per_address}


def _refuse_connection(conn, error):
    """Answer a connection we will not serve, and close it (never blocks)."""
    status, headers, body = error.to_response()
    head = "HTTP/1.1 %s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n" % (
        status, "".join("%s: %s\r\n" % h for h in headers), len(body))
    try:
        conn.setblocking(False)
        conn.send(head.encode() + body)
    except OSError:
        pass
    try:
        conn.close()
    except OSError:
        pass


def build(limits, max_body, gate=None, header_timeout=HEADER_TIMEOUT):
    """(channel factory, maintenance function) for waitress servers under `limits`.
    gate(method, path, headers) -> None or an ApiError; headers as waitress keeps
    them (upper case, '_' for '-': AUTHORIZATION)."""

    class Parser(HTTPRequestParser):
        def __init__(self, adj, channel=None):
            super().__init__(adj)
            self.channel = channel
            self.started = time.monotonic()

        def parse_header(self, header_plus):
            super().parse_header(header_plus)
            if self.body_rcv is None:
                return            # no body: the app checks everything, with its usual answers
            if self.chunked and "CONTENT_LENGTH" in self.headers:
                # RFC 9112 6.1: either may be the one a proxy in front believes (smuggling)
                error = StatusError(400, "a request may carry Transfer-Encoding or Content-Length, not both")
            elif not self.chunked and self.content_length > max_body:
                error = too_large(max_body)
            else:
                refused = gate(self.command, self.path, self.headers) if gate is not None else None
                error = None if refused is None else StatusError(refused.code, refused.message, refused.reason,
                                                                  refused.headers)
            if error is not None:
                self.refuse(error)

        def refuse(self, error):
            self.error, self.completed = error, True
            if self.body_rcv is not None:
                self.body_rcv.getbuf().close()
            self.body_rcv, self.content_length = None, 0
            if self.channel is not None:
                self.channel.refusing = True      # what follows on this connection is dropped

        def received(self, data):
            consumed = super().received(data)
            if self.body_rcv is not None and not self.completed and self.body_bytes_received > max_body:
                self.refuse(too_large(max_body))           # a chunked body, counted as it comes
            elif self.chunked and self.body_rcv is not None and len(self.body_rcv.control_line) > MAX_CHUNK_LINE:
                self.refuse(StatusError(400, "a chunked body's chunk-size line is longer than %d bytes: it is "
                                             "not chunked encoding" % MAX_CHUNK_LINE))
            elif isinstance(self.error, RequestEntityTooLarge):
                self.refuse(too_large(max_body))
            if self.completed:
                self.expect_continue = False    # answered now: no 100 Continue for a body not read
            return consumed

    class Dropped:
        """What a connection sends after a refused request: read and thrown away."""
        completed = empty = error = expect_continue = False
        headers_finished = True

        def __init__(self):
            self.started = time.monotonic()

        def received(self, data):
            return len(data)

        def close(self):
            pass

    class Channel(HTTPChannel):
        lingering_until = None
        refusing = False
        drained = 0
        _counted = False

        def __init__(self, server, sock, addr, adj, map=None):
            super().__init__(server, sock, addr, adj, map)
            self._counted = True

        def parser_class(self, adj):
            return Dropped() if self.refusing else Parser(adj, self)

        def readable(self):
            if self.lingering_until is not None:
                if time.monotonic() >= self.lingering_until:
                    self._close_now()
                    return False
                return True
            return super().readable()

        def writable(self):
            return False if self.lingering_until is not None else super().writable()

        def handle_read(self):
            if self.lingering_until is None:
                return super().handle_read()
            try:
                data = self.recv(self.adj.recv_bytes)       # b"" (client done): recv closes us
            except OSError:
                return self._close_now()
            self.drained += len(data)
            if self.drained > 2 * max_body:
                self._close_now()

        def handle_close(self):
            if self.refusing and self.lingering_until is None and self.connected:
                # Answer sent: stop writing, and drain what the client still sends for a
                # moment, so it reads the answer instead of a reset.
                try:
                    self.socket.shutdown(socket.SHUT_WR)
                except OSError:
                    return self._close_now()
                self.lingering_until = time.monotonic() + LINGER_SECONDS
                self.will_close = self.close_when_flushed = False
                return
            self._close_now()

        def _close_now(self):
            self.lingering_until = None
            HTTPChannel.handle_close(self)

        def _flush_some(self, do_close=True):
            flushed = super()._flush_some(do_close=do_close)
            # Once a large answer is all sent, its buffer (a BytesIO once more than 8 KiB
            # waited) still holds every byte of it until this connection's next request:
            # an idle keep-alive connection kept its last list in memory
            # (docs/benchmarks.md, run Y). A fresh buffer lets it go. Only under the
            # output lock (a task may append; the loop flushes without it when no task
            # is queued), never inside send_continue, and not for a running request's
            # temporary file (each chunk would get a new one).
            if self.total_outbufs_len or len(self.outbufs) != 1 or self.outbufs[0].buf is None \
                    or self.sent_continue or (self.requests and self.outbufs[0].overflowed):
                return flushed
            if not self.outbuf_lock.acquire(False):       # re-entrant for a task already holding it
                return flushed
            try:
                spent = self.outbufs[0]
                if self.total_outbufs_len or len(self.outbufs) != 1 or len(spent):
                    return flushed
                self.outbufs[0] = OverflowableBuffer(self.adj.outbuf_overflow)
            finally:
                self.outbuf_lock.release()
            try:
                spent.close()
            except Exception:  # noqa: BLE001 - as waitress closes its own: the answer was sent
                self.logger.exception("Unexpected error when closing an outbuf")
            return flushed

        def del_channel(self, map=None):
            if self._counted:
                self._counted = False
                limits.give_back(self.addr[0] if isinstance(self.addr, tuple) else self.addr)
            super().del_channel(map)

    def make_channel(server, conn, addr, adj, map=None):
        address = addr[0] if isinstance(addr, tuple) else addr
        reason = limits.take(address)
        if reason == "total" and _close_longest_idle(server):
            reason = limits.take(address)
        if reason == "per-address":
            return _refuse_connection(conn, StatusError(
                429, "too many connections from %s: at most %d at once per client address (the limit is "
                "--max-connections-per-address); close idle connections or reuse them" % (address, limits.per_address),
                "TooManyRequests", {"Retry-After": "1"}))
        if reason == "total":
            limits.refused["total"] += 1
            return _refuse_connection(conn, StatusError(
                503, "this replica has %d connections open, its limit (--max-connections), none of them idle: "
                "retry after 1 s or use another replica" % limits.total, "ServiceUnavailable",
                {"Retry-After": "1"}))
        try:
            return Channel(server, conn, addr, adj, map)
        except BaseException:
            limits.give_back(address)
            raise

    def maintenance(server, now):
        BaseWSGIServer.maintenance(server, now)       # idle connections (channel_timeout)
        late = time.monotonic() - header_timeout
        for channel in list(server.active_channels.values()):
            request = getattr(channel, "request", None)
            if request is not None and not request.headers_finished and request.started < late:
                channel.will_close = True             # headers trickling in (slowloris)

    return make_channel, maintenance


def _close_longest_idle(server):
    """Close the connection idle longest (no request running or arriving); False if none."""
    idle = [c for c in server.active_channels.values()
            if not c.requests and c.request is None and getattr(c, "lingering_until", None) is None]
    if not idle:
        return False
    oldest = min(idle, key=lambda c: c.last_activity)
    oldest.handle_close()
    return True


def serve(app, limits, max_body, gate=None, idle_timeout=IDLE_TIMEOUT, header_timeout=HEADER_TIMEOUT,
          event_loop="epoll", on_dispatcher=None, **options):
    """waitress.serve(app, **options) with the limits above; runs until the process ends.
    options["fix_addr"]: the client address of what accept() returns (a Unix socket's).
    event_loop "epoll" (api/epoll_loop.py), or "poll": waitress's own, which
    bench/bench_idle_connections.py compares it with. on_dispatcher: called with
    waitress's task dispatcher before serving (api/thread_budget.py resizes it)."""
    make_channel, maintenance = build(limits, max_body, gate, header_timeout)
    options.update(channel_timeout=idle_timeout, cleanup_interval=min(CLEANUP_INTERVAL, idle_timeout),
                   # never select(): it raises ValueError on a descriptor numbered 1,024 or
                   # more, which killed the API worker at ~1,000 connections (event_loop)
                   asyncore_use_poll=True,
                   # ours first: waitress's own limit would stop accepting altogether
                   connection_limit=(limits.total or 10 ** 6) + 64,
                   # a safety net only: Content-Length and chunked bodies are refused above
                   max_request_body_size=max_body + 1)
    quiet = options.pop("_quiet", False)
    fix_addr = options.pop("fix_addr", None)
    if event_loop not in ("epoll", "poll"):
        raise ValueError("event_loop: epoll or poll, not %r" % (event_loop,))
    if event_loop == "epoll":
        server = waitress.create_server(app, map=ChannelMap(), **options)
        server.asyncore = EPOLL_LOOP
    else:
        server = waitress.create_server(app, **options)
    if on_dispatcher is not None:
        on_dispatcher(server.task_dispatcher)
    if not quiet:
        server.print_listen("Serving on http://{}:{}")
    listeners = [server] if isinstance(server, BaseWSGIServer) else \
        [s for s in server.map.values() if isinstance(s, BaseWSGIServer)]
    for listener in listeners:
        if fix_addr is not None:
            # behind the TLS terminator (a Unix socket): the limits and REMOTE_ADDR see the
            # TLS client's address (shepherd_ha/tls/serving.py client_address)
            listener.fix_addr = fix_addr
        listener.channel_class = make_channel
        listener.maintenance = lambda now, listener=listener: maintenance(listener, now)
    server.run()
