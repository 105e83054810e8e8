"""The Raft journal survives power cuts: entries are synced before the header counts them,
term and vote are fsynced, and a half-written last record is cut off on start."""
import os
import struct

import pytest
from pysyncobj.journal import LAST_RECORD_OFFSET_OFFSET, FileJournal

from shepherd_ha.store.pysyncobj_overrides import journal as durable_journal
from shepherd_ha.store.pysyncobj_overrides.journal import DurableFileJournal, cut_torn_tail


def filled(path, count=5):
    j = DurableFileJournal(str(path))
    for i in range(1, count + 1):
        j.add(b"command-%d" % i, i, 1)
    j._destroy()


def last_offset(path):
    with open(path, "rb") as fh:
        fh.seek(LAST_RECORD_OFFSET_OFFSET)
        return struct.unpack("<I", fh.read(4))[0]


def tear_a_sixth_record(path):
    """What a power cut can leave: the header counts a record whose bytes are not all there."""
    end = last_offset(path)
    data = struct.pack("<QQ", 6, 1) + b"command-6"
    with open(path, "r+b") as fh:
        fh.seek(end)
        fh.write(struct.pack("<I", len(data)) + data[:10])       # the record's tail never made it
        fh.seek(LAST_RECORD_OFFSET_OFFSET)
        fh.write(struct.pack("<I", end + 8 + len(data)))
    return end


def test_entries_survive_reopening(tmp_path):
    path = tmp_path / "raft.journal"
    filled(path)
    j = DurableFileJournal(str(path))
    assert [e[1] for e in j] == [1, 2, 3, 4, 5] and j[4][0] == b"command-5"


def test_a_torn_last_record_is_cut_off_on_start(tmp_path):
    path = tmp_path / "raft.journal"
    filled(path)
    good_end = tear_a_sixth_record(path)
    # What PySyncObj alone makes of it: a sixth entry with a garbled command (or, when the
    # sizes are garbage too, an exception on every start, as a powered-off VM showed).
    plain = FileJournal(str(path))
    assert len(plain) == 6 and plain[5][0] != b"command-6"
    plain._destroy()
    j = DurableFileJournal(str(path))
    assert [e[1] for e in j] == [1, 2, 3, 4, 5]
    assert last_offset(path) == good_end
    j.add(b"command-6", 6, 1)             # and the log goes on from there
    j._destroy()
    assert [e[1] for e in DurableFileJournal(str(path))] == [1, 2, 3, 4, 5, 6]


def test_records_out_of_sequence_or_with_bad_sizes_end_the_journal(tmp_path):
    path = tmp_path / "raft.journal"
    filled(path, 3)
    end = last_offset(path)
    data = struct.pack("<QQ", 9, 1) + b"x"      # index 9 after 3: not a record we wrote in order
    with open(path, "r+b") as fh:
        fh.seek(end)
        fh.write(struct.pack("<I", len(data)) + data + struct.pack("<I", len(data)))
        fh.seek(LAST_RECORD_OFFSET_OFFSET)
        fh.write(struct.pack("<I", end + 8 + len(data)))
    assert cut_torn_tail(str(path)) == 8 + len(data)
    assert [e[1] for e in DurableFileJournal(str(path))] == [1, 2, 3]
    assert cut_torn_tail(str(tmp_path / "missing")) == 0


def _spy_on(j, monkeypatch):
    """Record the journal's writes and file syncs, in order."""
    events = []
    journal_file = j._FileJournal__journalFile
    real_write = journal_file.write
    real_fdatasync = durable_journal.os.fdatasync

    def spy_fdatasync(fd):
        events.append(("sync", fd))
        return real_fdatasync(fd)

    def spy_write(offset, values):
        events.append(("write", offset, len(values)))
        return real_write(offset, values)
    monkeypatch.setattr(durable_journal.os, "fdatasync", spy_fdatasync)
    monkeypatch.setattr(j._FileJournal__journalFile, "write", spy_write)
    return events


def test_added_entries_are_synced_before_the_header_that_counts_them(tmp_path, monkeypatch):
    j = DurableFileJournal(str(tmp_path / "raft.journal"))
    events = _spy_on(j, monkeypatch)
    fd = j._FileJournal__journalFile.fileno()
    for i in (1, 2, 3):
        j.add(b"payload-%d" % i, i, 1)
    assert [e[0] for e in events] == ["write"] * 3, "add writes the record, nothing counts it yet"
    assert j.sync() is True
    kinds = [e[0] for e in events]
    assert kinds == ["write", "write", "write", "sync", "write", "sync"], events
    assert events[3] == ("sync", fd) and events[5] == ("sync", fd), "the journal's own file is synced"
    assert events[4][1] == LAST_RECORD_OFFSET_OFFSET, "one sync covers all three records, then the header"
    assert j.sync() is False, "nothing left to sync"
    assert len(events) == 6


