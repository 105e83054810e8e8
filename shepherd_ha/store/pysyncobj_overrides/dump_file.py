"""Write a PySyncObj full dump (DATA_DIR/raft.dump) for a new cluster's replica.

`shepherd-ha restore` seeds every replica of a new cluster with the same dump, so the
restored objects are state the Raft log starts after, as if the cluster had compacted
its log there: each replica loads it on start (PipelinedSyncObj._SyncObj__loadDumpFile),
a replica that joins later or lags gets it from the leader like any snapshot, and
nothing is replayed through the log.

The file is what PySyncObj 0.3.17's Serializer writes: gzip of its pickle of
    (data, last entry, entry before it, cluster nodes)
with data = [SyncObj's own state, each consumer's state] (`_SyncObj__enabledCodeVersion`,
then FSMConsumer's {"fsm": StoreFSM}) and entries (command, index, term). The two
entries are no-ops at indexes 1 and 2 of term 0: before any term an election makes, so
the first leader's entries follow them on every replica alike.
"""
import gzip
import os
import pickle

from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _COMMAND_TYPE

from shepherd_ha.store import data_at_rest

from .restricted_pickle import DUMP_PROTOCOL, load_dump
from .syncobj import DUMP_FILE

_NO_OP = bytes([_COMMAND_TYPE.NO_OP])
_SEED_ENTRIES = ((_NO_OP, 1, 0), (_NO_OP, 2, 0))


def dump_bytes(fsm, raft_addresses):
    """The dump file's bytes for `fsm` (a StoreFSM) in a cluster of `raft_addresses`: made
    once, written to every replica (pickling and compressing is the slow part)."""
    before, last = _SEED_ENTRIES
    data = [{"_SyncObj__enabledCodeVersion": 0}, {"fsm": fsm}]
    cluster = {TCPNode(address) for address in raft_addresses}
    return gzip.compress(pickle.dumps((data, last, before, cluster), DUMP_PROTOCOL), compresslevel=6)


def write_dump(data_dir, dump):
    """Write data_dir/raft.dump (bytes from dump_bytes); fsynced, and refused if the data
    dir already holds Raft state."""
    for name in (DUMP_FILE, "raft.journal"):
        if os.path.exists(os.path.join(data_dir, name)):
            raise FileExistsError("%s already holds Raft state (%s)" % (data_dir, name))
    return data_at_rest.write_private(os.path.join(data_dir, DUMP_FILE), dump)   # 0600, as PySyncObj's


def read_dump(data_dir):
    """The StoreFSM in data_dir/raft.dump (tests and checks), read as a replica reads it:
    through the dump allow-list (restricted_pickle.load_dump)."""
    with gzip.open(os.path.join(data_dir, DUMP_FILE)) as g:
        data = load_dump(g)
    return data[0][1]["fsm"]
