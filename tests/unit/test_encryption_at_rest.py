"""Secrets encrypted at rest (store/encryption_at_rest.py) and the replica view that
seals and opens them (api/secrets_at_rest.py), over the in-memory store."""
import base64
import os

import pytest

from shepherd_ha.api.errors import ApiError
from shepherd_ha.api.secrets_at_rest import SecretsAtRest
from shepherd_ha.store import commands
from shepherd_ha.store.encryption_at_rest import FIELD, DecryptError, KeyFileError, SecretCipher, load_keys

SECRET = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
          "metadata": {"name": "db", "namespace": "default"}, "data": {"pass": base64.b64encode(b"hunter2").decode()}}


def key_file(tmp_path, *names, name="keys"):
    path = tmp_path / name
    path.write_text("# keys\n" + "".join("%s:%s\n" % (n, base64.b64encode(os.urandom(32)).decode()) for n in names))
    return str(path)


def test_a_sealed_secret_holds_no_value_and_opens_with_any_listed_key(tmp_path):
    old = SecretCipher.from_file(key_file(tmp_path, "k1", name="old"))
    sealed = old.encrypt(SECRET)
    assert "data" not in sealed and sealed[FIELD].startswith("k8s:enc:aesgcm:v1:k1:")
    assert "hunter2" not in str(sealed) and SECRET["data"]["pass"] not in str(sealed)
    assert sealed["metadata"] == SECRET["metadata"] and old.decrypt(sealed) == SECRET
    assert old.encrypt(SECRET)[FIELD] != sealed[FIELD]            # a fresh nonce each time


def test_rotation_with_a_key_list(tmp_path):
    path = key_file(tmp_path, "k1")
    k1 = load_keys(path)
    sealed = SecretCipher(k1).encrypt(SECRET)
    k2 = load_keys(key_file(tmp_path, "k2", name="k2"))
    rotated = SecretCipher(k2 + k1)
    assert rotated.decrypt(sealed) == SECRET
    assert rotated.encrypt(SECRET)[FIELD].startswith("k8s:enc:aesgcm:v1:k2:")
    with pytest.raises(DecryptError, match="encrypted with key 'k1', which is not in --encryption-key-file"):
        SecretCipher(k2).decrypt(sealed)


def test_a_ciphertext_moved_to_another_secret_or_damaged_does_not_open(tmp_path):
    cipher = SecretCipher.from_file(key_file(tmp_path, "k1"))
    sealed = cipher.encrypt(SECRET)
    moved = dict(sealed, metadata={"name": "other", "namespace": "default"})
    with pytest.raises(DecryptError, match="does not decrypt"):
        cipher.decrypt(moved)
    with pytest.raises(DecryptError, match="does not decrypt"):
        cipher.decrypt(dict(sealed, **{FIELD: sealed[FIELD][:-8] + "AAAAAAA="}))


@pytest.mark.parametrize("text, words", [
    ("k1\n", "line 1: write NAME:BASE64"),
    ("k1:!!!\n", "line 1: the key is not base64"),
    ("k1:%s\n" % base64.b64encode(b"short").decode(), "the key is 5 bytes, it must be 32"),
    ("# nothing\n", "holds no key"),
    ("k1:%s\nk1:%s\n" % ((base64.b64encode(b"x" * 32).decode(),) * 2), "line 2: key name k1 is used twice"),
])
def test_a_bad_key_file_says_which_line(tmp_path, text, words):
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(KeyFileError, match=words):
        load_keys(str(path))


def test_the_replica_view_stores_ciphertext_and_serves_plaintext(tmp_path):
    store = _FakeReplica()
    view = SecretsAtRest(store, SecretCipher.from_file(key_file(tmp_path, "k1")))
    result = view.write([commands.create("secrets", SECRET)])
    assert result["results"][0]["object"]["data"] == SECRET["data"]
    stored = store.objects[("secrets", "default", "db")]
    assert FIELD in stored and "data" not in stored
    assert view.get("secrets", "default", "db")[0]["data"] == SECRET["data"]
    assert view.list("secrets", "default")[0][0]["data"] == SECRET["data"]
    plain = SecretsAtRest(store, None)
    with pytest.raises(ApiError) as err:
        plain.get("secrets", "default", "db")
    assert err.value.code == 503 and "no --encryption-key-file" in err.value.message
    view.write([commands.create("configmaps", {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"},
                                              "data": {"a": "b"}})])
    assert store.objects[("configmaps", "default", "c")]["data"] == {"a": "b"}


class _FakeReplica:
    """Just enough of a replica: stores what it is given, answers like the FSM."""

    def __init__(self):
        self.objects = {}

    def write(self, ops, key=None):
        results = []
        for op in ops:
            obj = op["object"]
            self.objects[(op["resource"], obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
            results.append({"object": obj, "code": 201})
        return {"ok": True, "results": results}

    def get(self, resource, namespace, name, consistent=True):
        return self.objects.get((resource, namespace, name)), 1

    def list(self, resource, namespace=None, consistent=True, selection=None):
        return [o for (r, ns, _), o in self.objects.items() if r == resource and ns == namespace], 1


def test_watch_events_of_secrets_are_opened_and_others_pass(tmp_path):
    from shepherd_ha.store.fsm import Change
    cipher = SecretCipher.from_file(key_file(tmp_path, "k1"))
    sealed = cipher.encrypt(SECRET)
    cm = {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}, FIELD: "untouched"}

    class Log:
        def since(self, revision):
            return [Change(5, "ADDED", "secrets", sealed, None), Change(6, "ADDED", "configmaps", cm, None)]

    store = _FakeReplica()
    store.watch_log = Log()
    secret_change, cm_change = SecretsAtRest(store, cipher).watch_log.since(0)
    assert isinstance(secret_change, Change) and secret_change.object == SECRET and secret_change.revision == 5
    assert cm_change.object is cm
    # without the key, a watch sends the Secret sealed rather than failing the stream
    assert SecretsAtRest(store, None).watch_log.since(0)[0].object == sealed
