"""Secrets at rest on real replicas: with --encryption-key-file a Secret's value is in
no replica's raft.journal or raft.dump (the bytes are grepped, after a compaction wrote
the dump), yet every replica serves it; without the option the value is there (the
test would pass for the wrong reason otherwise)."""
import base64
import gzip
import os
import time
import uuid

import pytest

from shepherd_ha.store.encoded_objects import json_of
from shepherd_ha.store.pysyncobj_overrides.dump_file import read_dump

from .helpers import Cluster, call, expect

pytestmark = pytest.mark.integration


def key_file(path):
    path.write_text("k1:%s\n" % base64.b64encode(os.urandom(32)).decode())
    return str(path)


def store_bytes(cluster):
    """{file path: bytes} of every replica's journal and dump."""
    out = {}
    for ident in cluster.ids:
        data = os.path.join(cluster.lc.dir, ident, "data")
        for name in sorted(os.listdir(data)):
            if name.startswith("raft.journal") or name.startswith("raft.dump"):
                with open(os.path.join(data, name), "rb") as fh:
                    raw = fh.read()
                # the dump is gzipped: compressed clear text is still clear text at rest
                out[os.path.join(ident, name)] = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
                if name == "raft.dump":
                    # and so is each object in it, compressed on its own (store/object_compression.py)
                    fsm = read_dump(data)
                    out[os.path.join(ident, name)] += b"".join(
                        json_of(stored) for bucket in fsm.objects.values() for stored in bucket.raw_values())
    return out


def dump_times(cluster):
    """{replica: its dump's mtime (ns), or None}."""
    out = {}
    for ident in cluster.ids:
        try:
            out[ident] = os.stat(os.path.join(cluster.lc.dir, ident, "data", "raft.dump")).st_mtime_ns
        except FileNotFoundError:
            out[ident] = None
    return out


def write_secret(cluster):
    value = "adm-marker-%s" % uuid.uuid4().hex
    expect(call("POST", cluster.url(cluster.followers()[0]) + "/api/v1/namespaces/default/secrets",
                json={"metadata": {"name": "adm-db"}, "stringData": {"pass": value}}), 201)
    return value


def compact(cluster):
    url = cluster.url(cluster.followers()[0])
    for i in range(80):      # past log_compaction_entries: every replica writes its dump
        expect(call("POST", url + "/api/v1/namespaces/default/configmaps",
                    json={"metadata": {"name": "adm-fill-%d" % i}, "data": {"i": str(i)}}), 201)


def found(files, value):
    needles = (value.encode(), base64.b64encode(value.encode()))
    return sorted(path for path, data in files.items() if any(n in data for n in needles))


@pytest.mark.parametrize("encrypted", [True, False])
def test_a_secret_value_reaches_the_disk_only_without_encryption(tmp_path, encrypted):
    options = {"log_compaction_entries": 50}
    if encrypted:
        options["encryption_key_file"] = key_file(tmp_path / "keys")
    cluster = Cluster(tmp_path / "c", server_options=options)
    try:
        cluster.start()
        value = write_secret(cluster)
        for ident in cluster.ids:
            got = expect(call("GET", cluster.url(ident) + "/api/v1/namespaces/default/secrets/adm-db"), 200)
            assert base64.b64decode(got["data"]["pass"]).decode() == value
            assert "encryptedData" not in got
        journals = {p: d for p, d in store_bytes(cluster).items() if p.endswith("raft.journal")}
        assert len(journals) == 3
        before = dump_times(cluster)
        compact(cluster)
        deadline = time.monotonic() + 20         # the replicas take turns to dump (store/dump_turns.py)
        while True:
            now = dump_times(cluster)
            fresh = sorted(i for i in cluster.ids if now[i] is not None and now[i] != before[i])
            if len(fresh) == 3 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert len(fresh) == 3, "not every replica wrote a dump after the secret in 20 s: only %s" % fresh
        dumps = {p: d for p, d in store_bytes(cluster).items() if p.endswith("raft.dump")}
        if encrypted:
            assert found(journals, value) == [] and found(dumps, value) == [], \
                "the secret's value is on disk in %s" % (found(journals, value) + found(dumps, value))
            assert all(b"k8s:enc:aesgcm:v1:k1:" in data for data in list(journals.values()) + list(dumps.values()))
        else:
            assert found(journals, value) == sorted(journals) and found(dumps, value) == sorted(dumps)
    finally:
        cluster.stop_all()
