"""The Raft port: PySyncObj's TCP transport, made safe to expose to a network.

What PySyncObj 0.3.17 does, and what was seen (issue 14, findings 1 and 2):
- every authenticated message is unpickled with plain pickle: the Raft password was
  code execution on every replica;
- the read buffer grows with `bytes +=` in the tick thread, for whatever length the
  first 4 bytes claim: 32 MB of junk cost a follower 6.6 s of CPU and an election;
- a connection that never authenticates is never closed (100 idle ones stayed open).

Here, per connection (GuardedConnection):
- a frame's length prefix is checked as soon as its 4 bytes arrive, before the body is
  read: at most HANDSHAKE_FRAME_BYTES until the peer has proved it holds the Raft
  password and named itself, MAX_FRAME_BYTES after; anything else is dropped at once;
- the body is collected in a bytearray (amortised appends, no quadratic copy);
- a frame is decrypted (AES-GCM, raft_cipher), inflated up to MAX_MESSAGE_BYTES, and
  unpickled without resolving any global (restricted_pickle); we send protocol 5;
- any failure drops the connection, with a rate-limited log line.
Per transport (GuardedTransport):
- an accepted connection must finish the handshake (random key, then a known peer
  address) within HANDSHAKE_SECONDS, else it is closed; at most MAX_PENDING of them
  wait at once (the oldest goes first); our own outgoing connections get the same
  deadline, so a peer address taken over by something that never answers is redialled;
- PySyncObj's read-only nodes and utility commands (add/remove nodes, transfer
  leadership, status over the Raft port) are refused: shepherd-ha uses none of them;
- after the handshake a message must be a dict with a str "type", or the link drops.
The listener accepts many connections per wake-up with a deeper backlog than
PySyncObj's 5, so a burst of junk connections does not keep real peers waiting.
"""
import functools
import logging
import socket
import struct
import zlib

from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection, _getAddrType
from pysyncobj.transport import TCPTransport

from shepherd_ha.store.entry_size import ENTRY_THRESHOLD

from .restricted_pickle import dumps_wire, loads_plain

log = logging.getLogger("shepherd_ha.store.raft_transport")

_LENGTH = struct.Struct("i")          # PySyncObj's frame header: native signed int

# A handshake frame holds a 32-byte random key or a host:port, about 150 bytes encrypted.
HANDSHAKE_FRAME_BYTES = 4096
# An append_entries holds entries up to appendEntriesBatchSizeBytes (8 MiB) plus the one
# that crosses it (under 8 MiB: bigger commands are refused, entry_size), pickled and
# compressed: under 16 MiB + a little. Twice that leaves room; a frame above is junk.
MAX_FRAME_BYTES = 4 * ENTRY_THRESHOLD
MAX_MESSAGE_BYTES = 8 * ENTRY_THRESHOLD          # inflated: a zlib bomb stops here
HANDSHAKE_SECONDS = 5.0
MAX_PENDING = 32                                 # connections still in their handshake
RANDOM_KEY_BYTES = 32                            # PySyncObj's os.urandom(32)
LISTEN_BACKLOG = 128
ACCEPTS_PER_WAKEUP = 64


class _Refused(Exception):
    pass


class _RateLimitedLog:
    """One line per `every` seconds, saying how many were dropped meanwhile."""

    def __init__(self, every=10.0):
        self.every, self.next_at, self.dropped = every, 0.0, 0

    def __call__(self, peer, reason):
        self.dropped += 1
        now = monotonic_time()
        if now >= self.next_at:
            log.warning("Raft port: dropped a connection from %s: %s (%d dropped since the last line)",
                        peer, reason, self.dropped)
            self.next_at, self.dropped = now + self.every, 0


_log_refusal = _RateLimitedLog()


def _inflate(data, limit):
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, limit)
    if inflater.unconsumed_tail:
        raise _Refused("message inflates past %d bytes" % limit)
    if not inflater.eof:
        raise _Refused("truncated compressed message")
    return out


