"""The snapshot file format (shepherd_ha/snapshot_file.py) and the snapshot endpoint over a
real FSM: whole files read back, every kind of damage refused with its name."""
import hashlib
import json
import threading

import pytest

from shepherd_ha import snapshot_file
from shepherd_ha.api import snapshot_endpoint
from shepherd_ha.api.app import create_app
from shepherd_ha.snapshot_file import Reader, SnapshotError
from shepherd_ha.store import commands
from shepherd_ha.store.fsm import StoreFSM

CLUSTER = "0123456789abcdef0123456789abcdef"


def configmap(name, value="v"):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default",
                                                                   "resourceVersion": "3"}, "data": {"k": value}}


def write(tmp_path, items, header=None, name="s.snap"):
    header = header or {"clusterId": CLUSTER, "revision": 9, "objects": len(items)}
    path = tmp_path / name
    path.write_bytes(b"".join(snapshot_file.encode(header, items)))
    return path


ITEMS = [("configmaps", configmap("c%d" % i, "x" * i)) for i in range(20)]


def test_round_trip_keeps_header_objects_and_order(tmp_path):
    path = write(tmp_path, ITEMS)
    snap = snapshot_file.read(str(path))
    assert snap.header["format"] == "shepherd-ha-snapshot" and snap.header["version"] == 1
    assert (snap.header["clusterId"], snap.header["revision"], snap.header["objects"]) == (CLUSTER, 9, 20)
    assert snap.objects == ITEMS
    body = path.read_bytes()
    last = body.rstrip(b"\n").rsplit(b"\n", 1)[1]
    assert json.loads(last)["sha256"] == hashlib.sha256(body[:len(body) - len(last) - 1]).hexdigest()


@pytest.mark.parametrize("keep", [0, 1, 40, 200, -60, -1])
def test_truncated_file_is_refused_as_truncated(tmp_path, keep):
    body = write(tmp_path, ITEMS).read_bytes()
    cut = tmp_path / "cut.snap"
    cut.write_bytes(body[:keep] if keep >= 0 else body[:len(body) + keep])
    with pytest.raises(SnapshotError, match="truncated|empty"):
        snapshot_file.read(str(cut))


def test_cut_at_a_line_boundary_says_how_many_objects_arrived(tmp_path):
    lines = write(tmp_path, ITEMS).read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.snap"
    cut.write_bytes(b"".join(lines[:8]))          # the header and 7 objects
    with pytest.raises(SnapshotError, match=r"truncated: it ends after 7 of 20 objects, before its checksum line"):
        snapshot_file.read(str(cut))


def test_every_single_bit_flip_in_an_object_or_the_checksum_is_refused(tmp_path):
    body = write(tmp_path, ITEMS[:3]).read_bytes()
    first_line = body.index(b"\n") + 1
    bad = tmp_path / "bad.snap"
    for offset in range(first_line, len(body) - 1, 7):      # every 7th byte after the header, to the checksum
        for bit in (0, 5):
            damaged = bytearray(body)
            damaged[offset] ^= 1 << bit
            if damaged[offset] == ord("\n") or body[offset] == ord("\n"):
                continue                                     # a moved line break is checked below
            bad.write_bytes(bytes(damaged))
            with pytest.raises(SnapshotError, match="corrupted|truncated"):
                snapshot_file.read(str(bad))


def assert_edit_refused(tmp_path, items, old, new, match):
    """A snapshot of `items` with its first `old` bytes replaced by `new` is refused, naming `match`."""
    body = write(tmp_path, items).read_bytes()
    bad = tmp_path / "bad.snap"
    bad.write_bytes(body.replace(old, new, 1))
    with pytest.raises(SnapshotError, match=match):
        snapshot_file.read(str(bad))


def test_a_changed_value_that_still_parses_fails_the_checksum(tmp_path):
    assert_edit_refused(tmp_path, ITEMS, b'"xxxx"', b'"xxxy"',
                        "corrupted: its sha256 is [0-9a-f]{64}, its checksum line says")


def test_header_tampering_fails_the_checksum(tmp_path):
    assert_edit_refused(tmp_path, ITEMS, b'"revision":9', b'"revision":8', "sha256")


def test_wrong_version_and_foreign_files_are_named(tmp_path):
    assert_edit_refused(tmp_path, ITEMS[:2], b'"version":1', b'"version":2',
                        "format version 2; this shepherd-ha reads version 1")
    other = tmp_path / "other.snap"
    other.write_bytes(b'{"hello": "world"}\n')
    with pytest.raises(SnapshotError, match="is not a shepherd-ha snapshot"):
        snapshot_file.read(str(other))
    binary = tmp_path / "gz.snap"
    binary.write_bytes(b"\x1f\x8b\x08\x00 not json\n")
    with pytest.raises(SnapshotError, match="line 1 is not JSON"):
        snapshot_file.read(str(binary))
    with pytest.raises(SnapshotError, match="cannot read"):
        snapshot_file.read(str(tmp_path / "missing.snap"))


