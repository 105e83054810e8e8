"""Crash-safe log compaction for PySyncObj's file journal (pinned 0.3.17).

PySyncObj compacts the log by writing a full dump (atomically: tmp + rename) and
then trimming the journal. Two windows lose acknowledged entries after a SIGKILL,
and since every replica compacts at about the same log length, a whole-cluster
kill can lose them everywhere:

1. The trim rewrites the journal in place (clear, then re-append): killed midway,
   the journal ends early and its tail is gone.
2. Killed after the new dump is in place but before the trim, the journal no
   longer starts at the dump's entries; on start PySyncObj then clears the whole
   journal, dropping every entry after the dump.

`DurableFileJournal` makes the trim atomic (write a new journal, fsync, rename),
and `align_journal_to_dump` trims a journal that still holds the dump's entries
instead of letting it be cleared. Measured by tests/integration (kill all three
replicas right after compaction: nothing acknowledged is lost).
"""
import os

from pysyncobj.journal import FileJournal, ResizableFile


class DurableFileJournal(FileJournal):
    def __init__(self, path):
        self._path = path
        super().__init__(path)

    def deleteEntriesTo(self, entryTo):
        keep = self._FileJournal__journal[entryTo:]
        tmp = self._path + ".compact"
        for leftover in (tmp, tmp + ".meta"):
            if os.path.exists(leftover):
                os.remove(leftover)
        fresh = FileJournal(tmp)
        for entry in keep:
            fresh.add(*entry)
        fresh.flush()
        fresh._destroy()
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        self._FileJournal__journalFile._destroy()
        os.replace(tmp, self._path)
        _fsync_dir(self._path)
        self._FileJournal__journalFile = ResizableFile(self._path)
        self._FileJournal__journal = list(keep)
        self._FileJournal__currentOffset = self._FileJournal__getLastRecordOffset()


def _fsync_dir(path):
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def align_journal_to_dump(journal, dump):
    """If the journal still holds the dump's last two entries further in, drop what
    precedes them, so PySyncObj keeps the entries after the dump instead of
    clearing the journal. `dump` is the deserialized tuple (data, last, before, cluster)."""
    last, before = dump[1], dump[2]
    if len(journal) < 2:
        return False
    i = before[1] - journal[0][1]          # log indexes are contiguous in the journal
    if i <= 0 or i + 1 >= len(journal):
        return False
    if journal[i] == before and journal[i + 1] == last:
        journal.deleteEntriesTo(i)
        return True
    return False
