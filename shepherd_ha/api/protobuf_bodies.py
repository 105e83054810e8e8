"""Request bodies in Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf),
for the kinds kubectl 1.32 sends that way.

kubectl's typed clients (create namespace, create configmap, create secret) encode
their POST bodies as protobuf and accept JSON back (Accept:
application/vnd.kubernetes.protobuf,application/json): the answer stays JSON, only
these bodies are read. client-go has no fallback to JSON on a 415, so refusing
them would leave those commands broken.

The encoding: the magic "k8s\\0", then a runtime.Unknown message (typeMeta = 1 with
apiVersion = 1 and kind = 2; raw = 2, the object's own message). The object's
fields are decoded with the field numbers of Kubernetes' generated.proto for the
kinds below (a table, not generated code). A kind without a table, or a field the
table does not have, is a 415/400 that says to send JSON.
"""
import base64
import time

from .errors import ApiError

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

# A field: (name, how), how one of "string", "bytes" (base64 in JSON), "int", "bool",
# "strings" (repeated string), "map" (map<string,string>), "bytesmap" (map<string,bytes>),
# "time" (a meta.v1.Time), or a nested table (a message; a list when wrapped in a list).
_TIME = {1: ("seconds", "int"), 2: ("nanos", "int")}
_OWNER = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"), 5: ("apiVersion", "string"),
          6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
# managedFields (17) are the server's to set: read and dropped.
METADATA = {1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"),
            4: ("selfLink", "string"), 5: ("uid", "string"), 6: ("resourceVersion", "string"),
            7: ("generation", "int"), 8: ("creationTimestamp", "time"), 9: ("deletionTimestamp", "time"),
            10: ("deletionGracePeriodSeconds", "int"), 11: ("labels", "map"), 12: ("annotations", "map"),
            13: ("ownerReferences", [_OWNER]), 14: ("finalizers", "strings"), 17: ("managedFields", "skip")}
KINDS = {
    ("v1", "Namespace"): {1: ("metadata", METADATA), 2: ("spec", {1: ("finalizers", "strings")}),
                          3: ("status", {1: ("phase", "string"), 2: ("conditions", "skip")})},
    ("v1", "ConfigMap"): {1: ("metadata", METADATA), 2: ("data", "map"), 3: ("binaryData", "bytesmap"),
                          4: ("immutable", "bool")},
    ("v1", "Secret"): {1: ("metadata", METADATA), 2: ("data", "bytesmap"), 3: ("type", "string"),
                       4: ("stringData", "map"), 5: ("immutable", "bool")},
}


class _Bad(Exception):
    pass


def _varint(buf, pos):
    value, shift = 0, 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise _Bad("a varint runs past the end")
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
            if pos + length > len(buf):
                raise _Bad("field %d runs past the end" % number)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise _Bad("field %d has wire type %d, which Kubernetes' encoding does not use" % (number, wire))
        if pos > len(buf):
            raise _Bad("field %d runs past the end" % number)
        yield number, wire, value


def _text(value):
    if not isinstance(value, bytes):
        raise _Bad("a string field is not length-delimited")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad("a string field is not UTF-8")


def _entry(value):
    key, item = "", b""
    for number, _, part in _fields(value):
        if number == 1:
            key = _text(part)
        elif number == 2:
            item = part
    return key, item


def _message(table, buf, path):
    out = {}
    for number, wire, value in _fields(buf):
        if number not in table:
            raise _Bad("field number %d of %s is not one this server reads" % (number, path or "the object"))
        name, how = table[number]
        if how == "skip":
            continue
        if how == "string":
            out[name] = _text(value)
        elif how == "bytes":
            out[name] = base64.b64encode(value).decode()
        elif how in ("int", "bool"):
            if wire != 0:
                raise _Bad("%s is not a varint" % name)
            out[name] = bool(value) if how == "bool" else (value - (1 << 64) if value >> 63 else value)
        elif how == "strings":
            out.setdefault(name, []).append(_text(value))
        elif how in ("map", "bytesmap"):
            key, item = _entry(value)
            out.setdefault(name, {})[key] = base64.b64encode(item).decode() if how == "bytesmap" else _text(item)
        elif how == "time":
            seconds = _message(_TIME, value, name).get("seconds", 0)
            if seconds:        # the zero Time is JSON null: leave it out
                out[name] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
        elif isinstance(how, list):
            out.setdefault(name, []).append(_message(how[0], value, name))
        else:
            out[name] = _message(how, value, name)
    # Go's encoder writes every plain string and number, empty or not; JSON omits them.
    return {k: v for k, v in out.items() if v != "" and not (type(v) is int and v == 0)}


def is_protobuf(content_type):
    return (content_type or "").split(";")[0].strip().lower() == MEDIA_TYPE


def decode(raw):
    """The JSON-shaped object of a protobuf request body; ApiError 400/415 otherwise."""
    if not raw.startswith(MAGIC):
        raise ApiError(400, "request body is not Kubernetes protobuf (it does not start with k8s\\x00): "
                       "send JSON (Content-Type: application/json)")
    try:
        unknown = {n: v for n, _, v in _fields(raw[len(MAGIC):])}
        type_meta = {n: _text(v) for n, _, v in _fields(unknown.get(1, b""))}
        api_version, kind = type_meta.get(1, ""), type_meta.get(2, "")
        if unknown.get(3) or (unknown.get(4) and _text(unknown[4]) not in ("", MEDIA_TYPE)):
            raise _Bad("the envelope names an encoding other than plain protobuf")
        table = KINDS.get((api_version, kind))
        if table is None:
            raise ApiError(415, "this server reads protobuf bodies only for %s; send %s %s as JSON "
                           "(Content-Type: application/json)"
                           % (", ".join(k for _, k in sorted(KINDS)), api_version or "(no apiVersion)",
                              kind or "(no kind)"))
        obj = _message(table, unknown.get(2, b""), "")
    except _Bad as exc:
        raise ApiError(400, "request body is not valid Kubernetes protobuf: %s; send JSON instead" % exc)
    return dict({"apiVersion": api_version, "kind": kind}, **obj)
