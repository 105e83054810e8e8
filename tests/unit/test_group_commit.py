"""Group commit: concurrent writes share Raft entries, each gets its own result, dropped
groups are retried, a deposed leader's writers are answered at once, and the next group
is sent by the thread that delivered the previous result (the Raft tick thread)."""
import threading
import time

import pytest
from pysyncobj import FAIL_REASON

from shepherd_ha.store.group_commit import GroupCommitter
from shepherd_ha.store.raft_node import Unavailable


class FakeRaft:
    """Stands in for RaftNode: records what group commit sends; the test answers it."""

    class _Settings:
        peer_addresses = ["b:1", "c:1"]

    def __init__(self):
        self.settings = self._Settings()
        self.consumer = self
        self.sent = []               # (command, callback, thread id)
        self.cond = threading.Condition()

    def wait_for_leader(self, timeout):
        return True

    def connected_peers(self):
        return ["b:1", "c:1"]

    def apply_command(self, command, callback):
        with self.cond:
            self.sent.append((command, callback, threading.get_ident()))
            self.cond.notify_all()

    def wait_sent(self, count, timeout=5):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.sent) >= count, timeout), \
                "only %d of %d groups sent" % (len(self.sent), count)
            return self.sent[count - 1]

    def commit(self, count, timeout=5):
        """Answer the count-th command sent as the FSM would; returns that command."""
        command, callback, _ = self.wait_sent(count, timeout)
        callback(apply_results(command), FAIL_REASON.SUCCESS)
        return command


def apply_results(command):
    """What the FSM returns: one result per member of a group, or the single result."""
    if command.get("type") == "group":
        return {"results": [{"echo": c["n"]} for c in command["commands"]]}
    return {"echo": command["n"]}


def submit_async(committer, n, results, timeout=5, pad=0):
    def run():
        try:
            results[n] = committer.call(dict({"n": n}, **({"pad": "x" * pad} if pad else {})), timeout)
        except Unavailable as exc:
            results[n] = exc
    t = threading.Thread(target=run)
    t.start()
    return t


@pytest.fixture
def raft():
    return FakeRaft()


def test_a_lone_write_is_sent_at_once_unwrapped(raft):
    committer = GroupCommitter(raft)
    results = {}
    t = submit_async(committer, 1, results)
    assert raft.commit(1) == {"n": 1}
    t.join(5)
    assert results[1] == {"echo": 1}


def test_writes_queued_behind_a_group_share_the_next_one_sent_by_the_answering_thread(raft):
    committer = GroupCommitter(raft)
    results = {}
    first = submit_async(committer, 0, results)
    raft.wait_sent(1)
    later = [submit_async(committer, n, results) for n in range(1, 6)]
    deadline = time.monotonic() + 5
    while len(committer._queue) < 5:            # all five wait behind the group in flight
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert len(raft.sent) == 1

    tick_thread = {}

    def answer():
        tick_thread["id"] = threading.get_ident()
        raft.commit(1)
    answering = threading.Thread(target=answer)
    answering.start()
    answering.join(5)
    group, _, sender = raft.wait_sent(2)
    assert group["type"] == "group" and [c["n"] for c in group["commands"]] == [1, 2, 3, 4, 5]
    assert sender == tick_thread["id"], "the next group should leave from the thread that answered the last"
    raft.commit(2)
    for t in [first] + later:
        t.join(5)
    assert results == {n: {"echo": n} for n in range(6)}, "every writer gets its own member's result"
    assert committer.commands_sent == 6 and committer.groups_sent == 2


def test_a_dropped_group_is_sent_again(raft):
    committer = GroupCommitter(raft)
    results = {}
    t = submit_async(committer, 7, results)
    command, callback, _ = raft.wait_sent(1)
    callback(None, FAIL_REASON.LEADER_CHANGED)          # Raft dropped it: retried with the same key
    assert raft.commit(2) == command
    t.join(5)
    assert results[7] == {"echo": 7}


def test_writers_in_flight_are_answered_when_leadership_is_lost(raft):
    committer = GroupCommitter(raft)
    results = {}
    t = submit_async(committer, 3, results, timeout=30)
    raft.wait_sent(1)
    started = time.monotonic()
    assert committer.abandon_in_flight() == 1
    t.join(5)
    assert isinstance(results[3], Unavailable) and results[3].outcome == "unknown"
    assert "stopped leading" in str(results[3])
    assert time.monotonic() - started < 2, "abandoned writers must not wait out their timeout"


def test_a_group_never_answered_stops_blocking_after_stale_after(raft):
    committer = GroupCommitter(raft, stale_after=0.3)
    results = {}
    submit_async(committer, 1, results, timeout=2)
    raft.wait_sent(1)                                  # never answered
    t = submit_async(committer, 2, results)
    assert raft.commit(2, timeout=3) == {"n": 2}
    t.join(5)
    assert results[2] == {"echo": 2}


