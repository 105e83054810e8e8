"""Pod status building, phases, backoff and restart decisions (pure parts of the agent)."""
import pytest

from agent import backoff as B
from agent import status as S


def cs(name, state, last=None, ready=False):
    return S.container_status(name, "img", state, ready, 0, last)


RUN = S.running("2026-01-01T00:00:00Z")
WAIT = S.waiting("ContainerCreating")
OK = S.terminated(0)
BAD = S.terminated(3)
CRASH = S.waiting("CrashLoopBackOff", "back-off")


@pytest.mark.parametrize("policy,states,phase", [
    ("Always", [RUN], "Running"),
    ("Always", [WAIT], "Pending"),
    ("Always", [RUN, WAIT], "Pending"),
    ("Always", [OK], "Running"),          # it will be restarted
    ("OnFailure", [OK], "Succeeded"),
    ("OnFailure", [BAD], "Running"),      # restarts
    ("Never", [OK, OK], "Succeeded"),
    ("Never", [OK, BAD], "Failed"),
    ("Never", [RUN, BAD], "Running"),
])
def test_phase(policy, states, phase):
    assert S.pod_phase(policy, [cs("c%d" % i, s) for i, s in enumerate(states)]) == phase


def test_a_crash_looping_container_is_running_not_pending():
    statuses = [cs("c", CRASH, last=BAD)]
    assert S.pod_phase("Always", statuses) == "Running"
    assert S.pod_phase("OnFailure", statuses) == "Running"


def test_terminal_phases_stick():
    assert S.pod_phase("Always", [cs("c", RUN)], previous="Succeeded") == "Succeeded"
    assert S.pod_phase("Always", [cs("c", RUN)], previous="Failed") == "Failed"
    assert S.pod_phase("Always", [], previous="Pending") == "Pending"


def test_conditions_keep_pod_scheduled_and_transition_times():
    existing = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "T0"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "T1"}]
    conds = S.pod_conditions(existing, [cs("a", RUN, ready=True)], "Running", "NOW")
    by = {c["type"]: c for c in conds}
    assert [c["type"] for c in conds] == ["PodScheduled", "Ready", "Initialized", "ContainersReady"]
    assert by["PodScheduled"] == existing[0]
    assert by["Ready"]["status"] == "True" and by["Ready"]["lastTransitionTime"] == "T1"
    assert by["ContainersReady"]["lastTransitionTime"] == "NOW"
    conds = S.pod_conditions(conds, [cs("a", RUN, ready=False), cs("b", RUN, ready=True)], "Running", "LATER")
    by = {c["type"]: c for c in conds}
    assert by["Ready"]["status"] == "False" and by["Ready"]["lastTransitionTime"] == "LATER"
    assert by["Ready"]["reason"] == "ContainersNotReady"
    assert by["Ready"]["message"] == "containers with unready status: [a]"


def test_terminal_pods_are_not_ready():
    conds = S.pod_conditions([], [cs("a", OK)], "Succeeded", "NOW")
    by = {c["type"]: c for c in conds}
    assert by["Ready"]["status"] == "False" and by["Ready"]["reason"] == "PodCompleted"
    assert by["PodScheduled"]["status"] == "True"


def test_build_status_and_differs():
    pod = {"status": {"phase": "Pending", "nominatedNodeName": "x",
                      "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "T0"}]}}
    statuses = [cs("a", RUN, ready=True)]
    st = S.build_pod_status(pod, statuses, "Running", "172.17.0.2", "10.0.0.1", "T0", "NOW")
    assert st["phase"] == "Running" and st["podIP"] == "172.17.0.2" and st["hostIP"] == "10.0.0.1"
    assert st["podIPs"] == [{"ip": "172.17.0.2"}] and st["startTime"] == "T0"
    assert st["nominatedNodeName"] == "x"
    assert st["containerStatuses"] == statuses
    assert S.differs(pod["status"], st)
    again = S.build_pod_status({"status": st}, statuses, "Running", "172.17.0.2", "10.0.0.1", "T0", "LATER")
    assert not S.differs(st, again)       # same facts: no write


def test_merge_patch_nulls_fields_that_went_away():
    current = {"phase": "Running", "podIP": "1.2.3.4", "message": "x"}
    new = {"phase": "Running", "podIP": "1.2.3.5"}
    patch = S.merge_patch_for(current, new)["status"]
    assert patch["podIP"] == "1.2.3.5" and patch["message"] is None and patch["phase"] == "Running"


def test_container_state_shapes():
    assert S.waiting("ErrImageNeverPull", "m") == {"waiting": {"reason": "ErrImageNeverPull", "message": "m"}}
    t = S.terminated(137, "A", "B", container_id="docker://x")["terminated"]
    assert t == {"exitCode": 137, "reason": "Error", "startedAt": "A", "finishedAt": "B",
                 "containerID": "docker://x"}
    assert S.terminated(0)["terminated"]["reason"] == "Completed"
    assert S.terminated(137, oom_killed=True)["terminated"]["reason"] == "OOMKilled"
    st = S.container_status("a", "img", RUN)
    assert st["started"] is True and st["lastState"] == {} and st["restartCount"] == 0


# ---- backoff and restart decisions ----

@pytest.mark.parametrize("policy,code,restart", [
    ("Always", 0, True), ("Always", 1, True), ("OnFailure", 0, False), ("OnFailure", 2, True),
    ("Never", 0, False), ("Never", 137, False)])
def test_should_restart(policy, code, restart):
    assert B.should_restart(policy, code) is restart


def test_backoff_is_immediate_then_doubles_to_the_cap():
    b = B.Backoff(base=10, cap=300)
    delays = [b.next_delay() for _ in range(8)]
    assert delays == [0, 10, 20, 40, 80, 160, 300, 300]
    assert b.peek() == 300
    b.reset()
    assert b.next_delay() == 0


def test_a_long_run_resets_the_backoff():
    b = B.Backoff(base=10, cap=300, reset_after=600)
    for _ in range(4):
        b.next_delay(ran_for=1)
    assert b.next_delay(ran_for=5) == 80        # 0, 10, 20, 40, then 80
    assert b.next_delay(ran_for=601) == 0
    assert b.next_delay(ran_for=1) == 10


def test_backoff_does_not_overflow():
    assert B.delay(10_000, 10, 300) == 300


def test_human_seconds():
    assert B.human_seconds(10) == "10s"
    assert B.human_seconds(80) == "1m20s"
    assert B.human_seconds(300) == "5m0s"
