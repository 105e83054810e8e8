"""Protobuf request bodies (api/protobuf_bodies.py), written here by a small encoder
of the wire format with Kubernetes' field numbers (the real kubectl's bytes are
tested in tests/integration/test_kubectl_openapi.py)."""
from shepherd_ha.api.protobuf_bodies import MAGIC, MEDIA_TYPE
from real_api import flask_client as api_client


def varint(n):
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def field(number, value):
    if isinstance(value, bool) or isinstance(value, int):
        return varint(number << 3) + varint(int(value))
    value = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(value)) + value


def entry(number, key, value):
    return field(number, field(1, key) + field(2, value))


def envelope(api_version, kind, raw):
    return MAGIC + field(1, field(1, api_version) + field(2, kind)) + field(2, raw) + field(3, "") + field(4, "")


def post(client, path, body):
    return client.post(path, data=body, headers={"Content-Type": MEDIA_TYPE,
                                                 "Accept": MEDIA_TYPE + ",application/json"})


def test_a_configmap_as_kubectl_encodes_it():
    client, _ = api_client()
    # Go writes empty strings and zero numbers too: they must read as absent.
    meta = field(1, "pb") + field(2, "") + field(3, "") + field(4, "") + field(7, 0) + field(8, b"") + \
        entry(11, "app", "x")
    body = envelope("v1", "ConfigMap", field(1, meta) + entry(2, "a", "b") + entry(2, "c", "d e") +
                    entry(3, "bin", b"\x00\x01"))
    resp = post(client, "/api/v1/namespaces/default/configmaps", body)
    assert resp.status_code == 201, resp.get_json()
    cm = client.get("/api/v1/namespaces/default/configmaps/pb").get_json()
    assert cm["data"] == {"a": "b", "c": "d e"} and cm["binaryData"] == {"bin": "AAE="}
    assert cm["metadata"]["labels"] == {"app": "x"} and "generateName" not in cm["metadata"]


def test_a_namespace_and_a_secret():
    client, _ = api_client()
    resp = post(client, "/api/v1/namespaces", envelope("v1", "Namespace", field(1, field(1, "pbns")) +
                                                       field(2, b"") + field(3, field(1, ""))))
    assert resp.status_code == 201, resp.get_json()
    resp = post(client, "/api/v1/namespaces/default/secrets",
                envelope("v1", "Secret", field(1, field(1, "s")) + entry(2, "p", b"q") + field(3, "Opaque")))
    assert resp.status_code == 201, resp.get_json()
    assert client.get("/api/v1/namespaces/default/secrets/s").get_json()["data"] == {"p": "cQ=="}


def test_bad_protobuf_is_4xx_saying_send_json():
    client, _ = api_client()
    for body, code in ((b"not protobuf", 400), (MAGIC + b"\x0a\xff", 400),
                       (envelope("v1", "ConfigMap", field(1, field(99, "x"))), 400),
                       (envelope("apps/v1", "Deployment", b""), 415),
                       (envelope("v1", "ConfigMap", field(1, field(1, b"\xff\xfe"))), 400)):
        resp = post(client, "/api/v1/namespaces/default/configmaps", body)
        assert resp.status_code == code and "JSON" in resp.get_json()["message"], (body, resp.get_json())
