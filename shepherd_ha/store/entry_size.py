"""How many bytes a command takes in the Raft log, and the bounds log entries keep.

PySyncObj stores a command as one type byte plus the pickle (protocol 2, its own
choice) of (method id, (command,)), and sends an entry of appendEntriesBatchSizeBytes
or more in pieces. That path breaks: 0.3.17 marks the last piece by the entry's length
before it pickles the entry again for sending, so for a big entry (15 KB longer once
pickled for 1,000 pods, 143 KB for 5,000) a piece marked `finish` is not the last, and
the follower fails its tick (`pickle data was truncated`). So no entry may reach it:
group commit keeps groups under GROUP_BYTES, and a single command too big for the
threshold is refused before anything is submitted.

Sizing pickles the command once, with PySyncObj's protocol, so the figure is exact;
measured ~2.5 us for a 1 KiB pod create (a recursive estimate in Python: ~8 us,
json.dumps: ~10 us).
"""
import pickle

PYSYNCOBJ_PICKLE_PROTOCOL = 2
ENTRY_OVERHEAD = 64                 # type byte, method id, tuples: measured 9 bytes, with room to spare
ENTRY_THRESHOLD = 8 * 1024 * 1024   # RaftSettings.append_batch_bytes' default (appendEntriesBatchSizeBytes)
# Commands share an entry up to this many bytes. Smaller groups let small writes through
# sooner beside a bulk batch; 32 KiB would split the groups of 32 clients' 1 KiB creates.
# Measured (docs/benchmarks.md, "Bounded Raft entries"): 32-1024 KiB all commit 5,000 pods
# in ~2-4 s here; small creates' p99 beside them ~0.2-0.5 s at 64 KiB, ~0.3-0.7 s at 128.
GROUP_BYTES = 64 * 1024


class CommandTooLarge(ValueError):
    """A single command whose entry would reach PySyncObj's chunked transmission."""

    def __init__(self, size, limit):
        super().__init__("object too large to replicate: %d bytes, limit %d (keep large data out of "
                         "objects, or split it over several)" % (size, limit))
        self.size = size
        self.limit = limit


def command_bytes(command):
    """The bytes `command` takes as a Raft entry (exact, plus a small margin)."""
    return len(pickle.dumps(command, PYSYNCOBJ_PICKLE_PROTOCOL)) + ENTRY_OVERHEAD


def too_large_result(error):
    """A write's failure result, shaped as the FSM's, for a command never submitted."""
    return {"ok": False, "code": 413, "reason": "RequestEntityTooLarge", "message": str(error), "index": None}
