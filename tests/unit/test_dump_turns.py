"""DumpTurns: when a replica may write its dump (store/dump_turns.py)."""
import pytest

from shepherd_ha.store.dump_turns import DumpTurns


@pytest.mark.parametrize("objects, slot", [(0, 0.5), (100, 0.5), (1000, 1.0), (6000, 8.0), (13000, 16.0),
                                           (36000, 32.0), (10 ** 6, 32.0)])
def test_a_slot_is_twice_the_expected_dump_rounded_up_to_a_power_of_two(objects, slot):
    assert DumpTurns(entries=100, seconds=600).slot(objects) == slot


@pytest.mark.parametrize("members", [2, 3, 5])
def test_at_any_time_at_most_one_member_may_start_and_each_gets_its_turn_every_period(members):
    # One DumpTurns per member, as each replica has its own: they agree because the slot
    # comes from what every replica holds, the stored objects.
    replicas = [DumpTurns(entries=100, seconds=600) for _ in range(members)]
    objects = 6000                                    # 3 s expected: slots of 8 s
    period = replicas[0].slot(objects) * members
    seen = {rank: 0 for rank in range(members)}
    for step in range(int(3 * period * 10)):         # 0.1 s steps over three periods
        now = 1000.0 + step / 10
        allowed = [rank for rank, turns in enumerate(replicas) if turns.my_turn(now, rank, members, objects)]
        assert len(allowed) <= 1, (now, allowed)
        for rank in allowed:
            seen[rank] += 1
    # Each member's turn is the first half of its slot: 4 s of every period, 40 steps.
    assert all(count == 3 * 40 for count in seen.values()), seen


def test_a_member_alone_may_always_start():
    assert DumpTurns(entries=100, seconds=600).my_turn(12.34, rank=0, members=1, objects=10 ** 6)


def test_due_by_entries_bytes_or_age():
    turns = DumpTurns(entries=100, seconds=600, max_bytes=1000)
    assert not turns.due(100, 1000, 600)
    assert turns.due(101, 0, 0) and turns.due(0, 1001, 0) and turns.due(0, 0, 601)
    assert not DumpTurns(entries=100, seconds=600).due(0, 10 ** 9, 0)      # no byte bound


def test_a_due_dump_waits_for_its_turn_and_never_starts_while_one_is_written():
    turns = DumpTurns(entries=100, seconds=600)       # slots of 0.5 s: rank 1 of 3 may start at [0.5, 0.75)
    counted = []

    def count():
        counted.append(1)
        return 10
    start = lambda now, dumping=False, entries=150: turns.should_start(  # noqa: E731
        now, dumping, log_entries=entries, log_bytes=None, age=1.0, place=lambda: (1, 3), count_objects=count)
    assert not start(3.6, entries=50)                 # its turn, but nothing due
    assert not start(3.6, dumping=True)               # a dump is being written
    assert not counted, "the store is counted only when a dump is due"
    assert not start(3.0)                             # due, but rank 0's slot
    assert start(3.6)                                 # due, and its turn


def test_a_log_twice_over_its_byte_bound_is_dumped_out_of_turn():
    turns = DumpTurns(entries=100, seconds=600, max_bytes=1000)
    args = dict(dumping=False, age=1.0, place=lambda: (1, 3), count_objects=lambda: 10)
    assert not turns.should_start(3.0, log_entries=0, log_bytes=1500, **args)
    assert turns.should_start(3.0, log_entries=0, log_bytes=2001, **args)
    assert not turns.should_start(3.0, log_entries=100000, log_bytes=0, **args)     # entries wait their turn
