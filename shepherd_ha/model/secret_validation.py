"""Secrets (v1): validation, defaults and the update rule, pure.

- `data`: keys like a ConfigMap's, values base64 (standard alphabet, padded);
  `stringData`: plain strings, merged into `data` on every write (a stringData key
  wins over the same data key) and never stored, as in Kubernetes;
- `type`: any name (default Opaque); the well-known types need their keys;
- `immutable: true`: data and type can no longer change, and immutable cannot be unset;
- at most 1 MiB of decoded data.
"""
import base64
import binascii
import re

from ._checks import join
from .names import show

DEFAULT_TYPE = "Opaque"
MAX_BYTES = 1024 * 1024
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_KEY_RULE = "keys are 1-253 characters of letters, digits, '-', '_' or '.'"
_TYPE = re.compile(r"^[-._a-zA-Z0-9/]+$")
REQUIRED_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
}


def decode(value):
    """The bytes of a base64 data value; ValueError when it is not strict base64."""
    if not isinstance(value, str):
        raise ValueError("not a string")
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise ValueError(str(exc))


def _key_ok(key):
    return isinstance(key, str) and len(key) <= 253 and bool(_KEY.fullmatch(key)) and key not in (".", "..")


def validate_secret(causes, obj):
    total = 0
    data = causes.dict("data", obj.get("data"))
    for key, value in (data or {}).items():
        if not _key_ok(key):
            causes.add(join("data", key), "%s is not a valid key: %s" % (show(key), _KEY_RULE))
        if causes.string(join("data", key), value, required=True) is None:
            continue
        try:
            total += len(decode(value))
        except ValueError:
            causes.add(join("data", key), "is not base64: encode the value (base64 -w0), or put the plain "
                       "text in stringData.%s" % key)
    string_data = causes.dict("stringData", obj.get("stringData"))
    for key, value in (string_data or {}).items():
        if not _key_ok(key):
            causes.add(join("stringData", key), "%s is not a valid key: %s" % (show(key), _KEY_RULE))
        if causes.string(join("stringData", key), value, required=True) is not None:
            try:
                total += len(value.encode("utf-8"))
            except UnicodeEncodeError:
                causes.add(join("stringData", key), "is not valid text (a lone surrogate): use data with base64")
    if total > MAX_BYTES:
        causes.add("data", "holds %d bytes: a Secret holds at most 1 MiB" % total)
    kind = causes.string("type", obj.get("type"))
    if kind is not None:
        if not (0 < len(kind) <= 253 and _TYPE.fullmatch(kind)):
            causes.add("type", "%s is not a valid Secret type such as Opaque or kubernetes.io/tls" % show(kind))
        keys = set(data or {}) | set(string_data or {})
        for key in REQUIRED_KEYS.get(kind, ()):
            if key not in keys:
                causes.add(join("data", key), "is required for a Secret of type %s" % kind)
    causes.boolean("immutable", obj.get("immutable"))
    if obj.get("encryptedData") is not None:
        causes.add("encryptedData", "is written by the server (encryption at rest): send data or stringData")


def default_secret(obj):
    """stringData merged into data (base64), then dropped; type Opaque when unset."""
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = dict(obj.get("data") or {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(value.encode("utf-8")).decode("ascii")
        obj["data"] = data
    if obj.get("type") in (None, ""):
        obj["type"] = DEFAULT_TYPE


def validate_secret_update(causes, old, new):
    if (old.get("type") or DEFAULT_TYPE) != (new.get("type") or DEFAULT_TYPE):
        causes.add("type", "is immutable: delete and re-create the Secret to change its type")
    if old.get("immutable") is not True:
        return
    if new.get("immutable") is not True:
        causes.add("immutable", "cannot be unset once true: delete and re-create the Secret")
    if (old.get("data") or {}) != (new.get("data") or {}):
        causes.add("data", "is immutable because the Secret is immutable: delete and re-create it to change it")
