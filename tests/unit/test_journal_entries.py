"""The Raft journal keeps only its newest entries' commands in memory; older ones are read
back from the file, equal to what was written, through every way PySyncObj uses the log."""
import pytest
from pysyncobj.journal import FIRST_RECORD_OFFSET

from shepherd_ha.store.pysyncobj_overrides.journal import DurableFileJournal
from shepherd_ha.store.pysyncobj_overrides.journal_entries import JournalEntries


@pytest.fixture
def small_window(monkeypatch):
    monkeypatch.setattr(JournalEntries, "HOT_ENTRIES", 3)
    monkeypatch.setattr(JournalEntries, "HOT_BYTES", 1 << 20)


def command(i):
    return b"command-%d-" % i + b"x" * (i % 7)


def journal_with(path, count, term=1):
    j = DurableFileJournal(str(path))
    for i in range(1, count + 1):
        j.add(command(i), i, term)
    j.sync()
    return j


def expected(first, last, term=1):
    return [(command(i), i, term) for i in range(first, last + 1)]


def test_only_the_newest_commands_stay_in_memory_and_older_ones_read_back_equal(tmp_path, small_window):
    j = journal_with(tmp_path / "raft.journal", 10)
    entries = j._FileJournal__journal
    assert entries.in_memory() == (3, sum(len(command(i)) for i in (8, 9, 10)))
    assert [j[i] for i in range(10)] == expected(1, 10)
    assert j[-1] == (command(10), 10, 1) and j[0] == (command(1), 1, 1) and j[-10] == j[0]
    assert j[2:5] == expected(3, 5) and j[7:] == expected(8, 10) and j[4:100] == expected(5, 10)
    assert list(j) == expected(1, 10)
    with pytest.raises(IndexError):
        j[10]
    with pytest.raises(IndexError):
        j[-11]


def test_the_window_is_bounded_by_bytes_too(tmp_path, monkeypatch):
    monkeypatch.setattr(JournalEntries, "HOT_ENTRIES", 1000)
    monkeypatch.setattr(JournalEntries, "HOT_BYTES", 100)
    j = DurableFileJournal(str(tmp_path / "raft.journal"))
    for i in range(1, 21):
        j.add(b"%02d" % i + b"y" * 38, i, 2)
    held, size = j._FileJournal__journal.in_memory()
    assert (held, size) == (2, 80)
    assert [e[1] for e in j] == list(range(1, 21)) and j[0][0] == b"01" + b"y" * 38


def test_truncating_from_an_entry_on_disk_or_in_memory(tmp_path, small_window):
    path = tmp_path / "raft.journal"
    j = journal_with(path, 10)
    j.deleteEntriesFrom(8)                 # inside the in-memory window
    assert list(j) == expected(1, 8)
    j.deleteEntriesFrom(4)                 # before it: every command left is on disk only
    assert list(j) == expected(1, 4) and j._FileJournal__journal.in_memory() == (0, 0)
    j.add(b"after", 5, 2)
    assert list(j) == expected(1, 4) + [(b"after", 5, 2)]
    j._destroy()
    assert list(DurableFileJournal(str(path))) == expected(1, 4) + [(b"after", 5, 2)]


def test_trimming_after_a_dump_keeps_the_tail_readable_from_the_new_file(tmp_path, small_window):
    path = tmp_path / "raft.journal"
    j = journal_with(path, 12)
    j.deleteEntriesTo(5)
    assert list(j) == expected(6, 12)
    assert j[0] == (command(6), 6, 1)      # on disk only, in the file written by the trim
    j.add(command(13), 13, 1)
    j.sync()
    assert list(j) == expected(6, 13)
    j._destroy()
    assert list(DurableFileJournal(str(path))) == expected(6, 13)


def test_reopening_holds_only_the_window_and_reads_the_rest_back(tmp_path, small_window):
    path = tmp_path / "raft.journal"
    journal_with(path, 9)._destroy()
    j = DurableFileJournal(str(path))
    assert j._FileJournal__journal.in_memory()[0] == 3
    assert list(j) == expected(1, 9)
    j.clear()
    assert len(j) == 0 and list(j) == []
    j.add(b"fresh", 20, 3)
    assert list(j) == [(b"fresh", 20, 3)]


def test_entries_are_only_truncated_not_deleted_in_the_middle():
    entries = JournalEntries.of([(b"a", 1, 1), (b"b", 2, 1)], read=lambda offset, size: b"")
    with pytest.raises(TypeError):
        del entries[0:1]
    with pytest.raises(ValueError):
        entries[::2]


def test_a_short_read_back_ends_the_store_process(tmp_path, small_window, monkeypatch):
    from shepherd_ha.store.pysyncobj_overrides import journal as durable_journal
    died = []
    monkeypatch.setattr(durable_journal, "_die", lambda: died.append(True))
    path = tmp_path / "raft.journal"
    j = journal_with(path, 6)
    with open(path, "r+b") as fh:
        fh.truncate(FIRST_RECORD_OFFSET)   # the file lost its records behind the journal's back
    j[0]
    assert died


class Counting:
    """A journal's file reads, counted."""

    def __init__(self, journal):
        self.reads = 0
        file = journal._FileJournal__journalFile
        real = file.read

        def read(offset, size):
            self.reads += 1
            return real(offset, size)
        file.read = read


def test_the_first_two_entries_are_read_back_once(tmp_path, small_window):
    j = journal_with(tmp_path / "raft.journal", 10)
    counted = Counting(j)
    for _ in range(5):
        assert j[0][1] == 1 and j[1][1] == 2 and j[-1][1] == 10
    assert counted.reads == 2
    j.deleteEntriesFrom(1)                 # the second is gone, so is its copy
    j.add(b"new second", 2, 2)
    assert j[1] == (b"new second", 2, 2)


def test_a_send_to_a_follower_far_behind_reads_one_batch_not_the_whole_tail(tmp_path, small_window):
    from shepherd_ha.store.pysyncobj_overrides.syncobj import PipelinedSyncObj

    class Node:
        _SyncObj__raftLog = journal_with(tmp_path / "raft.journal", 200)

    get_entries = PipelinedSyncObj._SyncObj__getEntries
    node = Node()
    counted = Counting(node._SyncObj__raftLog)
    bound = sum(len(command(i)) for i in range(5, 9))      # entries 5 to 8 reach it
    batch = get_entries(node, 5, None, bound)
    assert batch == expected(5, 8)
    assert counted.reads == 4 + 1              # the batch, and the first entry (for its index) once
    assert get_entries(node, 5, None, bound - 1) == expected(5, 8)
    assert get_entries(node, 198) == expected(198, 200)
    assert get_entries(node, 10, 2) == expected(10, 11)
    assert get_entries(node, 0) == [] and get_entries(node, None) == [] and get_entries(node, 201) == []
