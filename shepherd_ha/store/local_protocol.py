"""The replica's local protocol: how its API workers talk to its store process.

A Unix socket in a 0700 directory (the socket itself 0600): only this user's
processes reach it. Frames are a 4-byte big-endian length and a pickle body,
length-capped; bodies are read with an Unpickler that refuses every global, so a
frame can only ever hold builtins (dict, list, tuple, str, bytes, numbers, None)
and unpickling one runs no code. The first frame each way is a hello carrying the
protocol version; a mismatch closes the connection with a message saying so.

Calls: {"id": n, "op": name, "args": {...}} answered by {"id": n, "result": ...}
or {"id": n, "error": {"type", "message", "outcome"|"size"/"limit"}}: errors cross
as values and `raise_error` rebuilds them (Unavailable, CommandTooLarge). Answers
may come out of order (a write waits for Raft while a read barrier returns), so
`Client` multiplexes its calls on one connection with a reader thread.
"""
import io
import itertools
import os
import pickle
import socket
import struct
import threading

from .entry_size import CommandTooLarge
from .membership import NotLeader, Refused
from .raft_node import Unavailable

VERSION = 1
MAX_FRAME = 64 * 1024 * 1024      # a snapshot is sent in chunks well under this
_HEADER = struct.Struct(">I")
SOCKET_NAME = "store.sock"


class ProtocolError(Exception):
    """The peer sent something this protocol does not allow; the connection is closed."""


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("global %s.%s refused: local frames hold builtins only" % (module, name))


def encode(body):
    data = pickle.dumps(body, protocol=pickle.HIGHEST_PROTOCOL)
    if len(data) > MAX_FRAME:
        raise ProtocolError("frame of %d bytes exceeds the %d-byte limit" % (len(data), MAX_FRAME))
    return _HEADER.pack(len(data)) + data


def decode(data):
    try:
        return _NoGlobals(io.BytesIO(data)).load()
    except Exception as exc:          # refused global, truncated or garbage: never trusted
        raise ProtocolError("undecodable frame: %s" % exc)


def _read_exactly(sock, size):
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(sock):
    (size,) = _HEADER.unpack(_read_exactly(sock, _HEADER.size))
    if size > MAX_FRAME:
        raise ProtocolError("frame of %d bytes announced, limit %d" % (size, MAX_FRAME))
    return decode(_read_exactly(sock, size))