# ---- bounded entries: sizes, order, results ----

def padded(n, size=1000):
    return {"n": n, "pad": "x" * size}


def answer_all(raft, until, first=1, timeout=5):
    """Commit every group sent, in order, until `until()` holds; returns the groups."""
    groups, count = [], first
    deadline = time.monotonic() + timeout
    while not until():
        assert time.monotonic() < deadline, "writers not all answered"
        with raft.cond:
            raft.cond.wait_for(lambda: len(raft.sent) >= count or until(), 0.2)
            ready = len(raft.sent) >= count
        if ready:
            groups.append(raft.commit(count))
            count += 1
    return groups


def members(command):
    return command["commands"] if command.get("type") == "group" else [command]


def call_many_async(committer, commands, out, timeout=5):
    def run():
        try:
            out["results"] = committer.call_many(commands, timeout)
        except Unavailable as exc:
            out["results"] = exc
    t = threading.Thread(target=run)
    t.start()
    return t


def test_entry_size_is_pysyncobjs_own_entry_size():
    import pysyncobj.pickle as pysyncobj_pickle
    from shepherd_ha.store.entry_size import ENTRY_OVERHEAD, command_bytes
    for command in ({"type": "barrier"}, padded(1), padded(2, 300000),
                    {"type": "write", "key": "k", "epoch": [3, "r1"], "ops": [{"op": "create", "object": {
                        "metadata": {"name": "é" * 50, "labels": {"a": "b"}}, "spec": {"n": [1, 2.5, None]}}}]}):
        entry = b"\x01" + pysyncobj_pickle.dumps((7, (command,)))   # what @replicated puts in the log
        assert len(entry) <= command_bytes(command) <= len(entry) + ENTRY_OVERHEAD


def test_a_bulk_batch_is_split_into_groups_under_the_byte_bound_with_results_in_order(raft):
    from shepherd_ha.store.entry_size import command_bytes
    bound = 10000
    committer = GroupCommitter(raft, max_group_bytes=bound)
    commands = [padded(n) for n in range(40)]
    out = {}
    t = call_many_async(committer, commands, out)
    groups = answer_all(raft, lambda: "results" in out)
    t.join(5)
    assert out["results"] == [{"echo": n} for n in range(40)], "one result per write, in order"
    sent = [c["n"] for g in groups for c in members(g)]
    assert sent == list(range(40)), "each write sent once, in order"
    assert len(groups) >= 4
    for group in groups:
        assert command_bytes(group) <= bound + 200, "a group over the bound: %d bytes" % command_bytes(group)
    assert all(len(members(g)) > 1 for g in groups[:-1]), "groups are filled up to the bound"


def test_a_command_bigger_than_the_group_bound_goes_alone(raft):
    committer = GroupCommitter(raft, max_group_bytes=5000)
    out = {}
    t = call_many_async(committer, [padded(0), padded(1, 20000), padded(2)], out)
    groups = answer_all(raft, lambda: "results" in out)
    t.join(5)
    assert out["results"] == [{"echo": 0}, {"echo": 1}, {"echo": 2}]
    assert [[c["n"] for c in members(g)] for g in groups] == [[0], [1], [2]]


def test_other_writes_go_first_and_bulk_fills_the_rest_of_each_group(raft):
    bound = 20000
    committer = GroupCommitter(raft, max_group_bytes=bound)
    results = {}
    blocker = submit_async(committer, -1, results)
    raft.wait_sent(1)                                        # one group in flight: the rest queue up
    out = {}
    bulk = call_many_async(committer, [padded(n) for n in range(100, 160)], out)
    writers = [submit_async(committer, n, results, pad=1000) for n in range(15)]
    deadline = time.monotonic() + 5
    while len(committer._queue) < 15 or len(committer._bulk) < 60:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    raft.commit(1)
    second = raft.wait_sent(2)[0]
    ns = [c["n"] for c in members(second)]
    writes = [n for n in ns if n < 100]
    assert writes and writes == sorted(writes) and ns[:len(writes)] == writes, "other writes first: %s" % ns
    assert len(writes) <= 10, "they take at most half the group while bulk writes wait"
    assert len(ns) > len(writes), "bulk writes fill the rest"
    answer_all(raft, lambda: "results" in out and len(results) == 16, first=2)
    for t in [blocker, bulk] + writers:
        t.join(5)
    assert out["results"] == [{"echo": n} for n in range(100, 160)]
    assert results == {n: {"echo": n} for n in range(-1, 15)}


