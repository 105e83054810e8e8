"""The store process keeps each object as bytes (its JSON, compressed), not as a dict.

A dict-of-dicts pod takes ~4-9 KB of Python objects even with equal parts shared
(store/interning.py) and is walked by every full garbage collection; its compact JSON
is ~1.5-2 KB in one bytes object the collector never looks at. The FSM decodes an
object only when a command reads it (an update reads its current version), so each
write costs one orjson dump and at most one load instead of interning a dict. The
change stream sends the bytes as they are; the API workers' mirrors decode them once.

The JSON is deterministic (same dict in, same JSON out on every replica), and a value
orjson refuses (an integer past 64 bits) falls back to the standard library's encoder,
the same way on every replica. Each object's JSON is then compressed against a preset
dictionary of its kind (store/object_compression.py): a Running pod of the hollow fleet
is 292 bytes instead of 1,605. The compressed bytes depend on the zlib build, so only
decoded state is ever compared between replicas (the digest decodes).
"""
import collections.abc
import json

import orjson

from shepherd_ha.model.resources import RESOURCES

from .object_compression import compress, decompress, dictionary_of, is_compressed

# What the standard library's encoder wrote starts with this (JSON allows leading
# whitespace): orjson reads integers past 64 bits back as floats, json.loads does not.
_FALLBACK = b" "


def to_json(obj):
    """`obj` as compact JSON bytes (orjson's own buffer: copy it before keeping it);
    ValueError if it is not JSON."""
    try:
        return orjson.dumps(obj)
    except TypeError:
        try:
            return _FALLBACK + json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ValueError("object is not JSON: %s" % exc) from None


def encode(obj):
    """`obj` as the store keeps it: its compact JSON, compressed against its kind's
    dictionary when that is smaller; ValueError if it is not JSON."""
    data = to_json(obj)
    if isinstance(obj, dict):
        packed = compress(data, obj.get("kind"))
        if packed is not data:
            return packed
    # orjson's bytes keep the buffer it grew (4 KB for a 1.2 KB pod, 16 KB for 1.5 KB with
    # orjson 3.12+) and never shrink it; stored for good, that was 3-10x the object. A
    # copy of exactly its size costs ~0.7 us. (Measured: docs/benchmarks.md, run W; the
    # same finding: home-assistant/core#181240.)
    return bytes(memoryview(data))


def json_of(data):
    """The JSON bytes of what `encode` returned."""
    return decompress(data)


def decode(data):
    """A fresh dict from `data`; an object already decoded (or None) passes through."""
    if isinstance(data, bytes):
        data = decompress(data)
        return json.loads(data) if data.startswith(_FALLBACK) else orjson.loads(data)
    return data


def decoded(change):
    """A Change (store/fsm.py) with its object and previous version as dicts."""
    if isinstance(change.object, bytes) or isinstance(change.previous, bytes):
        return change._replace(object=decode(change.object), previous=decode(change.previous))
    return change


class EncodedBucket(collections.abc.MutableMapping):
    """{(namespace, name): object} of one kind, kept as bytes (stored_form). Reads decode a fresh
    copy (a reader may keep or change it: the store's bytes stay as they are); `raw`
    reads skip the decoding."""

    __slots__ = ("_raw",)

    def __init__(self, raw=None):
        self._raw = {} if raw is None else raw

    def __getitem__(self, key):
        return decode(self._raw[key])

    def get(self, key, default=None):
        data = self._raw.get(key)
        return default if data is None else decode(data)

    def __setitem__(self, key, obj):
        self._raw[key] = stored_form(obj)

    def __delitem__(self, key):
        del self._raw[key]

    # MutableMapping's pop, popitem and clear read (decode) what they remove: not here.
    _MISSING = object()

    def pop(self, key, default=_MISSING):
        if default is EncodedBucket._MISSING:
            return decode(self._raw.pop(key))
        data = self._raw.pop(key, None)
        return default if data is None else decode(data)

    def popitem(self):
        key, data = self._raw.popitem()
        return key, decode(data)

    def clear(self):
        self._raw.clear()

    def __contains__(self, key):
        return key in self._raw

    def __iter__(self):
        return iter(self._raw)

    def __len__(self):
        return len(self._raw)

    def values(self):
        return [decode(data) for data in self._raw.values()]

    def items(self):
        return [(key, decode(data)) for key, data in self._raw.items()]

    # ---- as stored ----

    def raw(self, key):
        return self._raw.get(key)

    def raw_values(self):
        return list(self._raw.values())

    def raw_dict(self):
        return self._raw

    def __reduce__(self):
        return (EncodedBucket, (self._raw,))


class EncodedObjects(dict):
    """{resource plural: EncodedBucket}: a plain dict (or one of dicts) put in is wrapped,
    so code and tests that fill the store by hand keep working."""

    def __setitem__(self, resource, bucket):
        info = RESOURCES.get(resource)
        super().__setitem__(resource, as_bucket(bucket, info.kind if info is not None else None))

    def setdefault(self, resource, default=None):
        if resource not in self:
            self[resource] = {} if default is None else default
        return self[resource]

    def raw_state(self):
        """{resource: {key: bytes}} for a dump."""
        return {resource: bucket.raw_dict() for resource, bucket in self.items()}


def as_bucket(bucket, kind=None):
    """An EncodedBucket of `bucket`'s objects (dicts, or bytes as stored by any version:
    plain JSON of an older one is compressed against `kind`'s dictionary here)."""
    if isinstance(bucket, EncodedBucket):
        return bucket
    out = EncodedBucket()
    raw = out.raw_dict()
    for key, obj in bucket.items():
        raw[key] = stored_form(obj, kind)
    return out


def stored_form(obj, kind=None):
    """What a bucket keeps for `obj`, checked: a compressed object this version cannot
    read is refused here (when a dump loads), not when a command first touches it."""
    if not isinstance(obj, bytes):
        return encode(obj)
    if not obj:
        raise ValueError("an object is stored as its JSON, not as empty bytes")
    if is_compressed(obj):
        dictionary_of(obj)
        return obj
    return compress(obj, kind) if kind is not None else obj


def as_objects(buckets):
    """EncodedObjects from {resource: {key: dict or bytes}} (a dump of any version)."""
    out = EncodedObjects()
    for resource, bucket in buckets.items():
        out[resource] = bucket          # wrapped (and encoded) by EncodedObjects.__setitem__
    return out