class Connection:
    """A socket with framed, thread-safe sends."""

    def __init__(self, sock):
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, body):
        self.send_encoded(encode(body))

    def send_encoded(self, data):
        with self._send_lock:
            self.sock.sendall(data)

    def send_split(self, make, items):
        """Send make(items) as one frame, or as several over halves of `items` when that
        frame would pass the cap (many big objects); one item alone must fit."""
        try:
            data = encode(make(items))
        except ProtocolError:
            if len(items) <= 1:
                raise
            half = len(items) // 2
            self.send_split(make, items[:half])
            self.send_split(make, items[half:])
            return
        self.send_encoded(data)

    def recv(self):
        return read_frame(self.sock)

    def close(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def hello(conn):
    """Client side of the handshake."""
    conn.send({"hello": VERSION})
    answer = conn.recv()
    if not isinstance(answer, dict) or answer.get("hello") != VERSION:
        raise ProtocolError("store process speaks protocol %r, this worker %d: restart the replica"
                            % (answer.get("hello") if isinstance(answer, dict) else answer, VERSION))


def accept_hello(conn):
    """Server side: True if the client speaks our version (it is told otherwise)."""
    first = conn.recv()
    if isinstance(first, dict) and first.get("hello") == VERSION:
        conn.send({"hello": VERSION})
        return True
    conn.send({"hello": VERSION, "error": "protocol version mismatch: got %r, want %d"
               % (first.get("hello") if isinstance(first, dict) else first, VERSION)})
    return False


def connect(path, timeout=2.0):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(path)
        conn = Connection(sock)
        hello(conn)
    except BaseException:
        sock.close()
        raise
    sock.settimeout(None)
    return conn


def listen(path):
    """A listening socket at `path`, only this user may connect (dir 0700, socket 0600)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    if os.path.exists(path):
        os.unlink(path)           # a socket left by a killed store process
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(path)
    finally:
        os.umask(old)
    sock.listen(64)
    return sock


# ---- errors as values ----

def error_value(exc):
    if isinstance(exc, Unavailable):
        return {"type": "Unavailable", "message": str(exc), "outcome": exc.outcome}
    if isinstance(exc, CommandTooLarge):
        return {"type": "CommandTooLarge", "size": exc.size, "limit": exc.limit}
    if isinstance(exc, Refused):
        return {"type": "Refused", "code": exc.code, "message": str(exc)}
    if isinstance(exc, NotLeader):
        return {"type": "NotLeader", "leader": exc.leader, "leaderApi": exc.leader_api}
    return {"type": "Internal", "message": "%s: %s" % (type(exc).__name__, exc)}


def raise_error(value):
    if value["type"] == "Unavailable":
        raise Unavailable(value["message"], value["outcome"])
    if value["type"] == "CommandTooLarge":
        raise CommandTooLarge(value["size"], value["limit"])
    if value["type"] == "Refused":
        raise Refused(value["code"], value["message"])
    if value["type"] == "NotLeader":
        raise NotLeader(value["leader"], value["leaderApi"])
    raise RuntimeError("store process: %s" % value["message"])


class Client:
    """Calls to the store process, multiplexed on one connection (reconnected on demand).
    A call while the store process is unreachable raises Unavailable: the write never
    left this process ('not-applied'), or the answer was lost ('unknown')."""

    def __init__(self, path):
        self.path = path
        self._lock = threading.Lock()
        self._conn = None
        self._pending = {}            # id -> [event, answer]
        self._ids = itertools.count(1)

    def _connection(self):
        with self._lock:
            if self._conn is None:
                try:
                    conn = connect(self.path)
                except (OSError, EOFError, ProtocolError) as exc:
                    raise Unavailable("store process unreachable (%s)" % exc, "not-applied")
                self._conn = conn
                threading.Thread(target=self._read_loop, args=(conn,), name="store-client", daemon=True).start()
            return self._conn

    def _read_loop(self, conn):
        try:
            while True:
                answer = conn.recv()
                slot = self._pending.pop(answer.get("id"), None)
                if slot is not None:
                    slot[1] = answer
                    slot[0].set()
        except (OSError, EOFError, ProtocolError, AttributeError):
            pass
        with self._lock:
            if self._conn is conn:
                self._conn = None
        conn.close()
        for ident in list(self._pending):     # fail whoever waits on this connection
            slot = self._pending.get(ident)
            if slot is not None and slot[2] is conn:
                self._pending.pop(ident, None)
                slot[0].set()

    def call(self, op, wait=None, **args):
        """The store's answer to `op` (the store bounds it by `wait` s); its error re-raised here."""
        conn = self._connection()
        ident = next(self._ids)
        slot = [threading.Event(), None, conn]
        self._pending[ident] = slot
        try:
            data = encode({"id": ident, "op": op, "args": args})
        except ProtocolError:
            self._pending.pop(ident, None)
            raise
        try:
            conn.send_encoded(data)
        except OSError as exc:
            self._pending.pop(ident, None)
            raise Unavailable("store process unreachable (%s)" % exc, "not-applied")
        # The store bounds every call by its own timeout; this is only the backstop.
        if not slot[0].wait(None if wait is None else wait + 5.0) or slot[1] is None:
            self._pending.pop(ident, None)
            raise Unavailable("store process stopped answering (call %s)" % op, "unknown")
        answer = slot[1]
        if "error" in answer:
            raise_error(answer["error"])
        return answer["result"]

    def close(self):
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
