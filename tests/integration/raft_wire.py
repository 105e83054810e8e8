"""A client of the Raft port that speaks PySyncObj's framing with the real password:
what an attacker holding the Raft password (or a leaked password file) would send.
Used by tests/integration/test_raft_transport.py and bench/bench_raft_junk.py.

A frame is: native int length | AES-GCM(zlib(pickle(message))). The handshake: we
send a random key, the replica answers (our key, its key), then every message is
(its key, message); the second one names a peer address.
"""
import os
import pickle
import shlex
import socket
import struct
import time
import zlib

from shepherd_ha.store.raft_cipher import RaftCipher


class RunsCommand:
    """Finding 1's message: unpickling it runs a shell command."""

    def __init__(self, command):
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def touch_command(path):
    return "touch %s" % shlex.quote(path)


class RaftWire:
    def __init__(self, address, password, salt, cluster_id, timeout=5.0):
        """Speaks to the replica at `address` as one of its peers would (its cluster's
        password, salt and id)."""
        host, _, port = address.rpartition(":")
        self.cipher = RaftCipher(password, salt, cluster_id)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.their_key = None
        self._buffer = b""

    def frame(self, message, protocol=5):
        if self.their_key is not None:
            message = (self.their_key, message)
        data = self.cipher.encrypt_at_time(zlib.compress(pickle.dumps(message, protocol), 3), int(time.monotonic()))
        return struct.pack("i", len(data)) + data

    def send(self, message):
        self.sock.sendall(self.frame(message))

    def receive(self, timeout=5.0):
        """The next message (decrypted, unpickled: we trust our own test replica), None if closed."""
        self.sock.settimeout(timeout)
        while True:
            if len(self._buffer) >= 4:
                length = struct.unpack("i", self._buffer[:4])[0]
                if len(self._buffer) >= 4 + length:
                    data, self._buffer = self._buffer[4:4 + length], self._buffer[4 + length:]
                    return pickle.loads(zlib.decompress(self.cipher.decrypt(data)))
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self._buffer += chunk

    def exchange_keys(self):
        """Our random key out, the replica's in: now we are past its password check."""
        self.send(os.urandom(32))
        answer = self.receive()
        assert isinstance(answer, tuple) and len(answer) == 2, "no key exchange answer: %r" % (answer,)
        self.their_key = answer[1]

    def closed_by_peer(self, timeout):
        return closed_by_peer(self.sock, timeout)

    def close(self):
        self.sock.close()


def closed_by_peer(sock, timeout):
    """True once the replica has closed the connection (within timeout)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except ConnectionResetError:
        return True
    except (socket.timeout, TimeoutError):
        return False
    return False


def send_junk(address, prefix, size, chunk=1 << 20):
    """Connect and push `prefix` then `size` bytes of junk; returns the bytes that went out
    before the replica closed the connection."""
    host, _, port = address.rpartition(":")
    sent = 0
    junk = os.urandom(chunk)
    try:
        with socket.create_connection((host, int(port)), timeout=5.0) as sock:
            sock.sendall(prefix)
            while sent < size:
                sock.sendall(junk[:min(chunk, size - sent)])
                sent += min(chunk, size - sent)
    except OSError:
        pass
    return sent
