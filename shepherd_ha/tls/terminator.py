"""TLS in front of waitress: an asyncio loop in its own thread accepts TLS on the public
port and pipes each connection's plaintext to waitress on a Unix socket only this user
can reach (0600 in a 0700 directory).

Why a terminator rather than another WSGI server: waitress stays the HTTP server, so
everything built on it holds unchanged (client_disconnected for quiet log followers and
watches, channel_request_lookahead, its connection limit, a thread pool sized by flow
control, stop_waitress_server); each TLS connection is one waitress connection, and a
client that goes away closes its waitress connection at once. The TLS itself is the
standard library's (OpenSSL), driven by asyncio's SSL transport; one thread handles
every connection, so idle keep-alive connections cost no thread.

- A connection whose first byte is not a TLS handshake record (plain HTTP to the TLS
  port) gets a plain `400` saying to use https, and is closed.
- The handshake (and the first byte) must come within HANDSHAKE_TIMEOUT.
- Beyond `max_connections` open connections a new one is closed at once, and so is one
  from an address with `max_handshakes_per_address` connections still before their
  handshake (idle TCP connections from one address cannot fill the terminator; past the
  handshake, waitress counts connections per client address: api/http_server.py).
- SO_REUSEPORT: each API worker runs its own terminator on the shared port in front
  of its own waitress (the kernel spreads connections), as with plain HTTP.
- The client's address reaches the app: the terminator's end of the Unix connection is
  bound to an abstract name carrying it (`peer_name`), which waitress gets from accept()
  and `serving.py` turns back into REMOTE_ADDR and REMOTE_PORT (`peer_from_name`).
  Only a process that can open the 0600 socket can claim an address: this user's.
"""
import asyncio
import collections
import itertools
import logging
import os
import socket
import threading

log = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT = 10.0
ACCEPT_PAUSE = 0.1       # seconds without accepting after accept() failed (EMFILE: no descriptor free)
MAX_CONNECTIONS = 1000
TLS_HANDSHAKE_RECORD = 0x16
PLAIN_REFUSAL = (b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n"
                 b"Content-Length: %d\r\n\r\n%s")


PEER_PREFIX = b"\0shepherd-peer|"
_names = itertools.count()


def peer_name(addr):
    """An abstract Unix socket name carrying a TCP peer (host, port), unique in this process."""
    return PEER_PREFIX + ("%s|%d|%d|%d" % (addr[0], addr[1], os.getpid(), next(_names))).encode()


def peer_from_name(name):
    """(host, port) from a name made by peer_name, else None."""
    if isinstance(name, str):
        name = name.encode("utf-8", "surrogateescape")
    if not isinstance(name, bytes) or not name.startswith(PEER_PREFIX):
        return None
    try:
        host, port = name[len(PEER_PREFIX):].decode().split("|")[:2]
        return host, int(port)
    except (UnicodeDecodeError, ValueError):
        return None


def _refusal(port):
    text = b"this port speaks TLS: use https://HOST:%d (with the cluster's CA, e.g. DIR/ca.crt)\n" % port
    return PLAIN_REFUSAL % (len(text), text)


class _Pipe(asyncio.Protocol):
    """One side of a piped connection: what it receives goes to its peer's transport,
    with back-pressure both ways (a slow reader pauses the other side's reads)."""

    def __init__(self, on_close=None):
        self.transport = None
        self.peer = None
        self.pending = []
        self.on_close = on_close

    def connection_made(self, transport):
        self.transport = transport

    def attach(self, peer):
        self.peer = peer
        for data in self.pending:
            peer.transport.write(data)
        self.pending = []

    def data_received(self, data):
        if self.peer is None:
            self.pending.append(data)
            self.transport.pause_reading()
        else:
            self.peer.transport.write(data)

    def eof_received(self):
        self._close_peer()
        return False

    def connection_lost(self, exc):
        self._close_peer()
        if self.on_close is not None:
            self.on_close()
            self.on_close = None

    def _close_peer(self):
        if self.peer is not None and self.peer.transport is not None and not self.peer.transport.is_closing():
            self.peer.transport.close()

    def pause_writing(self):
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self):
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


