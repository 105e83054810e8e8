"""A small encoder of Kubernetes' protobuf wire format, for the tests of
api/protobuf_bodies.py: JSON-shaped object in, the bytes Go's generated code would
write out. It writes the way Go does (zero non-pointer scalars too, a Volume's
inlined VolumeSource as its own nested message, Quantity/IntOrString/Time as their
messages), from the field tables alone; its own code shares nothing with the decoder.
The tables themselves are checked against the bytes of the real kubectl
(test_api_protobuf_golden.py)."""
import base64
import calendar
import json
import re
import struct

from shepherd_ha.api.protobuf_schema import MESSAGES

MAGIC = b"k8s\x00"


def varint(n):
    n &= (1 << 64) - 1        # negative numbers: ten bytes of two's complement, as Go writes them
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def key(number, wire):
    return varint(number << 3 | wire)


def length_delimited(number, payload):
    payload = payload.encode() if isinstance(payload, str) else payload
    return key(number, 2) + varint(len(payload)) + payload


def number_field(number, value):
    return key(number, 0) + varint(int(value))


def _seconds(text):
    m = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?Z$", text)
    assert m, text
    parts = [int(p) for p in m.groups()[:6]]
    nanos = int((m.group(7) or "0").ljust(9, "0")[:9])
    return calendar.timegm(tuple(parts) + (0, 0, 0)), nanos


def encode_value(number, typ, value):
    base = typ.rstrip("?")
    if base in MESSAGES:
        return length_delimited(number, encode_message(base, value))
    if base == "string":
        return length_delimited(number, value)
    if base == "int":
        return number_field(number, value)
    if base == "bool":
        return number_field(number, 1 if value else 0)
    if base == "double":
        return key(number, 1) + struct.pack("<d", value)
    if base == "bytes":
        return length_delimited(number, base64.b64decode(value))
    if base == "quantity":
        return length_delimited(number, length_delimited(1, value))
    if base == "intorstring":
        inner = number_field(1, 1) + length_delimited(3, value) if isinstance(value, str) else \
            number_field(1, 0) + number_field(2, value)
        return length_delimited(number, inner)
    if base in ("time", "microtime"):
        seconds, nanos = _seconds(value)
        return length_delimited(number, number_field(1, seconds) + number_field(2, nanos))
    if base == "raw":
        return length_delimited(number, length_delimited(1, json.dumps(value)))
    raise AssertionError("no encoding for %s" % typ)


_ZEROS = {"string": "", "int": 0, "bool": False}


def encode_message(name, obj, consumed=None):
    """The fields of `obj` per the table of message `name`; every key of obj must be used."""
    table, out, used = MESSAGES[name], b"", set()
    for number, (json_name, typ) in sorted(table.items()):
        if json_name == "":               # inlined in JSON: the inner message takes its own keys
            inner = {k: v for k, v in obj.items() if k in {j for j, _ in MESSAGES[typ].values()}}
            out += length_delimited(number, encode_message(typ, inner))
            used.update(inner)
            continue
        if json_name not in obj:
            if typ in _ZEROS:             # Go writes non-pointer scalars even when zero
                out += encode_value(number, typ, _ZEROS[typ])
            continue
        used.add(json_name)
        value = obj[json_name]
        if typ.startswith("[]"):
            for item in value:
                out += encode_value(number, typ[2:], item)
        elif typ.startswith("map:"):
            for k, v in sorted(value.items()):
                out += length_delimited(number, length_delimited(1, k) + encode_value(2, typ[4:], v))
        else:
            out += encode_value(number, typ, value)
    unused = set(obj) - used
    assert not unused, "%s has no field %s" % (name, sorted(unused))
    return out


def envelope(api_version, kind, raw):
    type_meta = length_delimited(1, api_version) + length_delimited(2, kind)
    return MAGIC + length_delimited(1, type_meta) + length_delimited(2, raw) + length_delimited(3, "") + \
        length_delimited(4, "")


def encode(message, obj):
    """A whole request body: the envelope around obj (which names its apiVersion and kind)."""
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    return envelope(obj["apiVersion"], obj["kind"], encode_message(message, body))
