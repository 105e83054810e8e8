"""The harness's own rules, without a cluster: how a write's answer becomes an outcome,
the fault plan, and refusing a cut it cannot make."""
import threading

import pytest
import requests

from shepherd_ha.client import ApiError, NoReplicaReachable, OutcomeUnknown

from . import faults, run
from .cluster import ChaosSetupError
from .target_cluster import TargetCluster
from .workload import RecordingSession, classify, key_names


def api_error(code, outcome=None):
    headers = {"Shepherd-Outcome": outcome} if outcome else {}
    return ApiError({"code": code, "reason": "R%d" % code, "message": "m"}, headers)


def session(ambiguous):
    s = RecordingSession()
    s.ambiguous = ambiguous
    return s


def test_answers_the_server_decided_are_fail():
    for code in (404, 409, 422):
        assert classify(api_error(code), session(False))[0] == "fail"


def test_a_clean_not_applied_503_is_fail_but_not_after_an_ambiguous_attempt():
    assert classify(api_error(503, "not-applied"), session(False))[0] == "fail"
    assert classify(api_error(503, "not-applied"), session(True))[0] == "unknown"
    assert classify(api_error(503, "unknown"), session(False))[0] == "unknown"
    assert classify(api_error(503), session(False))[0] == "unknown"


def test_transport_failures_and_deadlines_are_unknown():
    assert classify(OutcomeUnknown("x"), session(False))[0] == "unknown"
    assert classify(NoReplicaReachable(["http://127.0.0.1:1"]), session(False))[0] == "unknown"
    assert classify(requests.exceptions.ReadTimeout("t"), session(False))[0] == "unknown"
    assert classify(api_error(500), session(False))[0] == "unknown"


def test_the_session_marks_an_attempt_that_may_have_reached_the_server():
    s = RecordingSession()
    s.begin()
    with pytest.raises(requests.RequestException):
        s.request("GET", "http://127.0.0.1:9/", timeout=0.5)   # refused: never sent
    assert not s.ambiguous


def test_fault_plan_counts_and_is_seeded():
    plan = faults.schedule(10, ["kill-leader", "pause", "cut", "full-restart"], 1, seed=7)
    assert sorted(plan) == sorted(["kill-leader"] * 10 + ["pause", "cut", "full-restart"])
    assert plan == faults.schedule(10, ["kill-leader", "pause", "cut", "full-restart"], 1, seed=7)
    assert key_names(3) == ["k00", "k01", "k02"]


def test_a_cut_without_network_namespaces_fails_clearly():
    args = run.parse_args(["--faults", "kill-leader,cut", "--no-netns"])
    with pytest.raises(ChaosSetupError, match="root"):
        run.validate(args)


def test_bad_options_name_the_fix(capsys):
    with pytest.raises(SystemExit):
        run.parse_args(["--faults", "kill-leader,explode"])
    assert "explode" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run.parse_args(["--replicas", "1"])


class _PowerBoard:
    """A drills target whose power-offs meet at a barrier: only calls in flight together pass it."""

    control_planes = ("cp1", "cp2", "cp3")

    def __init__(self):
        self.barrier = threading.Barrier(len(self.control_planes), timeout=10)
        self.off = []

    def is_running(self, host):
        return host not in self.off

    def power_off(self, host):
        self.barrier.wait()         # BrokenBarrierError if the hosts were powered off one after another
        self.off.append(host)


def test_a_whole_cluster_outage_powers_every_host_off_at_once():
    board = _PowerBoard()
    cluster = TargetCluster(board)
    cluster._ids = {"r%d" % i: host for i, host in enumerate(board.control_planes, 1)}
    assert sorted(cluster.kill_all()) == ["r1", "r2", "r3"]
    assert sorted(board.off) == list(board.control_planes)
