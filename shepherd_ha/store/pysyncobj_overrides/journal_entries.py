"""The Raft log's entries in the store process: the newest in memory, the rest on disk.

PySyncObj's FileJournal keeps every entry since the last dump in a list beside its
file, so the store process held up to the compaction bound (64 MiB, 20,000 entries) of
command bytes it had already written, synced and applied: its largest single holding
under a hollow fleet (docs/benchmarks.md, run U). Raft reads an entry again only to
apply it, to send it to a follower, or to carry it past a dump, and nearly always the
newest ones; only a follower far behind asks for older entries. So `JournalEntries`
keeps, for every entry, its index, term and where its record is in the journal file
(28 bytes), and the command bytes of only the newest entries (a window bounded in
count and in bytes); an older entry is read back from the file (pread: the page
cache usually still has it). Entries read back are equal to those written, so Raft
cannot tell the difference. The first two entries, whose index and term PySyncObj
looks at on every send, are kept once read; the newest always stays in memory.
"""
import array
import collections

from pysyncobj.journal import FIRST_RECORD_OFFSET

RECORD_OVERHEAD = 4 + 16 + 4     # a record: size, index and term, the command, size again


class JournalEntries:
    """The sequence FileJournal keeps as `__journal`: (command, idx, term) tuples, indexed
    by position (negative too), sliced (step 1), truncated with `del entries[start:]`."""

    HOT_ENTRIES = 4096           # commands kept in memory, at most this many
    HOT_BYTES = 8 * 1024 * 1024  # and at most this many bytes of them (entries are <= 64 KiB)

    def __init__(self, read, hot_entries=None, hot_bytes=None):
        self._read = read                      # (offset, size) -> bytes of the journal file now
        self._hot_entries = self.HOT_ENTRIES if hot_entries is None else hot_entries
        self._hot_bytes_max = self.HOT_BYTES if hot_bytes is None else hot_bytes
        self._idx = array.array("Q")
        self._term = array.array("Q")
        self._offset = array.array("Q")        # where the command's bytes start in the file
        self._size = array.array("I")
        self._hot = collections.deque()        # commands of positions _hot_from and after
        self._hot_from = 0
        self._hot_bytes = 0
        self._head = {}                        # positions 0 and 1 once read back: PySyncObj asks often

    @classmethod
    def of(cls, entries, read, start=FIRST_RECORD_OFFSET, **window):
        """The entries a journal file holds from byte `start` on, records back to back."""
        made = cls(read, **window)
        offset = start
        for command, idx, term in entries:
            made.append((command, idx, term), offset)
            offset += RECORD_OVERHEAD + len(command)
        return made

    def append(self, entry, offset):
        """Add (command, idx, term) whose record starts at byte `offset` of the file."""
        command, idx, term = entry
        self._idx.append(idx)
        self._term.append(term)
        self._offset.append(offset + 4 + 16)
        self._size.append(len(command))
        self._hot.append(command)
        self._hot_bytes += len(command)
        while len(self._hot) > 1 and (len(self._hot) > self._hot_entries or self._hot_bytes > self._hot_bytes_max):
            self._hot_bytes -= len(self._hot.popleft())
            self._hot_from += 1

    def end_offset(self):
        """The byte after the last record (the first record's offset when empty)."""
        if not self._idx:
            return None
        return self._offset[-1] + self._size[-1] + 4

    def in_memory(self):
        """(entries, bytes) whose commands are held in memory."""
        return len(self._hot), self._hot_bytes

    def __len__(self):
        return len(self._idx)

    def __getitem__(self, i):
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self._idx))
            if step != 1:
                raise ValueError("journal entries are sliced with step 1 only")
            return [self._entry(p) for p in range(start, stop)]
        n = len(self._idx)
        p = i + n if i < 0 else i
        if not 0 <= p < n:
            raise IndexError("journal entry %d out of range (%d entries)" % (i, n))
        return self._entry(p)

    def __delitem__(self, i):
        if not isinstance(i, slice) or i.stop is not None or i.step not in (None, 1):
            raise TypeError("journal entries are only truncated: del entries[start:]")
        start = i.indices(len(self._idx))[0]
        for column in (self._idx, self._term, self._offset, self._size):
            del column[start:]
        for p in [p for p in self._head if p >= start]:
            del self._head[p]
        if start <= self._hot_from:
            self._hot.clear()
            self._hot_bytes = 0
            self._hot_from = start
        else:
            while len(self._hot) > start - self._hot_from:
                self._hot_bytes -= len(self._hot.pop())

    def _entry(self, p):
        if p >= self._hot_from:
            return self._hot[p - self._hot_from], self._idx[p], self._term[p]
        entry = self._head.get(p)
        if entry is None:
            entry = self._read(self._offset[p], self._size[p]), self._idx[p], self._term[p]
            if p < 2:
                self._head[p] = entry
        return entry