class GuardedConnection(TcpConnection):
    """TcpConnection with a checked length prefix, a bytearray buffer and restricted unpickling."""

    _OVERRIDES = ("connect", "send", "_TcpConnection__processRead", "_TcpConnection__processParseMessage")

    def __init__(self, *args, **kwargs):
        self.frame_limit = HANDSHAKE_FRAME_BYTES
        self.handshake_deadline = None
        self.peer = "?"
        super().__init__(*args, **kwargs)
        sock = kwargs.get("socket")
        if sock is not None:
            try:
                name = sock.getpeername()
                self.peer = "%s:%s" % name[:2] if isinstance(name, tuple) else str(name)
            except OSError:
                pass

    # ---- lifecycle ----

    def connect(self, host, port):
        self.frame_limit = HANDSHAKE_FRAME_BYTES
        self.handshake_deadline = monotonic_time() + HANDSHAKE_SECONDS
        self.peer = "%s:%s" % (host, port)
        return super().connect(host, port)

    def authenticated(self):
        """The peer proved it holds the password and named itself: full-size frames from now on."""
        self.frame_limit = MAX_FRAME_BYTES
        self.handshake_deadline = None

    def refuse(self, reason):
        _log_refusal(self.peer, reason)
        self.disconnect()

    # ---- wire ----

    def send(self, message):
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = zlib.compress(dumps_wire(message), 3)
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(monotonic_time()))
        self._TcpConnection__writeBuffer += _LENGTH.pack(len(data)) + data
        self._TcpConnection__trySendBuffer()

    def _buffer(self):
        buf = self._TcpConnection__readBuffer
        if type(buf) is not bytearray:          # connect() and disconnect() reset it to bytes()
            buf = self._TcpConnection__readBuffer = bytearray(buf)
        return buf

    def _frame_length(self, buf):
        """The length of the frame at the head of buf, or None; refuses a bad prefix."""
        if len(buf) < _LENGTH.size:
            return None
        length = _LENGTH.unpack_from(buf)[0]
        if not 0 < length <= self.frame_limit:
            raise _Refused("frame length %d outside 1..%d" % (length, self.frame_limit))
        return length

    def _TcpConnection__processRead(self):
        buf = self._buffer()
        if len(buf) > self.frame_limit + _LENGTH.size:
            return False        # a whole frame is waiting: parse it before reading more
        sock = self._TcpConnection__socket
        try:
            incoming = sock.recv(self._TcpConnection__recvBufferSize)
        except socket.error as e:
            if e.errno not in (socket.errno.EAGAIN, socket.errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if not incoming:
            self.disconnect()
            return False
        buf += incoming
        try:
            self._frame_length(buf)
        except _Refused as exc:
            self.refuse(str(exc))
            return False
        return True

    def _TcpConnection__processParseMessage(self):
        if self.state == CONNECTION_STATE.DISCONNECTED:
            return None
        buf = self._buffer()
        try:
            length = self._frame_length(buf)
            if length is None or len(buf) - _LENGTH.size < length:
                return None
            with memoryview(buf) as view:          # one copy of the frame, not two
                data = bytes(view[_LENGTH.size:_LENGTH.size + length])
            del buf[:_LENGTH.size + length]
            if not self.encryptor:
                raise _Refused("no Raft password set: refusing unencrypted messages")
            timestamp = self.encryptor.extract_timestamp(data)
            if timestamp < self.recvLastTimestamp:
                raise _Refused("message timestamp went back (a replay?)")
            data = self.encryptor.decrypt(data)
            self.recvLastTimestamp = timestamp
            message = loads_plain(_inflate(data, MAX_MESSAGE_BYTES))
            if self.recvRandKey:
                if not (isinstance(message, tuple) and len(message) == 2 and message[0] == self.recvRandKey):
                    raise _Refused("message without this connection's random key (a replay?)")
                message = message[1]
        except Exception as exc:
            self.refuse(str(exc) or type(exc).__name__)
            return None
        return message


class RaftListener:
    """PySyncObj's TcpServer, with a deeper backlog, several accepts per wake-up and our connections."""

    def __init__(self, poller, host, port, on_new_connection, send_buffer, recv_buffer, timeout, keepalive):
        self._poller, self._host, self._port = poller, host, int(port)
        self._family = _getAddrType(host)
        self._send_buffer, self._recv_buffer = send_buffer, recv_buffer
        self._timeout, self._keepalive = timeout, keepalive
        self._on_new_connection = on_new_connection
        self._socket = None

    def bind(self):
        sock = socket.socket(self._family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._recv_buffer)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setblocking(False)
        try:
            sock.bind((self._host, self._port))
            sock.listen(LISTEN_BACKLOG)
        except OSError:
            sock.close()
            raise
        self._socket = sock
        self._poller.subscribe(sock.fileno(), self._on_event, POLL_EVENT_TYPE.READ | POLL_EVENT_TYPE.ERROR)

    def unbind(self):
        if self._socket is not None:
            self._poller.unsubscribe(self._socket.fileno())
            self._socket.close()
            self._socket = None

    def _on_event(self, descr, event):
        if event & POLL_EVENT_TYPE.ERROR:
            self.unbind()
            return
        for _ in range(ACCEPTS_PER_WAKEUP):
            try:
                sock, _ = self._socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:      # e.g. EMFILE: try again on the next wake-up
                return
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._recv_buffer)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setblocking(False)
                conn = GuardedConnection(poller=self._poller, socket=sock, timeout=self._timeout,
                                         sendBufferSize=self._send_buffer, recvBufferSize=self._recv_buffer,
                                         keepalive=self._keepalive)
            except OSError:
                sock.close()
                continue
            self._on_new_connection(conn)


