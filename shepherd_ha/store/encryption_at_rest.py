"""Secrets encrypted at rest, like Kubernetes' EncryptionConfiguration with aesgcm.

With `--encryption-key-file`, the API worker encrypts a Secret's `data` before the
write enters the Raft log, so the journal, the dump (snapshot) and `sheepctl snapshot
save` files hold ciphertext; it decrypts when serving. The FSM stays pure and knows
nothing of it: it stores the Secret with `data` replaced by one opaque string,

    encryptedData: "k8s:enc:aesgcm:v1:<key name>:<base64(nonce | ciphertext+tag)>"

(AES-256-GCM, a fresh 96-bit nonce each write, the Secret's namespace/name as
associated data so a ciphertext cannot be moved onto another Secret).

Key file: one key per line, `NAME:BASE64` of 32 random bytes (`head -c 32
/dev/urandom | base64`), `#` comments. The first key encrypts; every key decrypts
(rotation: add the new key first, rewrite every Secret, then drop the old one). A
Secret stored in clear (written before encryption was on) is served as it is.
"""
import base64
import binascii
import json
import os
import re

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

FIELD = "encryptedData"
PREFIX = "k8s:enc:aesgcm:v1:"
_NAME = re.compile(r"^[A-Za-z0-9][-_.A-Za-z0-9]{0,62}$")


class KeyFileError(ValueError):
    """The key file cannot be used; str() says which line and why."""


class DecryptError(Exception):
    """A stored Secret cannot be decrypted with the configured keys."""


def load_keys(path):
    """[(name, key bytes)] of a key file, first one first."""
    try:
        with open(path) as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise KeyFileError("cannot read --encryption-key-file %s: %s" % (path, exc.strerror))
    keys, names = [], set()
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition(":")
        where = "%s line %d" % (path, number)
        if not sep or not _NAME.fullmatch(name):
            raise KeyFileError("%s: write NAME:BASE64 (a name of letters, digits, '-', '_', '.')" % where)
        try:
            key = base64.b64decode(value.strip(), validate=True)
        except binascii.Error:
            raise KeyFileError("%s: the key is not base64" % where)
        if len(key) != 32:
            raise KeyFileError("%s: the key is %d bytes, it must be 32 (head -c 32 /dev/urandom | base64)"
                               % (where, len(key)))
        if name in names:
            raise KeyFileError("%s: key name %s is used twice" % (where, name))
        names.add(name)
        keys.append((name, key))
    if not keys:
        raise KeyFileError("%s holds no key: add a line NAME:BASE64" % path)
    return keys


class SecretCipher:
    def __init__(self, keys):
        self.keys = [(name, AESGCM(key)) for name, key in keys]
        self._by_name = dict(self.keys)

    @classmethod
    def from_file(cls, path):
        return cls(load_keys(path)) if path else None

    @staticmethod
    def _aad(obj):
        meta = obj.get("metadata") or {}
        return ("secrets/%s/%s" % (meta.get("namespace") or "", meta.get("name") or "")).encode()

    def encrypt(self, obj):
        """A copy of Secret `obj` with `data` sealed into FIELD (random nonce: call
        before submitting, never in the FSM)."""
        name, aead = self.keys[0]
        plain = json.dumps({"data": obj.get("data") or {}}, sort_keys=True, separators=(",", ":")).encode()
        nonce = os.urandom(12)
        sealed = nonce + aead.encrypt(nonce, plain, self._aad(obj))
        out = {k: v for k, v in obj.items() if k != "data"}
        out[FIELD] = "%s%s:%s" % (PREFIX, name, base64.b64encode(sealed).decode("ascii"))
        return out

    def decrypt(self, obj):
        """The Secret with its `data` back; DecryptError when no key opens it."""
        return decrypt(obj, self)


def decrypt(obj, cipher):
    """`obj` as served: a sealed Secret opened (cipher None: DecryptError), anything else as is."""
    if not isinstance(obj, dict) or obj.get("kind") != "Secret" or FIELD not in obj:
        return obj
    meta = obj.get("metadata") or {}
    who = 'secret "%s" in namespace "%s"' % (meta.get("name"), meta.get("namespace"))
    text = obj[FIELD]
    if cipher is None:
        raise DecryptError("%s is encrypted at rest and this replica has no --encryption-key-file" % who)
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise DecryptError("%s holds an unknown encryption format" % who)
    name, _, sealed = text[len(PREFIX):].partition(":")
    aead = cipher._by_name.get(name)
    if aead is None:
        raise DecryptError("%s was encrypted with key %r, which is not in --encryption-key-file (keys: %s)"
                           % (who, name, ", ".join(n for n, _ in cipher.keys)))
    try:
        raw = base64.b64decode(sealed, validate=True)
        plain = aead.decrypt(raw[:12], raw[12:], SecretCipher._aad(obj))
        data = json.loads(plain)["data"]
    except (binascii.Error, InvalidTag, ValueError, KeyError, TypeError):
        raise DecryptError("%s does not decrypt with key %r: a different key of that name, or damaged data"
                           % (who, name))
    out = {k: v for k, v in obj.items() if k != FIELD}
    out["data"] = data
    return out
