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

Power loss (a VM powered off, not a process killed) also needs what PySyncObj
writes to be on disk before it acts on it; it writes the journal through mmap and
never syncs, so a power-off lost acknowledged writes on every replica (found by
the Vagrant full-restart drill). So here:

3. entries are synced (fdatasync) before the header that counts them is written and
   synced, and that happens before PySyncObj acknowledges or counts them: `add`
   only writes the record; `sync` makes everything added so far durable, and the
   Raft node calls it once per tick, before its acks leave and before the leader
   counts itself (syncobj.PipelinedSyncObj). One sync per batch of entries,
   not two per entry;
4. Raft's term and vote are fsynced (file, then directory) before they are used;
5. the dump is fsynced before the journal entries it replaces are trimmed;
6. on start a half-written last record (the header counted it, its bytes did not
   all reach the disk) is cut off instead of crashing the replica on every start.

Once the entries are read at start, the journal's file is written with pwrite
(`JournalFile`), not through PySyncObj's shared mapping (ResizableFile): every page
written through the mapping stayed mapped in the store process, so its RSS grew with
the journal (up to the 64 MiB compaction bound). The file's pages are the kernel's page
cache either way. Of the entries PySyncObj kept in a list beside the file, only the
newest stay in memory (`journal_entries.py`); older ones are read back from the file.
"""
import logging
import os
import struct

from pysyncobj.journal import FIRST_RECORD_OFFSET, LAST_RECORD_OFFSET_OFFSET, FileJournal, MetaStorer
from pysyncobj.pickle import dumps, to_bytes

from .journal_entries import JournalEntries

log = logging.getLogger(__name__)
_SIZE = struct.Struct("<I")
_ENTRY = struct.Struct("<QQ")


class DurableMetaStorer(MetaStorer):
    """Term and vote on disk before PySyncObj sends anything that depends on them."""

    _OVERRIDES = ("storeMeta",)

    def storeMeta(self, meta):
        path = self.getPath()
        with open(path + ".tmp", "wb") as fh:
            fh.write(dumps(meta))
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(path + ".tmp", path)
        _fsync_dir(path)


class DurableFileJournal(FileJournal):
    _OVERRIDES = ("add", "flush", "_destroy", "clear", "deleteEntriesFrom", "deleteEntriesTo")

    def __init__(self, path, dump_path=None, sync=True):
        self._path = path
        self._dump_path = dump_path
        self._sync = sync
        self._unsynced_from = None       # offset of the first record the header does not count yet
        if sync:
            cut_torn_tail(path)
        super().__init__(path)       # reads the entries through ResizableFile's mapping
        self._use_plain_file()
        self._keep_newest_in_memory(self._FileJournal__journal)
        if sync:
            self._FileJournal__metaStorer = DurableMetaStorer(path + ".meta")

    def _keep_newest_in_memory(self, entries):
        # Entries from FIRST_RECORD_OFFSET on, back to back, as the file holds them.
        held = JournalEntries.of(entries, self._read_command)
        end = held.end_offset()
        if end is not None and end != self._FileJournal__currentOffset:
            raise RuntimeError("Raft journal %s: its records end at byte %d, the entries read at %d"
                               % (self._path, self._FileJournal__currentOffset, end))
        self._FileJournal__journal = held

    def _read_command(self, offset, size):
        data = self._FileJournal__journalFile.read(offset, size)
        if len(data) != size:
            fail(self._path, "read back an entry from",
                 OSError("%d of %d bytes at byte %d" % (len(data), size, offset)))
        return data

    def _use_plain_file(self):
        self._FileJournal__journalFile._destroy()
        self._FileJournal__journalFile = JournalFile(self._path)

    def _sync_file(self):
        # fdatasync, never msync: CPython 3.11 held the GIL through mmap.flush, so every
        # other thread of the store process stopped for as long as the disk took
        # (docs/benchmarks.md, "The store process's tick"); fdatasync releases it.
        if self._sync:
            try:
                os.fdatasync(self._FileJournal__journalFile.fileno())
            except OSError as exc:
                fail(self._path, "sync", exc)

    def add(self, command, idx, term):
        # Written, not yet counted by the header: sync() does both, in that order. Written
        # before it is in the list: a write that fails ends the process (`fail`).
        command = to_bytes(command)      # held as the file holds it: an entry read back is equal
        data = _ENTRY.pack(idx, term) + command
        record = _SIZE.pack(len(data)) + data + _SIZE.pack(len(data))
        offset = self._FileJournal__currentOffset
        self._FileJournal__journalFile.write(offset, record)
        self._FileJournal__journal.append((command, idx, term), offset)
        if self._unsynced_from is None:
            self._unsynced_from = offset
        self._FileJournal__currentOffset = offset + len(record)

    def byte_size(self):
        """Bytes of the entries in the journal (only the newest are held in memory too:
        journal_entries.py)."""
        return self._FileJournal__currentOffset - FIRST_RECORD_OFFSET

    def sync(self):
        """Make every entry added so far durable: the records first, then the header that
        counts them. Returns whether there was anything to sync."""
        start = self._unsynced_from
        if start is None:
            return False
        end = self._FileJournal__currentOffset
        self._sync_file()
        self._set_last_record_offset(end)
        self._unsynced_from = None
        return True

    def flush(self):
        self.sync()
        super().flush()

    def _destroy(self):
        self.sync()
        super()._destroy()

    def _set_last_record_offset(self, offset):
        self._FileJournal__journalFile.write(LAST_RECORD_OFFSET_OFFSET, _SIZE.pack(offset))
        self._sync_file()

    def clear(self):
        # A follower clears its journal right after a snapshot from the leader was renamed
        # into place as the dump: that dump must be on disk before the entries go.
        self._sync_dump()
        super().clear()
        self._keep_newest_in_memory([])
        self._unsynced_from = None
        self._sync_file()

    def _sync_dump(self):
        if self._sync and self._dump_path and os.path.exists(self._dump_path):
            with open(self._dump_path, "rb") as fh:
                os.fsync(fh.fileno())
            _fsync_dir(self._dump_path)

    def deleteEntriesFrom(self, entryFrom):
        self.sync()     # the shorter header must not count records that never reached the disk
        super().deleteEntriesFrom(entryFrom)
        self._sync_file()

    def deleteEntriesTo(self, entryTo):
        # PySyncObj trims only after its dump is in place; it must also be on disk.
        self._sync_dump()
        keep = self._FileJournal__journal[entryTo:]
        tmp = self._path + ".compact"
        for leftover in (tmp, tmp + ".meta"):
            if os.path.exists(leftover):
                os.remove(leftover)
        try:
            fresh = DurableFileJournal(tmp, sync=False)   # synced as a whole below
            try:
                for entry in keep:
                    fresh.add(*entry)
                fresh.flush()
            finally:
                fresh._destroy()
            with open(tmp, "rb") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, self._path)
            _fsync_dir(self._path)
        except OSError as exc:
            fail(tmp, "compact into", exc)
        self._FileJournal__journalFile._destroy()        # the replaced file's descriptor
        self._FileJournal__journalFile = JournalFile(self._path)
        self._FileJournal__currentOffset = self._FileJournal__getLastRecordOffset()
        self._keep_newest_in_memory(keep)
        self._unsynced_from = None       # every kept entry is in the fsynced file


def fail(path, what, exc):
    """The journal could not be written or synced (disk full, I/O error): the store
    process ends rather than go on with a log in memory that its disk no longer holds,
    whose entries it would acknowledge and a restart would not find. (Written through
    PySyncObj's mapping, a full disk ended it too: SIGBUS.) Its supervisor restarts it
    from what is on disk, or gives up if it keeps dying."""
    log.critical("cannot %s the Raft journal %s: %s; the store process stops (free disk space or fix the "
                 "disk, then it starts again from the journal)", what, path, exc)
    for handler in logging.getLogger().handlers:
        handler.flush()
    _die()


def _die():
    os._exit(EXIT_JOURNAL_FAILED)    # at once: no other thread may act on the log meanwhile


EXIT_JOURNAL_FAILED = 74             # EX_IOERR (sysexits.h)


class JournalFile:
    """What FileJournal asks of its file (write, read, flush, _destroy), with pwrite and
    pread. Durability stays DurableFileJournal's: fdatasync in `sync`."""

    def __init__(self, path):
        self._path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def fileno(self):
        return self._fd

    def write(self, offset, values):
        view = memoryview(values)
        try:
            while view:
                written = os.pwrite(self._fd, view, offset)
                view, offset = view[written:], offset + written
        except OSError as exc:
            fail(self._path, "write", exc)

    def read(self, offset, size):
        try:
            return os.pread(self._fd, size, offset)
        except OSError as exc:
            fail(self._path, "read", exc)

    def flush(self):
        """Nothing is buffered here (written straight to the page cache)."""

    def _destroy(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


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


def cut_torn_tail(path):
    """Cut the journal at its first record that is not whole (sizes that disagree or run
    past the end, an index out of sequence); returns the bytes dropped. Records are synced
    in order, so only the last one can be torn by a power cut."""
    try:
        with open(path, "r+b") as fh:
            data = fh.read()
            if len(data) < FIRST_RECORD_OFFSET:
                # Cut before its header reached the disk (a power cut on a first start):
                # nothing in it can have been acknowledged; PySyncObj makes a new one.
                fh.close()
                os.remove(path)
                log.warning("Raft journal %s: only %d bytes, no whole header; starting a new journal",
                            path, len(data))
                return len(data)
            last = _SIZE.unpack_from(data, LAST_RECORD_OFFSET_OFFSET)[0]
            end = min(last, len(data))
            offset, previous = FIRST_RECORD_OFFSET, None
            while offset < end:
                if offset + 4 > end:
                    break
                size = _SIZE.unpack_from(data, offset)[0]
                if size < _ENTRY.size or offset + 8 + size > end or \
                        _SIZE.unpack_from(data, offset + 4 + size)[0] != size:
                    break
                idx = _ENTRY.unpack_from(data, offset + 4)[0]
                if previous is not None and idx != previous + 1:
                    break
                previous = idx
                offset += size + 8
            if offset == last:
                return 0
            log.warning("Raft journal %s: the record at byte %d is not whole (a power cut while it was "
                        "written?); cutting the journal there, %d bytes dropped (entries after index %s); "
                        "the leader sends them again", path, offset, last - offset, previous)
            fh.seek(LAST_RECORD_OFFSET_OFFSET)
            fh.write(_SIZE.pack(offset))
            fh.flush()
            os.fsync(fh.fileno())
            return last - offset
    except FileNotFoundError:
        return 0