def test_the_header_on_disk_counts_only_synced_entries(tmp_path):
    path = tmp_path / "raft.journal"
    j = DurableFileJournal(str(path))
    j.add(b"one", 1, 1)
    j.sync()
    j.add(b"two", 2, 1)                   # a power cut now keeps entry 1 only
    plain = FileJournal(str(path))
    assert [e[1] for e in plain] == [1]
    plain._destroy()
    j.sync()
    assert [e[1] for e in FileJournal(str(path))] == [1, 2]


def test_a_clean_stop_keeps_entries_not_yet_synced(tmp_path):
    path = tmp_path / "raft.journal"
    j = DurableFileJournal(str(path))
    j.add(b"one", 1, 1)
    j._destroy()
    assert [e[1] for e in DurableFileJournal(str(path))] == [1]


def test_truncating_never_counts_unsynced_records(tmp_path):
    # A follower drops a conflicting tail while newer entries still wait for their sync:
    # the shorter header it writes must not point past what reached the disk.
    path = tmp_path / "raft.journal"
    j = DurableFileJournal(str(path))
    for i in (1, 2, 3):
        j.add(b"c%d" % i, i, 1)
    j.sync()
    j.add(b"c4", 4, 1)
    j.add(b"c5", 5, 1)
    j.deleteEntriesFrom(4)                # keeps 1..4
    assert last_offset(path) == j._FileJournal__currentOffset
    assert [e[1] for e in FileJournal(str(path))] == [1, 2, 3, 4]
    assert j.sync() is False


def test_term_and_vote_are_fsynced(tmp_path, monkeypatch):
    j = DurableFileJournal(str(tmp_path / "raft.journal"))
    synced = []
    real = os.fsync
    monkeypatch.setattr(durable_journal.os, "fsync", lambda fd: synced.append(fd) or real(fd))
    j.setCurrentTerm(7, "127.0.0.1:7001")
    assert len(synced) >= 2, "the meta file and its directory must be fsynced"
    assert DurableFileJournal(str(tmp_path / "raft.journal")).getCurrentTerm() == 7


def test_a_journal_cut_before_its_header_is_started_anew(tmp_path):
    path = tmp_path / "raft.journal"
    path.write_bytes(b"")                 # a power cut right after the file was made
    with pytest.raises(ValueError):
        FileJournal(str(path))            # PySyncObj alone: cannot mmap an empty file, on every start
    path.write_bytes(b"PYSYNC")
    j = DurableFileJournal(str(path))
    assert len(j) == 0
    j.add(b"first", 1, 1)
    j._destroy()
    assert [e[1] for e in DurableFileJournal(str(path))] == [1]


def _mapped(path):
    with open("/proc/self/maps") as fh:
        return [line for line in fh if line.rstrip().endswith(str(path))]


def test_the_journal_is_not_kept_mapped_so_its_pages_are_not_the_store_process_memory(tmp_path):
    path = tmp_path / "raft.journal"
    j = DurableFileJournal(str(path))
    for i in range(1, 201):
        j.add(b"x" * 4096, i, 1)
    j.sync()
    assert _mapped(path) == [], "written with pwrite, not through a mapping"
    j.deleteEntriesTo(100)               # compaction: a new file
    j.add(b"after", 201, 1)
    j.sync()
    assert _mapped(path) == []
    j._destroy()
    again = DurableFileJournal(str(path))
    assert [e[1] for e in again] == list(range(101, 202)) and again[-1][0] == b"after"
    assert _mapped(path) == [], "the mapping that read the entries at start is closed"
    again._destroy()


class Died(Exception):
    pass


def test_a_journal_write_that_fails_ends_the_process_before_the_entry_counts(tmp_path, monkeypatch):
    path = tmp_path / "raft.journal"
    j = DurableFileJournal(str(path))
    j.add(b"one", 1, 1)
    j.sync()
    died = []

    def die():
        died.append(True)
        raise Died()
    monkeypatch.setattr(durable_journal, "_die", die)
    real_pwrite = durable_journal.os.pwrite

    def disk_full(fd, data, offset):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(durable_journal.os, "pwrite", disk_full)
    with pytest.raises(Died):
        j.add(b"two", 2, 1)
    assert died and [e[1] for e in j] == [1], "the entry never joined the log in memory"
    monkeypatch.setattr(durable_journal.os, "pwrite", real_pwrite)

    def sync_fails(fd):
        raise OSError(5, "Input/output error")
    monkeypatch.setattr(durable_journal.os, "fdatasync", sync_fails)
    j.add(b"three", 3, 1)
    with pytest.raises(Died):
        j.sync()