def test_data_after_the_checksum_and_a_wrong_count_are_refused(tmp_path):
    body = write(tmp_path, ITEMS[:2]).read_bytes()
    longer = tmp_path / "longer.snap"
    longer.write_bytes(body + b'{"resource": "configmaps", "object": {}}\n')
    with pytest.raises(SnapshotError, match="after the checksum line"):
        snapshot_file.read(str(longer))
    with pytest.raises(SnapshotError, match="holds 2 objects, its header says 5"):
        list(snapshot_file.encode({"clusterId": CLUSTER, "revision": 1, "objects": 5}, ITEMS[:2]))


def test_an_empty_store_makes_a_valid_snapshot(tmp_path):
    snap = snapshot_file.read(str(write(tmp_path, [])))
    assert snap.objects == [] and snap.header["objects"] == 0


# ---- the endpoint over a real FSM ----

class FsmReplica:
    """The surface the snapshot endpoint reads (sync, node.lock/fsm, status), over a real StoreFSM."""
    id = "r1"
    cluster_id = CLUSTER

    def __init__(self):
        self.node = type("Node", (), {})()
        self.node.lock = threading.RLock()
        self.node.fsm = StoreFSM()
        self.synced = 0

    def sync(self, consistent):
        self.synced += 1

    def status(self):
        return {"epoch": list(self.node.fsm.epoch)}

    def apply(self, *ops):
        with self.node.lock:
            result = self.node.fsm.apply(commands.write(list(ops), None))
        assert result["ok"], result
        return result


def test_endpoint_streams_every_object_at_the_revision_after_a_barrier():
    replica = FsmReplica()
    replica.apply(commands.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "default"}}))
    for i in range(30):
        replica.apply(commands.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                     "metadata": {"name": "c%02d" % i, "namespace": "default"},
                                                     "data": {"v": str(i)}}))
    app = create_app(replica)
    response = app.test_client().get(snapshot_endpoint.PATH)
    assert response.status_code == 200, response.data[:300]
    assert response.headers["Shepherd-Snapshot-Objects"] == "31"
    reader = Reader("test")
    for line in response.data.splitlines(keepends=True):
        reader.feed(line)
    reader.finish()
    assert replica.synced == 1, "no read barrier before the copy"
    assert reader.header["revision"] == replica.node.fsm.revision == 31
    assert reader.header["clusterId"] == CLUSTER and reader.header["resources"] == {"configmaps": 30,
                                                                                      "namespaces": 1}
    got = {(r, o["metadata"].get("namespace"), o["metadata"]["name"]): o for r, o in reader.objects}
    want = {(r, o["metadata"].get("namespace"), o["metadata"]["name"]): o
            for r, bucket in replica.node.fsm.objects.items() for o in bucket.values()}
    assert got == want


def test_endpoint_refuses_callers_without_the_admin_group():
    from werkzeug.test import EnvironBuilder
    replica = FsmReplica()
    app = create_app(replica)
    environ = EnvironBuilder(path=snapshot_endpoint.PATH).get_environ()
    environ["shepherd.groups"] = ("system:nodes",)
    with app.request_context(environ):
        response = app.full_dispatch_request()
    assert response.status_code == 403
    assert "system:masters" in response.get_json()["message"]


def test_a_snapshot_is_a_bulk_request_for_flow_control():
    from shepherd_ha.api.flow_control import BULK, FlowControl
    assert FlowControl().classify("GET", snapshot_endpoint.PATH, {}).level == BULK


def test_sheepctl_save_refuses_a_stream_that_ends_early_and_leaves_no_file(tmp_path, capsys):
    """A replica that dies mid-stream: what arrived is checked, refused, and removed."""
    from flask import Flask, Response
    from test_api_pod_logs import Served

    from ctl.main import main as sheepctl
    body = b"".join(snapshot_file.encode({"clusterId": CLUSTER, "revision": 9, "objects": len(ITEMS)}, ITEMS))
    app = Flask("t")
    app.add_url_rule(snapshot_endpoint.PATH, "snap",
                     lambda: Response(iter([body[:len(body) // 2]]), mimetype="application/x-ndjson"))
    served = Served(app)
    try:
        target = tmp_path / "out.snap"
        assert sheepctl(["--server", served.url, "cluster", "snapshot", "save", str(target)]) == 1
        err = capsys.readouterr().err
        assert "snapshot not saved" in err and "truncated" in err, err
        assert not target.exists() and not (tmp_path / "out.snap.partial").exists()
    finally:
        served.stop()
