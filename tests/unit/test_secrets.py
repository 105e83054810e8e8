"""Secrets: validation (base64 data, keys, types), stringData merged into data,
immutable, the pods' references (for NodeRestriction), and the agent's delivery
(env vars, volume files with modes) without touching a disk."""
import base64

import pytest

from agent import secret_volumes as SV
from agent import volumes as V
from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model.pod_references import referenced_configmaps, referenced_secrets
from shepherd_ha.model.validation import validate_object, validate_update


def b64(text):
    return base64.b64encode(text.encode()).decode()


def secret(**fields):
    obj = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": "default"}}
    obj.update(fields)
    return obj


def causes(obj):
    return {c.field: c.message for c in validate_object("secrets", obj)}


@pytest.mark.parametrize("obj, field, words", [
    (secret(data={"password": "not base64!"}), "data.password", "is not base64"),
    (secret(data={"password": "czNjcjN0"[:-1]}), "data.password", "is not base64"),
    (secret(data={"bad/key": b64("x")}), "data.bad/key", "is not a valid key"),
    (secret(data={"k": 5}), "data.k", "must be a string"),
    (secret(stringData={"k": ["x"]}), "stringData.k", "must be a string"),
    (secret(stringData={"k": "\ud800"}), "stringData.k", "lone surrogate"),
    (secret(type="kubernetes.io/tls", data={"tls.crt": b64("c")}), "data.tls.key", "is required for a Secret of type"),
    (secret(type="bad type"), "type", "is not a valid Secret type"),
    (secret(immutable="yes"), "immutable", "must be true or false"),
    (secret(stringData={"big": "x" * (1024 * 1024 + 1)}), "data", "at most 1 MiB"),
])
def test_bad_secrets_name_the_field(obj, field, words):
    found = causes(obj)
    assert field in found and words in found[field], found


def test_string_data_is_merged_into_data_and_not_stored():
    obj = apply_defaults("secrets", secret(data={"user": b64("old"), "keep": b64("k")},
                                           stringData={"user": "admin", "pass": "s3cr3t"}))
    assert "stringData" not in obj
    assert obj["data"] == {"user": b64("admin"), "keep": b64("k"), "pass": b64("s3cr3t")}
    assert obj["type"] == "Opaque"
    assert validate_object("secrets", obj) == []


def test_an_immutable_secret_keeps_its_data_and_stays_immutable():
    old = apply_defaults("secrets", secret(data={"a": b64("1")}, immutable=True))
    changed = dict(old, data={"a": b64("2")})
    assert [c.field for c in validate_update("secrets", old, changed)] == ["data"]
    assert [c.field for c in validate_update("secrets", old, dict(old, immutable=False))] == ["immutable"]
    assert validate_update("secrets", old, dict(old, metadata=dict(old["metadata"], labels={"a": "b"}))) == []
    mutable = apply_defaults("secrets", secret(data={"a": b64("1")}))
    assert validate_update("secrets", mutable, dict(mutable, data={"a": b64("2")})) == []
    assert [c.field for c in validate_update("secrets", mutable, dict(mutable, type="other"))] == ["type"]


POD = {"metadata": {"name": "p", "namespace": "default", "uid": "u1"}, "spec": {
    "containers": [{"name": "main", "image": "busybox",
                    "env": [{"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pass"}}},
                            {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
                            {"name": "PLAIN", "value": "v"}],
                    "envFrom": [{"secretRef": {"name": "all"}, "prefix": "S_"}, {"configMapRef": {"name": "cfg2"}}],
                    "volumeMounts": [{"name": "creds", "mountPath": "/creds"}]}],
    "initContainers": [{"name": "init", "image": "busybox", "envFrom": [{"secretRef": {"name": "init-s"}}]}],
    "volumes": [{"name": "creds", "secret": {"secretName": "tls", "defaultMode": 0o400,
                                            "items": [{"key": "tls.key", "path": "k/key.pem", "mode": 0o440}]}},
                {"name": "c", "configMap": {"name": "cfg3"}}]}}


def test_a_pod_using_secrets_is_valid_and_its_references_are_listed():
    obj = dict(POD, apiVersion="v1", kind="Pod")
    assert validate_object("pods", obj) == []
    assert referenced_secrets(POD) == {"db", "all", "init-s", "tls"}
    assert referenced_configmaps(POD) == {"cfg", "cfg2", "cfg3"}
    assert referenced_secrets({"spec": {"containers": "junk", "volumes": [None, {"secret": 3}]}}) == set()


def test_the_agent_resolves_secret_env_vars_decoded():
    secrets = {"db": secret(data={"pass": b64("s3cr3t")}), "all": secret(data={"A": b64("1"), "B": b64("2")})}
    cms = {"cfg": {"data": {"mode": "prod"}}, "cfg2": {"data": {"X": "y"}}}
    env = V.resolve_env(POD, POD["spec"]["containers"][0], lambda ns, n: cms.get(n), lambda ns, n: secrets.get(n))
    assert sorted(env) == ["MODE=prod", "PASS=s3cr3t", "PLAIN=v", "S_A=1", "S_B=2", "X=y"]
    with pytest.raises(V.ConfigProblem, match='secret "db" not found in namespace "default"'):
        V.resolve_env(POD, POD["spec"]["containers"][0], lambda ns, n: cms.get(n),
                      lambda ns, n: None if n == "db" else secrets.get(n))
    with pytest.raises(V.ConfigProblem, match='key "pass" not found in secret "default/db"'):
        V.resolve_env(POD, POD["spec"]["containers"][0], lambda ns, n: cms.get(n),
                      lambda ns, n: secret(data={}) if n == "db" else secrets.get(n))


def test_secret_volume_files_get_their_modes_and_missing_keys_are_problems():
    volume = POD["spec"]["volumes"][0]
    files, modes = SV.secret_files(volume, secret(data={"tls.key": b64("KEY"), "tls.crt": b64("CRT")}),
                                   V.ConfigProblem)
    assert files == {"k/key.pem": b"KEY"} and modes == {"k/key.pem": 0o440}
    whole = {"name": "w", "secret": {"secretName": "s"}}
    files, modes = SV.secret_files(whole, secret(data={"a": b64("1")}), V.ConfigProblem)
    assert files == {"a": b"1"} and modes == {"a": 0o644}
    with pytest.raises(V.ConfigProblem, match='key "tls.key" not found in secret "tls"'):
        SV.secret_files(volume, secret(data={}), V.ConfigProblem)
    with pytest.raises(V.ConfigProblem, match='secret "s" not found'):
        SV.secret_files(whole, None, V.ConfigProblem)
    assert SV.secret_files({"name": "o", "secret": {"secretName": "s", "optional": True}}, None,
                           V.ConfigProblem) == ({}, {})


def test_a_simulated_runtime_resolves_secret_volumes_without_writing(tmp_path):
    mounts = V.prepare_mounts(POD, POD["spec"]["containers"][0], str(tmp_path), lambda ns, n: None, write=False,
                              get_secret=lambda ns, n: secret(data={"tls.key": b64("K")}))
    assert [(m.target, m.read_only) for m in mounts] == [("/creds", True)]
    assert list(tmp_path.iterdir()) == []