class GuardedTransport(TCPTransport):
    """TCPTransport with deadlines and a cap for unauthenticated connections (see the module doc)."""

    _OVERRIDES = ("_createServer", "addNode", "_onTick", "_onNewIncomingConnection", "_onIncomingMessageReceived",
                  "_onOutgoingMessageReceived", "_onMessageReceived")

    def _createServer(self):
        conf = self._syncObj.conf
        host, port = (conf.bindAddress or self._selfNode.address).rsplit(":", 1)
        host = globalDnsResolver().resolve(host)
        self._server = RaftListener(self._syncObj._poller, host, port, self._onNewIncomingConnection,
                                    conf.sendBufferSize, conf.recvBufferSize, conf.connectionTimeout,
                                    conf.tcp_keepalive)

    def addNode(self, node):
        self._nodes.add(node)
        self._nodeAddrToNode[node.address] = node
        if self._shouldConnect(node):
            conf = self._syncObj.conf
            conn = GuardedConnection(poller=self._syncObj._poller, timeout=conf.connectionTimeout,
                                     sendBufferSize=conf.sendBufferSize, recvBufferSize=conf.recvBufferSize,
                                     keepalive=conf.tcp_keepalive)
            conn.encryptor = self._syncObj.encryptor
            conn.setOnConnectedCallback(functools.partial(self._onOutgoingConnected, conn))
            conn.setOnMessageReceivedCallback(functools.partial(self._onMessageReceived, node))
            conn.setOnDisconnectedCallback(functools.partial(self._onDisconnected, conn))
            self._connections[node] = conn

    def _onTick(self):
        super()._onTick()
        now = monotonic_time()
        for conn in list(self._unknownConnections) + list(self._connections.values()):
            deadline = getattr(conn, "handshake_deadline", None)
            if deadline is not None and now > deadline and conn.state != CONNECTION_STATE.DISCONNECTED:
                conn.refuse("no handshake within %.0f s" % HANDSHAKE_SECONDS)

    def _onNewIncomingConnection(self, conn):
        super()._onNewIncomingConnection(conn)
        conn.handshake_deadline = monotonic_time() + HANDSHAKE_SECONDS
        while len(self._unknownConnections) > MAX_PENDING:
            oldest = min(self._unknownConnections, key=lambda c: c.handshake_deadline or 0.0)
            oldest.refuse("more than %d connections in their handshake: closing the oldest" % MAX_PENDING)
            self._unknownConnections.discard(oldest)

    def _onIncomingMessageReceived(self, conn, message):
        if not conn.sendRandKey:
            if not (isinstance(message, bytes) and len(message) == RANDOM_KEY_BYTES):
                return conn.refuse("the first message is not a random key")
            return super()._onIncomingMessageReceived(conn, message)
        if not (isinstance(message, str) and message in self._nodeAddrToNode):
            # Neither read-only nodes nor utility commands: only the peers we were given.
            self._unknownConnections.discard(conn)
            return conn.refuse("%r is not one of this replica's peers" % (str(message)[:80],))
        super()._onIncomingMessageReceived(conn, message)
        conn.authenticated()

    def _onOutgoingMessageReceived(self, conn, message):
        if not conn.sendRandKey and not (isinstance(message, bytes) and len(message) == RANDOM_KEY_BYTES):
            return conn.refuse("the peer's first message is not a random key")
        super()._onOutgoingMessageReceived(conn, message)
        conn.authenticated()

    def _onMessageReceived(self, node, message):
        if not (isinstance(message, dict) and isinstance(message.get("type"), str)):
            conn = self._connections.get(node)
            if conn is not None:
                conn.refuse("a Raft message is a dict with a type, not %s" % type(message).__name__)
            return
        super()._onMessageReceived(node, message)