class TlsTerminator:
    """Terminate TLS on `listen_sock` (bound and listening) and pipe to the Unix socket
    `backend`. start() runs it in a daemon thread; stop() closes everything."""

    def __init__(self, context, listen_sock, backend, handshake_timeout=HANDSHAKE_TIMEOUT,
                 max_connections=MAX_CONNECTIONS, max_handshakes_per_address=None, name="tls"):
        self.context, self.sock, self.backend = context, listen_sock, backend
        self.handshake_timeout, self.max_connections = handshake_timeout, max_connections
        self.max_handshakes_per_address = max_handshakes_per_address
        self.handshaking = collections.Counter()        # client address -> connections before the pipe
        self.refused_handshakes = 0
        self.port = listen_sock.getsockname()[1]
        self.name = name
        self.open = 0
        self.refused_plain = 0
        self.failed_handshakes = 0
        self._loop = None
        self._thread = None
        self._started = threading.Event()
        self._tasks = set()
        self._pipes = set()

    # ---- life ----

    def start(self):
        self.sock.setblocking(False)
        self._thread = threading.Thread(target=self._run, name=self.name + "-terminator", daemon=True)
        self._thread.start()
        self._started.wait(5)
        return self

    def _run(self):
        self._loop = loop = asyncio.new_event_loop()
        loop.add_reader(self.sock.fileno(), self._accept)
        self._started.set()
        try:
            loop.run_forever()
            # stop() cancelled the handshakes still running; let them end (their
            # per-address counts released) before the loop closes under them.
            pending = [task for task in self._tasks if not task.done()]
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=1.0))
        finally:
            loop.close()

    def stop(self, timeout=5.0):
        loop = self._loop
        if loop is None or loop.is_closed():
            return

        def shutdown():
            loop.remove_reader(self.sock.fileno())
            for task in list(self._tasks):
                task.cancel()
            for pipe in list(self._pipes):
                if pipe.transport is not None:
                    pipe.transport.abort()
            loop.stop()
        try:
            loop.call_soon_threadsafe(shutdown)
        except RuntimeError:      # the loop closed meanwhile
            pass
        if self._thread is not None:
            self._thread.join(timeout)
        self.sock.close()

    def serve_forever(self):
        """Block the calling thread (an API worker's main thread) while the loop runs."""
        self.start()
        self._thread.join()

    # ---- connections ----

    def _accept(self):
        for _ in range(64):                 # a burst of connections, then other work
            try:
                conn, addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:          # EMFILE and the like: keep serving the open ones
                # The listener stays readable: without a pause this would spin (and log) at
                # full speed until a descriptor frees. Look again in ACCEPT_PAUSE.
                log.warning("%s: accept failed: %s; pausing accepts for %.1f s", self.name, exc, ACCEPT_PAUSE)
                fd = self.sock.fileno()
                self._loop.remove_reader(fd)
                self._loop.call_later(ACCEPT_PAUSE, self._loop.add_reader, fd, self._accept)
                return
            if self.open >= self.max_connections:
                conn.close()
                continue
            limit = self.max_handshakes_per_address
            if limit and self.handshaking[addr[0]] >= limit:
                self.refused_handshakes += 1
                conn.close()
                continue
            self.handshaking[addr[0]] += 1
            conn.setblocking(False)
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass
            self.open += 1
            task = self._loop.create_task(self._handle(conn, addr))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _first_byte(self, conn):
        loop = self._loop
        ready = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: ready.done() or ready.set_result(None))
        try:
            await asyncio.wait_for(ready, self.handshake_timeout)
        finally:
            loop.remove_reader(conn.fileno())
        return conn.recv(1, socket.MSG_PEEK)

    async def _handle(self, conn, addr):
        try:
            await self._connect(conn, addr)
        finally:
            self.handshaking[addr[0]] -= 1
            if self.handshaking[addr[0]] <= 0:
                del self.handshaking[addr[0]]

    async def _connect(self, conn, addr):
        loop = self._loop
        client = None
        try:
            first = await self._first_byte(conn)
            if not first:
                conn.close()
                self._closed()
                return
            if first[0] != TLS_HANDSHAKE_RECORD:
                self.refused_plain += 1
                self._refuse_plain(conn)
                self._closed()
                return
            client = _Pipe(on_close=self._closed)
            await loop.connect_accepted_socket(lambda: client, conn, ssl=self.context,
                                               ssl_handshake_timeout=self.handshake_timeout)
        except (asyncio.TimeoutError, OSError, asyncio.CancelledError, ConnectionError) as exc:
            if client is None or client.transport is None:
                if not isinstance(exc, asyncio.CancelledError):
                    self.failed_handshakes += 1
                    log.debug("%s: connection from %s dropped before TLS: %s", self.name, addr, exc)
                conn.close()
                self._closed()
            return
        client.transport.pause_reading()
        try:
            backend = _Pipe()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.bind(peer_name(addr))
                await loop.sock_connect(sock, self.backend)
            except BaseException:
                sock.close()
                raise
            await loop.create_unix_connection(lambda: backend, sock=sock)
        except OSError as exc:
            log.warning("%s: the HTTP server behind TLS (%s) is unreachable: %s", self.name, self.backend, exc)
            client.transport.close()
            return
        client.attach(backend)
        backend.attach(client)
        self._pipes.add(client)
        client.on_close = lambda: (self._pipes.discard(client), self._closed())
        client.transport.resume_reading()

    def _closed(self):
        self.open -= 1

    def _refuse_plain(self, conn):
        """A plain 400 to a plain-HTTP client, never blocking the loop: what it sent so far
        is read (so that the close is not a reset), the answer fits the socket buffer."""
        try:
            for _ in range(4):              # bounded: a client that keeps sending gets its answer anyway
                if not conn.recv(65536):
                    break
        except (BlockingIOError, InterruptedError):
            pass
        except OSError:
            conn.close()
            return
        try:
            conn.send(_refusal(self.port))
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        conn.close()


def listening_socket(host, port, reuse_port=False, backlog=1024):
    """A TCP listening socket (SO_REUSEPORT when API workers share the port)."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(backlog)
    return sock
