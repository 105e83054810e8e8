"""Three real PySyncObj members on loopback (in this process) take turns to write their
dumps (store/dump_turns.py): every member compacts its log, and no two write a dump at
the same time. Before, all three reached the entry bound at the same index and dumped
together (on one machine: three dumps taking the CPU at once)."""
import threading
import time

from shepherd_ha.store.raft_node import RaftNode

from .helpers import loopback_raft_settings
from .test_raft_sync_order import namespace_command


def _dumping(node):
    # Our serializer (dump_writer) holds a non-zero marker while its thread writes a dump.
    return node.syncobj._SyncObj__serializer._Serializer__pid != 0


def test_members_take_turns_to_write_their_dumps(tmp_path):
    nodes = []
    for settings in loopback_raft_settings(tmp_path, 160):
        settings.log_compaction_entries = 40
        nodes.append(RaftNode(settings, lambda changes: None, lambda revision: None))
    try:
        deadline = time.monotonic() + 20
        while not any(n.is_leader() for n in nodes):
            assert time.monotonic() < deadline, "no leader elected in 20 s"
            time.sleep(0.05)
        intervals = {i: [] for i in range(len(nodes))}     # member -> [(began, ended)]
        began = {}
        stop = threading.Event()
        errors = []

        def writer():
            i = 0
            while not stop.is_set() and i < 5000:
                try:
                    nodes[i % 3].submit(namespace_command("ns-%d" % i), timeout=10)
                except Exception as exc:        # reported below
                    errors.append(repr(exc))
                    return
                i += 1
        thread = threading.Thread(target=writer)
        thread.start()
        end = time.monotonic() + 60
        while time.monotonic() < end and not all(len(d) >= 2 for d in intervals.values()):   # ~2 ms samples
            now = time.monotonic()
            for i, node in enumerate(nodes):
                if _dumping(node):
                    began.setdefault(i, now)
                elif i in began:
                    intervals[i].append((began.pop(i), now))
            time.sleep(0.002)
        stop.set()
        thread.join(30)
        assert not errors, errors[:3]
        assert all(len(dumps) >= 2 for dumps in intervals.values()), \
            "every member should have compacted its log at least twice in 60 s: %s" % intervals
        every = sorted((b, e, i) for i, dumps in intervals.items() for b, e in dumps)
        overlaps = [(a, b) for a, b in zip(every, every[1:]) if b[0] < a[1] and a[2] != b[2]]
        assert not overlaps, "two members wrote a dump at the same time: %s" % overlaps[:3]
    finally:
        for node in nodes:
            node.destroy()
