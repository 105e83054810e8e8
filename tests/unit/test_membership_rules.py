"""The refusal rules of a membership change (store/membership.py) and the member table (FSM)."""
import pytest

from shepherd_ha.store import commands
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.store.membership import (CATCH_UP_LAG, MembershipChanger, NotLeader, Progress, Refused, check_add,
                                          check_remove, majority)

A, B, C, D, E = ("10.0.0.%d:7000" % i for i in range(1, 6))


def progress(commit, **state):
    """{address: Progress}: 'up' answers now at the commit index, 'behind' far back, 'silent' not answering."""
    kinds = {"up": (commit, 0.05), "behind": (max(0, commit - CATCH_UP_LAG - 1), 0.05), "silent": (commit, 5.0),
             "empty": (0, 0.05)}
    return {address: Progress(address, *kinds[kind]) for address, kind in state.items()}


def test_majority_of_each_size():
    assert [majority(n) for n in range(1, 8)] == [1, 2, 2, 3, 3, 4, 4]


def test_adding_a_fourth_needs_all_three_caught_up():
    check_add([A, B, C], A, progress(500, **{B: "up", C: "up"}), 500, D, "r4", {"r1", "r2", "r3"})
    with pytest.raises(Refused) as err:
        check_add([A, B, C], A, progress(500, **{B: "up", C: "silent"}), 500, D, "r4", {"r1", "r2", "r3"})
    assert err.value.code == 503
    assert "quorum 3 of 4" in str(err.value) and "force" in str(err.value)


def test_adding_a_fifth_tolerates_one_member_behind():
    check_add([A, B, C, D], A, progress(900, **{B: "up", C: "up", D: "behind"}), 900, E, "r5", set())
    with pytest.raises(Refused):
        check_add([A, B, C, D], A, progress(900, **{B: "up", C: "behind", D: "silent"}), 900, E, "r5", set())


def test_force_accepts_the_stall_but_not_a_duplicate():
    check_add([A], A, {}, 10, B, "r2", {"r1"}, force=True)
    with pytest.raises(Refused) as err:
        check_add([A], A, {}, 10, B, "r2", {"r1"})
    assert "quorum 2 of 2" in str(err.value)
    with pytest.raises(Refused) as err:
        check_add([A, B], A, {}, 10, B, "r9", set(), force=True)
    assert err.value.code == 409 and "already a member" in str(err.value)
    with pytest.raises(Refused) as err:
        check_add([A, B], A, {}, 10, C, "r1", {"r1", "r2"}, force=True)
    assert err.value.code == 409 and "id r1" in str(err.value)


def test_a_new_replica_with_no_log_is_not_caught_up():
    assert not Progress(D, 0, 0.01).caught_up(5)
    assert Progress(D, 5, 0.01).caught_up(5)


def test_removing_a_dead_member_of_three_is_allowed():
    check_remove([A, B, C], A, progress(100, **{B: "up", C: "silent"}), 100, C, "r3")


def test_removing_a_live_member_when_the_other_is_dead_is_refused():
    with pytest.raises(Refused) as err:
        check_remove([A, B, C], A, progress(100, **{B: "up", C: "silent"}), 100, B, "r2")
    assert err.value.code == 503 and "quorum is 2 of 2" in str(err.value)


def test_removing_from_five_with_two_down_leaves_three_of_four_needed():
    state = progress(100, **{B: "up", C: "up", D: "silent", E: "silent"})
    with pytest.raises(Refused):
        check_remove([A, B, C, D, E], A, state, 100, B, "r2")     # rest A C D E: need 3, up A C
    check_remove([A, B, C, D, E], A, state, 100, D, "r4")         # rest A B C E: need 3, up A B C


def test_removing_a_stranger_or_the_last_member():
    with pytest.raises(Refused) as err:
        check_remove([A, B, C], A, {}, 1, D, "r9")
    assert err.value.code == 404
    with pytest.raises(Refused) as err:
        check_remove([A], A, {}, 1, A, "r1")
    assert err.value.code == 409


class _Node:
    def __init__(self, leader=True):
        self.leader = leader

    def is_leader(self):
        return self.leader


class _Replica:
    def __init__(self, leader=True):
        self.node = _Node(leader)

    def leader_id(self):
        return "r2"

    def api_of(self, ident):
        return "http://h:8002" if ident == "r2" else None


def test_a_follower_names_the_leader_to_forward_to():
    changer = MembershipChanger(_Replica(leader=False))
    with pytest.raises(NotLeader) as err:
        changer.remove("r3")
    assert (err.value.leader, err.value.leader_api) == ("r2", "http://h:8002")


def test_a_second_change_while_one_runs_is_refused():
    changer = MembershipChanger(_Replica())
    with changer._one_at_a_time("add r4"):
        with pytest.raises(Refused) as err:
            changer.remove("r3")
    assert err.value.code == 409 and "add r4" in str(err.value)
    assert changer.current is None


def test_bad_add_requests_are_422():
    changer = MembershipChanger(_Replica())
    for ident, raft, api in (("", "h:1", None), ("r@4", "h:1", None), ("r4", "nohostport", None),
                             ("r4", "h:1", "ftp://x")):
        with pytest.raises(Refused) as err:
            changer.add(ident, raft, api)
        assert err.value.code == 422, (ident, raft, api)


def test_the_member_table_is_replicated_state():
    fsm = StoreFSM()
    before = fsm.digest()
    result = fsm.apply(commands.members([{"id": "r1", "raft": A, "api": "http://a"},
                                         {"id": "r2", "raft": B, "api": None}]))
    assert result["ok"] and result["members"] == ["r1", "r2"]
    assert fsm.revision == 0, "the table is not an object: no revision"
    assert fsm.digest() != before
    # The same address under a new id replaces the old entry; removal by id.
    fsm.apply(commands.members([{"id": "r4", "raft": B, "api": "http://b"}], remove=["r1"]))
    assert fsm.members == {"r4": {"id": "r4", "raft": B, "api": "http://b"}}


def test_a_malformed_members_command_is_refused_not_applied():
    fsm = StoreFSM()
    for bad in ({"type": "members", "version": 1, "set": [{"id": 1, "raft": A}], "remove": []},
                {"type": "members", "version": 1, "set": [], "remove": [3]},
                {"type": "members", "version": 1, "set": "r1"}):
        result = fsm.apply(bad)
        assert result.get("code") == 400, bad
    assert fsm.members == {} and fsm.malformed_commands == 3
