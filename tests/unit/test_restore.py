"""`shepherd-ha restore` (shepherd_ha/cli/restore.py): a checked snapshot becomes a new
cluster's layout and Raft dumps; anything wrong is refused with nothing written."""
import os

import pytest
import yaml

from shepherd_ha import snapshot_file
from shepherd_ha.cli import restore
from shepherd_ha.cli.local_cluster import LocalCluster, LocalClusterError, find_base_port
from shepherd_ha.cli.main import main
from shepherd_ha.snapshot_file import SnapshotError
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.pysyncobj_overrides.dump_file import read_dump

OLD = "0123456789abcdef0123456789abcdef"


def cm(name, rv="5", namespace="default"):
    meta = {"name": name, "resourceVersion": rv, "uid": "u-" + name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": name}}


def ns(name, rv="1"):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "resourceVersion": rv}}


def snapshot(tmp_path, items, revision=10, name="s.snap"):
    path = tmp_path / name
    header = {"clusterId": OLD, "revision": revision, "objects": len(items)}
    path.write_bytes(b"".join(snapshot_file.encode(header, items)))
    return str(path)


GOOD = [("namespaces", ns("default")), ("configmaps", cm("a")), ("configmaps", cm("b", "10"))]


def test_restore_writes_a_new_cluster_whose_dumps_hold_every_object(tmp_path):
    path = snapshot(tmp_path, GOOD)
    cluster, header = restore.restore(path, str(tmp_path / "new"), replicas=3, base_port=find_base_port(3))
    assert header["revision"] == 10
    spec = cluster.spec()
    assert spec["cluster_id"] != OLD and len(spec["cluster_id"]) == 32
    assert spec["restored_from"]["clusterId"] == OLD and spec["restored_from"]["revision"] == 10
    expected = restore.store_of(snapshot_file.read(path))
    for ident in cluster.ids():
        rdir = tmp_path / "new" / ident
        server = yaml.safe_load((rdir / "server.yaml").read_text())
        assert server["data_dir"] == str(rdir / "data") and server["cluster_id"] == spec["cluster_id"]
        assert server["raft_password_file"] == str(tmp_path / "new" / "raft-password")
        assert server["raft_salt"] == spec["raft_salt"] and len(bytes.fromhex(spec["raft_salt"])) >= 16
        assert os.stat(rdir / "data").st_mode & 0o777 == 0o700
        assert {os.stat(p).st_mode & 0o777 for p in (rdir / "data").iterdir()} == {0o600}
        assert (rdir / "data" / "cluster-id").read_text().strip() == spec["cluster_id"]
        fsm = read_dump(str(rdir / "data"))
        assert fsm.revision == 10 and fsm.digest() == expected.digest()
        assert fsm.epoch == [0, ""] and not fsm.dedup
    leftovers = [n for n in os.listdir(tmp_path) if ".restore-" in n]
    assert not leftovers, leftovers


def _refused(tmp_path, path, match, target="new"):
    with pytest.raises((SnapshotError, LocalClusterError), match=match):
        restore.restore(path, str(tmp_path / target), base_port=find_base_port(3))
    assert not os.path.exists(tmp_path / target) or not os.listdir(tmp_path / target)
    assert not [n for n in os.listdir(tmp_path) if ".restore-" in n], "a staging dir was left behind"


def test_objects_that_cannot_be_restored_are_refused_naming_them(tmp_path):
    _refused(tmp_path, snapshot(tmp_path, GOOD + [("gadgets", cm("g"))], name="1"), "'gadgets', which this")
    _refused(tmp_path, snapshot(tmp_path, GOOD + [("configmaps", cm("late", "11"))], name="2"),
             "late has resourceVersion '11', not a revision up to the snapshot's 10")
    _refused(tmp_path, snapshot(tmp_path, GOOD + [("configmaps", cm("a"))], name="3"), "appears twice")
    _refused(tmp_path, snapshot(tmp_path, GOOD + [("configmaps", cm("nons", namespace=None))], name="4"),
             "lacks a namespace")
    _refused(tmp_path, snapshot(tmp_path, GOOD + [("configmaps", {"metadata": {}})], name="5"), "no metadata.name")


def test_a_truncated_or_corrupted_file_writes_nothing(tmp_path, capsys):
    body = open(snapshot(tmp_path, GOOD), "rb").read()
    (tmp_path / "cut.snap").write_bytes(body[:-30])
    (tmp_path / "flip.snap").write_bytes(body.replace(b'"k":"a"', b'"k":"A"'))
    for name, match in (("cut.snap", "truncated"), ("flip.snap", "sha256")):
        code = main(["restore", "--snapshot", str(tmp_path / name), "--dir", str(tmp_path / "new")])
        err = capsys.readouterr().err
        assert code == 1 and match in err and "nothing was written" in err, err
        assert not os.path.exists(tmp_path / "new")
        assert not [n for n in os.listdir(tmp_path) if ".restore-" in n]


def test_a_directory_with_a_cluster_or_other_files_is_refused(tmp_path):
    path = snapshot(tmp_path, GOOD)
    LocalCluster(str(tmp_path / "taken")).create(1, find_base_port(1))
    _refused_keep = pytest.raises(LocalClusterError, match="already holds a cluster")
    with _refused_keep:
        restore.restore(path, str(tmp_path / "taken"), base_port=find_base_port(3))
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(LocalClusterError, match="is not empty"):
        restore.restore(path, str(tmp_path / "busy"), base_port=find_base_port(3))
    assert os.listdir(tmp_path / "busy") == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    cluster, _ = restore.restore(path, str(tmp_path / "empty"), base_port=find_base_port(3))
    assert cluster.exists


def test_store_of_rebuilds_the_fsm_the_snapshot_was_taken_from(tmp_path):
    fsm = restore.store_of(snapshot_file.read(snapshot(tmp_path, GOOD)))
    assert isinstance(fsm, StoreFSM) and fsm.revision == 10
    assert fsm.get("configmaps", "default", "b")["metadata"]["resourceVersion"] == "10"
    assert fsm.get("namespaces", None, "default") is not None
