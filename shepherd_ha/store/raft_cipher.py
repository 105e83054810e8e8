"""AES-GCM for Raft messages, in place of PySyncObj's Fernet.

PySyncObj encrypts every Raft message with Fernet when a password is set (it
must be: without one any peer message is unpickled). Fernet is AES-CBC plus
HMAC-SHA256 plus base64 in Python-level code, ~180 us per message round trip
here; one AES-GCM call in C is ~10 us. Under load a replica sends and receives
several messages per Raft entry, so this was the largest single cost of the
Raft layer (55 % of plain PySyncObj's CPU, 8-12 % of a replica's).

The object offers what PySyncObj's TcpConnection calls on its encryptor:
encrypt_at_time, extract_timestamp and decrypt. A message is
    version (1 byte) | timestamp (8) | nonce (12) | cluster id (16) | ciphertext and tag
with the header authenticated as associated data; PySyncObj's own
replay defences (a random key per connection inside every message, timestamps
that never go back) are kept. The key comes from the Raft password through
PBKDF2 with the cluster's random salt (`--raft-salt`, raft_secrets), so the same
password in two clusters gives two keys and no table computed once fits them all.

Nonces never repeat under one key: 4 random bytes per process, then a 64-bit
counter started from the wall clock in nanoseconds. Two processes could only
collide with the same random prefix (2^-32) and overlapping counter ranges.

Every replica of a cluster must use it: a replica speaking Fernet fails the
handshake (and says nothing, as PySyncObj drops undecryptable messages).

The cluster id (cluster_identity.py) in every header binds a message to its cluster: a
replica of another cluster (a restored copy started at an old address, a data dir
copied from elsewhere) is refused even when it shares the Raft password, and since
PySyncObj drops a refused connection silently, the refusal is logged here, naming both
ids (at most once a minute per foreign id). Version 1 messages had no cluster id: a
replica of a release before cluster ids cannot talk to this one (upgrade all at once).
"""
import itertools
import logging
import os
import struct
import time

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

from shepherd_ha.cluster_identity import bytes_of

from .raft_secrets import salt_bytes

VERSION = 2
_SALT_CONTEXT = b"shepherd-ha/raft/aes-gcm/v2/"
_HEADER = struct.Struct(">BQ12s16s")   # version, timestamp, nonce, cluster id
_CLUSTER_AT = 21                       # offset of the cluster id in the header
REFUSAL_LOG_INTERVAL = 60.0
log = logging.getLogger("shepherd_ha.store.raft_cipher")
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
    `also_accepted` (a rotation in progress: docs/security.md). Only messages of
    `cluster_id` are accepted."""

    def __init__(self, password, salt, cluster_id=None, also_accepted=()):
        self._aead = AESGCM(derive_key(password, salt))
        self._accepted = [self._aead] + [AESGCM(derive_key(p, salt)) for p in also_accepted if p != password]
        self.cluster_id = cluster_id
        self._cluster = bytes_of(cluster_id)
        self._refusals_logged = {}         # foreign cluster id bytes -> monotonic time last logged
        self._prefix = os.urandom(4)
        self._counter = itertools.count(time.time_ns())   # next() is atomic under the GIL

    def encrypt_at_time(self, data, timestamp):
        nonce = self._prefix + _COUNTER.pack(next(self._counter) & _MASK)
        header = _HEADER.pack(VERSION, max(0, int(timestamp)), nonce, self._cluster)
        return header + self._aead.encrypt(nonce, bytes(data), header)

    def extract_timestamp(self, token):
        """The timestamp, before authentication (as Fernet's does); decrypt() checks it."""
        if len(token) < _HEADER.size:
            raise InvalidToken("message too short")
        version, timestamp, _, _ = _HEADER.unpack_from(token)
        if version != VERSION:
            if version == 1:        # a replica of a release before cluster ids: say why it never joins
                raise InvalidToken(self._log_refusal(b"v1", "refused a Raft connection speaking message version 1 "
                                                     "(a release before cluster ids): upgrade every replica"))
            raise InvalidToken("unknown message version %d" % version)
        return timestamp

    def decrypt(self, token):
        self.extract_timestamp(token)
        header = bytes(token[:_HEADER.size])
        cluster = header[_CLUSTER_AT:]
        if cluster != self._cluster:
            raise InvalidToken(self._refused(cluster))
        nonce, body = header[9:_CLUSTER_AT], bytes(token[_HEADER.size:])
        for aead in self._accepted:        # a failed tag check costs about a microsecond
            try:
                return aead.decrypt(nonce, body, header)
            except InvalidTag:
                continue
        raise InvalidToken("message failed authentication (another Raft password or salt?)")

    def _refused(self, cluster):
        return self._log_refusal(cluster, "refused a Raft connection: its messages belong to cluster %s, this "
                                 "replica to cluster %s (a replica of another cluster, e.g. a restored copy or a "
                                 "copied data dir, at an address of this one?)" % (cluster.hex(), self._cluster.hex()))

    def _log_refusal(self, key, message):
        """PySyncObj drops the connection without a word: log why, once a minute per kind."""
        now = time.monotonic()
        if now - self._refusals_logged.get(key, -REFUSAL_LOG_INTERVAL) >= REFUSAL_LOG_INTERVAL:
            if len(self._refusals_logged) > 64:
                self._refusals_logged.clear()
            self._refusals_logged[key] = now
            log.error("%s", message)
        return message
