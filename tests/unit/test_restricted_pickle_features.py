"""What membership change, restore, the pod network and Services put on the Raft wire and
in dumps passes the restricted unpickler (restricted_pickle), and nothing more does."""
import gzip
import io
import os
import tracemalloc

import pytest
from pysyncobj import pickle as pysyncobj_pickle
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _COMMAND_TYPE

from shepherd_ha.store import commands
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.pysyncobj_overrides import restricted_pickle
from shepherd_ha.store.pysyncobj_overrides.dump_file import DUMP_FILE, dump_bytes, read_dump, write_dump
from shepherd_ha.store.pysyncobj_overrides.restricted_pickle import RefusedPickle, loads_membership, loads_plain
from shepherd_ha.store.pysyncobj_overrides.syncobj import PipelinedSyncObj
from tests.integration.raft_wire import RunsCommand, touch_command

MEMBERSHIP = bytes([_COMMAND_TYPE.MEMBERSHIP])
parse = PipelinedSyncObj._SyncObj__parseChangeClusterRequest    # reads nothing of self


def pysyncobj_membership_entry(op, address):
    """The entry exactly as PySyncObj's addNodeToCluster/removeNodeFromCluster make it."""
    node = TCPNode(address)
    return MEMBERSHIP + pysyncobj_pickle.dumps([op, node.id, node])


@pytest.mark.parametrize("op", ["add", "rem"])
def test_pysyncobj_membership_entries_parse_to_the_same_request(op):
    request = parse(None, pysyncobj_membership_entry(op, "127.0.0.1:7004"))
    assert request[:2] == [op, "127.0.0.1:7004"] and request[2] == TCPNode("127.0.0.1:7004")
    assert type(request[2]) is TCPNode and request[2].address == "127.0.0.1:7004"


def test_a_membership_entry_with_another_global_is_ignored_and_never_run(tmp_path, caplog):
    marker = tmp_path / "ran"
    entry = MEMBERSHIP + pysyncobj_pickle.dumps(["add", "127.0.0.1:1", RunsCommand(touch_command(str(marker)))])
    assert parse(None, entry) == restricted_pickle.IGNORED_MEMBERSHIP_CHANGE
    assert not marker.exists()
    assert "refused a Raft membership change entry" in caplog.text


def test_a_membership_entry_of_another_shape_is_refused():
    lying = TCPNode("10.0.0.9:7001")
    for request in (["add", "127.0.0.1:7004", lying], ["drop", "127.0.0.1:7004", TCPNode("127.0.0.1:7004")],
                    ["add", "127.0.0.1:7004"], {"add": 1}, ["add", "nohost", TCPNode("127.0.0.1:7004")]):
        with pytest.raises(RefusedPickle):
            loads_membership(pysyncobj_pickle.dumps(request))
        assert parse(None, MEMBERSHIP + pysyncobj_pickle.dumps(request)) == restricted_pickle.IGNORED_MEMBERSHIP_CHANGE


def test_a_tcpnode_is_still_refused_outside_membership_entries():
    node = TCPNode("127.0.0.1:7004")
    with pytest.raises(RefusedPickle, match="pysyncobj.node.TCPNode"):
        loads_plain(pysyncobj_pickle.dumps(["add", node.id, node]))
    assert parse(None, bytes([_COMMAND_TYPE.REGULAR]) + pysyncobj_pickle.dumps(["add"])) is None


def test_the_new_commands_pass_as_plain_data():
    for command in (commands.members([{"id": "r4", "raft": "127.0.0.1:7004", "api": "http://127.0.0.1:7"}],
                                     remove=["r1"]),
                    commands.network("10.244.0.0/16", 24, [3, "r1"]), commands.service_network("10.96.0.0/12", [3, "r1"])):
        assert loads_plain(pysyncobj_pickle.dumps(command)) == command


def busy_fsm():
    fsm = StoreFSM()
    assert fsm.apply(commands.write([commands.create("namespaces", {"metadata": {"name": "default"}})]))["ok"]
    assert fsm.apply(commands.network("10.244.0.0/16", 24))["ok"]
    assert fsm.apply(commands.service_network("10.96.0.0/12"))["ok"]
    assert fsm.apply(commands.members([{"id": "r1", "raft": "127.0.0.1:7001", "api": "http://127.0.0.1:1"}]))["ok"]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
           "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
                    "type": "NodePort"}}
    assert fsm.apply(commands.write([commands.create("nodes", node), commands.create("services", svc)]))["ok"]
    assert fsm.objects["nodes"][("", "n1")]["spec"]["podCIDR"]
    assert fsm.objects["services"][("default", "web")]["spec"]["clusterIP"]
    return fsm


def test_a_restore_dump_of_every_feature_loads_through_the_dump_allow_list(tmp_path):
    fsm = busy_fsm()
    data_dir = str(tmp_path / "data")
    write_dump(data_dir, dump_bytes(fsm, ["127.0.0.1:7001", "127.0.0.1:7002"]))
    assert oct(os.stat(os.path.join(data_dir, DUMP_FILE)).st_mode & 0o777) == oct(0o600)
    assert oct(os.stat(data_dir).st_mode & 0o777) == oct(0o700)
    loaded = read_dump(data_dir)                       # restricted_pickle.load_dump
    assert loaded.digest() == fsm.digest() and loaded.members == fsm.members
    with gzip.open(os.path.join(data_dir, DUMP_FILE)) as g:
        whole = restricted_pickle.load_dump(io.BytesIO(g.read()))
    assert {n.address for n in whole[3]} == {"127.0.0.1:7001", "127.0.0.1:7002"}


class _Sink(io.RawIOBase):
    def writable(self):
        return True

    def write(self, data):
        self.written = getattr(self, "written", 0) + len(data)
        return len(data)


def test_a_dump_is_written_in_frames_and_copies_no_object_then_loads_as_before():
    """PySyncObj's serializer pickles a dump through SAFE_PICKLE.dump: protocol 2 held the
    whole pickle and a str copy of every stored object in memory until the end (the dump
    child forked from the store process grew by the store's size). Random values: the
    store compresses each object (store/object_compression.py)."""
    fsm = busy_fsm()
    for i in range(2000):
        fsm.apply(commands.write([commands.create("configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d" % i, "namespace": "default",
                                                                 "uid": "u%d" % i}, "data": {"k": os.urandom(2000).hex()}})]))
    state = ({"fsm": fsm}, "last", "before", set())
    sink = _Sink()
    tracemalloc.start()
    try:
        restricted_pickle.SAFE_PICKLE.dump(state, sink)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.written > 4_000_000 and peak < sink.written / 4, (peak, sink.written)
    buffer = io.BytesIO()
    restricted_pickle.SAFE_PICKLE.dump(state, buffer)
    loaded = restricted_pickle.load_dump(io.BytesIO(buffer.getvalue()))[0]["fsm"]
    assert loaded.digest() == fsm.digest()


def test_a_dump_pickled_with_protocol_2_still_loads():
    """What releases before this one wrote (and a leader of one sends as a snapshot)."""
    fsm = busy_fsm()
    blob = pysyncobj_pickle.dumps(({"fsm": fsm}, "last", "before", set()))      # protocol 2
    assert restricted_pickle.load_dump(io.BytesIO(blob))[0]["fsm"].digest() == fsm.digest()