def test_a_command_too_big_to_replicate_is_refused_and_never_sent(raft):
    from shepherd_ha.store.entry_size import CommandTooLarge
    raft.settings.append_batch_bytes = 50000
    committer = GroupCommitter(raft)
    with pytest.raises(CommandTooLarge) as info:
        committer.call(padded(1, 60000), 5)
    message = str(info.value)
    assert message.startswith("object too large to replicate: %d bytes, limit 50000" % info.value.size)
    assert info.value.size > 60000
    out = {}
    t = call_many_async(committer, [padded(0), padded(1, 60000), padded(2)], out)
    groups = answer_all(raft, lambda: "results" in out)
    t.join(5)
    first, refused, last = out["results"]
    assert first == {"echo": 0} and last == {"echo": 2}
    assert refused["ok"] is False and refused["code"] == 413 and refused["reason"] == "RequestEntityTooLarge"
    assert refused["message"].startswith("object too large to replicate")
    assert [c["n"] for g in groups for c in members(g)] == [0, 2], "the big one never reaches Raft"


def test_bulk_writes_of_a_dropped_group_are_sent_again_and_keep_their_places(raft):
    committer = GroupCommitter(raft, max_group_bytes=3000)
    out = {}
    t = call_many_async(committer, [padded(n) for n in range(6)], out)
    command, callback, _ = raft.wait_sent(1)
    callback(None, FAIL_REASON.LEADER_CHANGED)               # dropped: sent again, same commands
    groups = answer_all(raft, lambda: "results" in out, first=2)
    t.join(5)
    assert out["results"] == [{"echo": n} for n in range(6)]
    resent = [c["n"] for g in groups for c in members(g)]
    assert sorted(resent) == list(range(6)) and len(resent) == 6
    assert members(command)[0] in [c for g in groups for c in members(g)], "the dropped commands, unchanged"


def test_bulk_writes_not_sent_by_the_deadline_are_withdrawn(raft):
    committer = GroupCommitter(raft, max_group_bytes=1500, stale_after=30)
    out = {}
    t = call_many_async(committer, [padded(n) for n in range(5)], out, timeout=0.3)
    raft.wait_sent(1)                                        # never answered
    t.join(5)
    assert isinstance(out["results"], Unavailable) and out["results"].outcome == "unknown"
    assert not committer._bulk, "what was not sent is withdrawn"
    raft.commit(1)
    time.sleep(0.2)
    assert len(raft.sent) == 1, "nothing withdrawn is sent later"


def test_bulk_writes_stop_at_once_when_leadership_is_lost(raft):
    committer = GroupCommitter(raft, max_group_bytes=1500)
    out = {}
    t = call_many_async(committer, [padded(n) for n in range(5)], out, timeout=30)
    raft.wait_sent(1)
    started = time.monotonic()
    assert committer.abandon_in_flight() == 5, "the one in flight and the four queued"
    t.join(5)
    assert isinstance(out["results"], Unavailable) and "stopped leading" in str(out["results"])
    assert time.monotonic() - started < 2
    assert not committer._bulk and len(raft.sent) == 1, "the rest are withdrawn, never sent"


def test_a_bulk_batch_that_keeps_progressing_outlives_its_timeout(raft):
    """The timeout bounds the wait for progress: a batch answered group by group, taking
    several timeouts in all, completes and nothing is withdrawn."""
    committer = GroupCommitter(raft, max_group_bytes=1500, stale_after=30)
    out = {}
    t = call_many_async(committer, [padded(n) for n in range(6)], out, timeout=0.4)
    started = time.monotonic()
    for count in range(1, 7):
        time.sleep(0.25)                                     # each group answered within the timeout
        raft.commit(count)
    t.join(5)
    assert time.monotonic() - started > 1.0, "the batch as a whole took longer than its timeout"
    assert out["results"] == [{"echo": n} for n in range(6)]


def test_a_run_of_synchronous_raft_failures_neither_recurses_nor_stops_group_commit(raft):
    """PySyncObj refusing every command at once (shutting down) fails each queued writer;
    no group is sent from inside the failure (1,500 queued groups would recurse past the
    interpreter's limit and kill the flusher thread), and once Raft accepts commands
    again group commit still sends."""
    committer = GroupCommitter(raft, max_batch=1)
    refusing = {"on": True}
    accept = raft.apply_command

    def apply_command(command, callback):
        if refusing["on"]:
            raise RuntimeError("shutting down")
        accept(command, callback)

    raft.apply_command = apply_command
    with pytest.raises(Unavailable) as info:
        committer.call_many([{"n": n} for n in range(1500)], 5, retry=False)
    assert "did not commit 1500 of the commands" in str(info.value)
    refusing["on"] = False
    results = {}
    t = submit_async(committer, 7, results)
    raft.commit(1)
    t.join(5)
    assert results[7] == {"echo": 7}
