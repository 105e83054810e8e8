"""Request bodies in Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf).

kubectl's typed clients (create deployment|service|role|..., auth can-i, drain's
evictions and deletes) encode their bodies as protobuf and accept JSON back: the
answer stays JSON, only these bodies are read. client-go has no fallback to JSON on a
415, so every kind the API serves is read here.

The encoding: the magic "k8s\\0", then a runtime.Unknown message (typeMeta = 1 with
apiVersion = 1 and kind = 2; raw = 2, the object's own message). The object is decoded
by one generic walk over the field tables of protobuf_schema.py (generated from
Kubernetes' struct tags) into exactly what the JSON encoding would carry: zero scalars
that Go writes for non-pointer fields are left out (JSON's omitempty), zeros of pointer
fields are kept, Quantity is its string, IntOrString an int or a string, Time RFC 3339,
bytes base64, RawExtension its embedded JSON. A field number the table lacks is a 400
that names it and says to send JSON; no byte sequence is a 500.
"""
import base64
import datetime
import json
import struct

from shepherd_ha.model.times import format_datetime

from .errors import ApiError
from .protobuf_schema import KINDS, MESSAGES

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_OMIT = object()       # a value JSON would not carry
_SEND_JSON = "send it as JSON instead (Content-Type: application/json)"
# Kinds every group version carries (client-go encodes them with the resource's group version).
_ANY_GROUP = {"DeleteOptions": KINDS[("meta.k8s.io/v1", "DeleteOptions")]}


class _Bad(Exception):
    pass


class Unknown(_Bad):
    """A field number the table does not have (a newer Kubernetes field, or not Kubernetes' at all)."""


