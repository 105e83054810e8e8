"""The Raft secret and the cluster's salt: how they are generated and what is accepted.

The Raft password encrypts and authenticates every Raft message (raft_cipher) and is
where the replicas' own credentials come from (api/replica_credentials.py), so whoever
holds it is the cluster: it must not be guessable. `shepherd-ha local up` and the
Vagrant provisioning generate one (`new_password`: 32 random bytes); a password given
by hand must be at least MIN_LENGTH characters and about MIN_BITS bits by a simple
estimate (length x log2 of the character classes it uses, no credit for repeats).

The salt (`--raft-salt`, hex, at least 16 bytes) is random per cluster and the same
on every replica; it is not secret. It makes the key derivations cluster-specific.
"""
import math
import secrets

from shepherd_ha.options import ConfigError

MIN_LENGTH = 16
MIN_BITS = 128
MIN_SALT_BYTES = 16
HOW_TO_GENERATE = "python3 -c 'import secrets; print(secrets.token_hex(16))'"
_CLASSES = ((str.islower, 26), (str.isupper, 26), (str.isdigit, 10))


def new_password():
    return secrets.token_urlsafe(32)


def new_salt():
    return secrets.token_hex(MIN_SALT_BYTES)


def estimated_bits(password):
    """A deliberately plain estimate: length x log2(size of the character classes used),
    counting each distinct character once beyond a small run (so 'aaaa...' scores low)."""
    if not password:
        return 0.0
    pool = sum(size for test, size in _CLASSES if any(test(c) for c in password))
    if any(not (c.islower() or c.isupper() or c.isdigit()) for c in password):
        pool += 33
    effective = min(len(password), 2 * len(set(password)))
    return effective * math.log2(max(pool, 2))


def check_password(password, source="--raft-password"):
    """ConfigError unless a hand-given Raft password is strong enough."""
    bits = estimated_bits(password)
    if len(password) < MIN_LENGTH or bits < MIN_BITS:
        raise ConfigError(
            "the Raft password from %s is too weak (%d characters, about %d bits): it is the key to every "
            "replica, so use at least %d characters and %d bits, e.g. from `%s` (shepherd-ha local up and "
            "the Vagrant provisioning generate one)" % (source, len(password), bits, MIN_LENGTH, MIN_BITS,
                                                         HOW_TO_GENERATE))


def salt_bytes(salt):
    """The salt's bytes; ConfigError unless it is hex of at least MIN_SALT_BYTES bytes."""
    try:
        raw = bytes.fromhex(salt) if isinstance(salt, str) else None
    except ValueError:
        raw = None
    if raw is None or len(raw) < MIN_SALT_BYTES:
        raise ConfigError(
            "--raft-salt must be %d or more random bytes in hex, the same on every replica of the cluster "
            "(e.g. from `%s`; shepherd-ha local up and the Vagrant provisioning write one), not %r"
            % (MIN_SALT_BYTES, HOW_TO_GENERATE, salt if salt is None else str(salt)[:80]))
    return raw
