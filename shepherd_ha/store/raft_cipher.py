"""AES-GCM for Raft messages, in place of PySyncObj's Fernet.

PySyncObj encrypts every Raft message with Fernet when a password is set (it
must be: without one any peer message is unpickled). Fernet is AES-CBC plus
HMAC-SHA256 plus base64 in Python-level code, ~180 us per message round trip
here; one AES-GCM call in C is ~10 us. Under load a replica sends and receives
several messages per Raft entry, so this was the largest single cost of the
Raft layer (55 % of plain PySyncObj's CPU, 8-12 % of a replica's).

The object offers what PySyncObj's TcpConnection calls on its encryptor:
encrypt_at_time, extract_timestamp and decrypt. A message is
    version (1 byte) | timestamp (8) | nonce (12) | ciphertext and tag
with version and timestamp authenticated as associated data; PySyncObj's own
replay defences (a random key per connection inside every message, timestamps
that never go back) are kept. The key comes from the Raft password through
PBKDF2 with the cluster's random salt (`--raft-salt`, raft_secrets), so the same
password in two clusters gives two keys and no table computed once fits them all.

Nonces never repeat under one key: 4 random bytes per process, then a 64-bit
counter started from the wall clock in nanoseconds. Two processes could only
collide with the same random prefix (2^-32) and overlapping counter ranges.

Every replica of a cluster must use it: a replica speaking Fernet fails the
handshake (and says nothing, as PySyncObj drops undecryptable messages).
"""
import itertools
import os
import struct
import time

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from .raft_secrets import salt_bytes

VERSION = 1
_SALT_CONTEXT = b"shepherd-ha/raft/aes-gcm/v2/"
_HEADER = struct.Struct(">BQ12s")      # version, timestamp, nonce
_COUNTER = struct.Struct(">Q")
_MASK = 2 ** 64 - 1


class InvalidToken(Exception):
    """A message that is not ours: wrong version, wrong key, or tampered with."""


def derive_key(password, salt):
    """The AES key from the Raft password and the cluster's salt (hex, raft_secrets)."""
    if not isinstance(password, bytes):
        password = str(password).encode()
    return PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=_SALT_CONTEXT + salt_bytes(salt),
                      iterations=100000).derive(password)


class RaftCipher:
    """Encrypts with the key of `password`; decrypts with it or with the key of any of
    `also_accepted` (a rotation in progress: docs/security.md)."""

    def __init__(self, password, salt, also_accepted=()):
        self._aead = AESGCM(derive_key(password, salt))
        self._accepted = [self._aead] + [AESGCM(derive_key(p, salt)) for p in also_accepted if p != password]
        self._prefix = os.urandom(4)
        self._counter = itertools.count(time.time_ns())   # next() is atomic under the GIL

    def encrypt_at_time(self, data, timestamp):
        nonce = self._prefix + _COUNTER.pack(next(self._counter) & _MASK)
        header = _HEADER.pack(VERSION, max(0, int(timestamp)), nonce)
        return header + self._aead.encrypt(nonce, bytes(data), header)

    def extract_timestamp(self, token):
        """The timestamp, before authentication (as Fernet's does); decrypt() checks it."""
        if len(token) < _HEADER.size:
            raise InvalidToken("message too short")
        version, timestamp, _ = _HEADER.unpack_from(token)
        if version != VERSION:
            raise InvalidToken("unknown message version %d" % version)
        return timestamp

    def decrypt(self, token):
        self.extract_timestamp(token)
        header = bytes(token[:_HEADER.size])
        body = bytes(token[_HEADER.size:])
        for aead in self._accepted:        # a failed tag check costs about a microsecond
            try:
                return aead.decrypt(header[9:], body, header)
            except InvalidTag:
                continue
        raise InvalidToken("message failed authentication (another Raft password?)")