def _varint(buf, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Bad("a varint runs past the end of its message")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(buf):
    """(number, wire type, value) of each field of one message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, pos = buf[pos:pos + size], pos + size
        else:
            raise _Bad("field %d has wire type %d, which Kubernetes' encoding does not use" % (number, wire))
        if pos > len(buf):
            raise _Bad("field %d runs past the end of its message" % number)
        yield number, wire, value


def _wire(wire, expected, path):
    if wire != expected:
        raise _Bad("%s has wire type %d, not %d" % (path, wire, expected))


def _text(wire, value, path):
    _wire(wire, 2, path)
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad("%s is not UTF-8 text" % path)


def _signed(value):
    value &= (1 << 64) - 1          # a ten-byte varint may carry bits past 64: Go drops them too
    return value - (1 << 64) if value >> 63 else value


def _int(wire, value, path):
    _wire(wire, 0, path)
    return _signed(value)


def _sub(value, path):
    """{number: last value} of a small well-known message (Time, Quantity, ...)."""
    return {n: (w, v) for n, w, v in _fields(value)}


def _time(wire, value, path, micro):
    _wire(wire, 2, path)
    parts = _sub(value, path)
    seconds = _int(*parts.get(1, (0, 0)), path + ".seconds")
    nanos = _int(*parts.get(2, (0, 0)), path + ".nanos")
    if not seconds and not nanos:
        return _OMIT            # the zero Time is JSON null
    try:
        moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError:
        raise _Bad("%s is out of the range of a time" % path)
    if not 1 <= moment.year <= 9999 or not 0 <= nanos < 10 ** 9:
        raise _Bad("%s is out of the range of a time" % path)
    return format_datetime(moment, micro)


def _special(typ, wire, value, path):
    if typ in ("time", "microtime"):
        return _time(wire, value, path, typ == "microtime")
    _wire(wire, 2, path)
    if typ == "bytes":
        return base64.b64encode(value).decode()
    if typ == "quantity":
        parts = _sub(value, path)
        return _text(*parts[1], path) if 1 in parts else "0"
    if typ == "intorstring":
        parts = _sub(value, path)
        if 1 in parts and _int(*parts[1], path + ".type") == 1:
            return _text(*parts[3], path + ".strVal") if 3 in parts else ""
        return _int(*parts[2], path + ".intVal") if 2 in parts else 0
    if typ == "raw":            # RawExtension, FieldsV1: embedded JSON
        raw = _sub(value, path).get(1, (2, b""))
        text = _text(*raw, path)
        if not text:
            return _OMIT
        try:
            return json.loads(text)
        except (ValueError, RecursionError):
            raise _Bad("%s does not hold JSON" % path)
    raise _Bad("%s has a type this server cannot read" % path)


def _scalar(typ, wire, value, path, keep_zero):
    pointer = keep_zero or typ.endswith("?")
    base = typ.rstrip("?")
    if base == "string":
        out = _text(wire, value, path)
    elif base == "int":
        out = _int(wire, value, path)
    elif base == "bool":
        _wire(wire, 0, path)
        out = bool(value)
    elif base in ("double", "float"):
        _wire(wire, 1 if base == "double" else 5, path)
        out = struct.unpack("<d" if base == "double" else "<f", value)[0]
        if out != out or out in (float("inf"), float("-inf")):
            raise _Bad("%s is not a number JSON can carry" % path)
    else:
        return _special(base, wire, value, path)
    # Go writes a non-pointer field even when it is zero; JSON (omitempty) leaves it out.
    return out if pointer or out else _OMIT


def _value(typ, wire, value, path, depth, keep_zero=False):
    if typ in MESSAGES:
        _wire(wire, 2, path)
        return _message(typ, value, path, depth + 1)
    return _scalar(typ, wire, value, path, keep_zero)


def _entry(typ, wire, value, path, depth):
    _wire(wire, 2, path)
    key, item = "", None
    for number, part_wire, part in _fields(value):
        if number == 1:
            key = _text(part_wire, part, path + " key")
        elif number == 2:
            item = (part_wire, part)
    if item is None:        # an absent value is the type's zero
        return key, {"string": "", "bytes": "", "quantity": "0"}.get(typ, {})
    # a map keeps its empty values (a Secret key with no bytes)
    return key, _value(typ, item[0], item[1], "%s[%s]" % (path, key), depth, keep_zero=True)


def _packed(typ, value, path):
    """A packed repeated varint field (proto3 style; Kubernetes' proto2 does not pack, but may)."""
    pos, out = 0, []
    while pos < len(value):
        item, pos = _varint(value, pos)
        out.append(_signed(item) if typ == "int" else bool(item))
    return out


def _message(name, buf, path, depth):
    if depth > 40:
        raise _Bad("%s nests deeper than any Kubernetes object" % path)
    table, out = MESSAGES[name], {}
    for number, wire, value in _fields(buf):
        if number not in table:
            raise Unknown("field number %d of %s (%s) is not one this server reads"
                          % (number, path, name.partition(".")[2]))
        json_name, typ = table[number]
        where = "%s.%s" % (path, json_name or name.partition(".")[2])
        if typ.startswith("[]"):
            item_type = typ[2:]
            if wire == 2 and item_type in ("int", "bool"):
                out.setdefault(json_name, []).extend(_packed(item_type, value, where))
                continue
            out.setdefault(json_name, []).append(_value(item_type, wire, value, where, depth, keep_zero=True))
        elif typ.startswith("map:"):
            key, item = _entry(typ[4:], wire, value, where, depth)
            out.setdefault(json_name, {})[key] = item
        else:
            item = _value(typ, wire, value, where, depth)
            if item is _OMIT:
                out.pop(json_name, None)
            elif json_name == "":   # inlined in JSON (Volume's VolumeSource, Probe's handler)
                out.update(item)
            else:
                out[json_name] = item
    return out


def is_protobuf(content_type):
    return (content_type or "").split(";")[0].strip().lower() == MEDIA_TYPE


def message_of(api_version, kind):
    """The protobuf_schema message of one kind, None if this server does not read it."""
    return KINDS.get((api_version, kind)) or _ANY_GROUP.get(kind)


def decode(raw):
    """The JSON-shaped object of a protobuf request body; ApiError 400/415 otherwise."""
    if not raw.startswith(MAGIC):
        raise ApiError(400, "request body is not Kubernetes protobuf (it does not start with k8s\\x00): "
                       "send JSON (Content-Type: application/json)")
    api_version = kind = ""
    try:
        unknown = {n: (w, v) for n, w, v in _fields(raw[len(MAGIC):])}
        type_meta = {n: _text(w, v, "typeMeta") for n, w, v in _fields(_raw_part(unknown, 1))}
        api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
        encoding = _text(*unknown[3], "contentEncoding") if 3 in unknown else ""
        content_type = _text(*unknown[4], "contentType") if 4 in unknown else ""
        if encoding or content_type not in ("", MEDIA_TYPE):
            raise _Bad("the envelope names an encoding other than plain protobuf")
        message = message_of(api_version, kind)
        if message is None:
            raise ApiError(415, "this server does not read %s %s as protobuf: it serves no such kind; %s"
                           % (api_version or "(no apiVersion)", kind or "(no kind)", _SEND_JSON))
        obj = _message(message, _raw_part(unknown, 2), kind, 0)
    except Unknown as exc:
        raise ApiError(400, "protobuf request body for %s %s: %s; %s" % (api_version, kind, exc, _SEND_JSON))
    except _Bad as exc:
        raise ApiError(400, "request body is not valid Kubernetes protobuf: %s; %s" % (exc, _SEND_JSON))
    return dict({"apiVersion": api_version, "kind": kind}, **obj)


def _raw_part(fields, number):
    if number not in fields:
        return b""
    wire, value = fields[number]
    _wire(wire, 2, "the envelope's field %d" % number)
    return value
