"""When a replica writes its dump: when one is due, and in its turn.

PySyncObj starts a dump (pickling the whole store: ~10 s of a core at 30,000 pods in
run T, in a forked child then, in a thread since run AB: pysyncobj_overrides/
dump_writer.py) once its log holds `logCompactionMinEntries` entries or its last dump
is `logCompactionMinTime` old. Every replica applies the same log, so every replica
reached the entry bound at the same index and all three dumped at once; on one
machine three dumps took the CPU from every replica's API together (run S:
of the 1,419 lease renewals a 30,000-pod run lost in its first 620 s, 796 failed in
the 15 s after the three moments all three replicas were seen dumping together).

So PySyncObj's own triggers are set out of reach (raft_node) and the store process
forces a dump when one is due (entries, bytes or age, as before) and it is this
replica's turn. Turns go by the clock: slots of `slot()` seconds, slot k belonging
to the member of rank k mod members (rank: its place among the sorted addresses), a
dump started only in the first half of a slot. On one machine (one monotonic clock)
no two replicas start in the same slot, and a dump shorter than half a slot ends
before the next member's turn. On separate machines the clocks differ and the turns
are merely spread out, which is all separate CPUs need.

The slot is twice the dump expected, rounded up to a power of two, within 0.5-32 s. A
dump's length goes with the number of stored objects, and every replica holds the same
objects, so the expectation is computed from them alone (SECONDS_PER_OBJECT, what dumps
took on the 2-core benchmark machine, rounded up), not from each replica's own last
dump: replicas that timed their dumps 3.9 and 4.1 s would round to different slots and
overlap. Replicas still disagree for the moment their counts straddle a power of two
(their applied indexes differ by a few entries). About 0.5 s while the store is small
(tests compact every few dozen entries and barely wait), 16 s at 10,000 pods (~13,000
objects), 32 s from 16,000 objects on (30,000 pods), where a due dump waits at most
80 s. A log grown to twice its byte bound while waiting is dumped at once, turn or
not: memory before courtesy. (The entry bound has no such valve: at a few hundred
entries a second, 80 s of them are about as many as the bound itself.) So on one
machine dumps mostly do not overlap; they still may when a dump outlasts half its
slot, at the 2x valve, or at a boundary.
"""
import math


class DumpTurns:
    """Pure: the caller tells it the time, its log's size, whether a dump is being
    written, and how to find its rank and count the stored objects."""

    MIN_SLOT = 0.5
    MAX_SLOT = 32.0
    SECONDS_PER_OBJECT = 0.0005     # 10,000 pods: ~13,000 objects, dumps of ~6 s under load (run T)

    def __init__(self, entries, seconds, max_bytes=None):
        self.entries = entries            # a dump is due once the log holds more entries than this,
        self.seconds = seconds            # or the last dump is older than this,
        self.max_bytes = max_bytes        # or the log holds more bytes than this (None: no bound)

    def slot(self, objects):
        """Seconds of one member's turn with `objects` stored: twice the expected dump, a
        power of two, within bounds."""
        expected = objects * self.SECONDS_PER_OBJECT
        if expected <= 0:
            return self.MIN_SLOT
        rounded = 2.0 ** math.ceil(math.log2(2 * expected))
        return min(self.MAX_SLOT, max(self.MIN_SLOT, rounded))

    def due(self, log_entries, log_bytes, age):
        """A dump is due: the log is long or big, or the last dump is old."""
        return log_entries > self.entries or age > self.seconds or self._over_bytes(log_bytes)

    def _over_bytes(self, log_bytes, factor=1):
        return self.max_bytes is not None and log_bytes is not None and log_bytes > self.max_bytes * factor

    def my_turn(self, now, rank, members, objects):
        """May the member of `rank` (0-based, of `members`) start a dump at clock time `now`?"""
        if members <= 1:
            return True
        slot = self.slot(objects)
        into_mine = now % (slot * members) - rank * slot
        return 0.0 <= into_mine < slot / 2

    def should_start(self, now, dumping, log_entries, log_bytes, age, place, count_objects):
        """Force a dump now? Never while one is being written; when due, only in our turn.
        `place` () -> (rank, members) and `count_objects` are asked only when a dump is due:
        this runs on every Raft tick."""
        if dumping or not self.due(log_entries, log_bytes, age):
            return False
        rank, members = place()
        return self.my_turn(now, rank, members, count_objects()) or self._over_bytes(log_bytes, factor=2)
