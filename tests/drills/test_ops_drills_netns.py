"""The operations drills (vagrant/drills/ops_drills.py: roll, restore) against NetnsTarget:
3 replicas and 2 hollow workers, each in its own network namespace. The same code runs on
the Vagrant VMs (`make drills DRILL=operations`).

Needs root and `ip netns`: without them the test FAILS (never skips).
"""
from shepherd_ha.cli import netns

from .conftest import import_runner, run_netns_drills
from .test_drills_netns import _DeadTarget


def test_roll_and_restore_drills_pass_on_netns_target(tmp_path):
    run_drills, _ = import_runner()
    target, reports, text = run_netns_drills(tmp_path, run_drills.OPERATIONS)
    assert [r.drill for r in reports] == ["roll", "restore"]
    roll, restore = (r.figures for r in reports)
    assert "longest write gap during the roll" in roll and roll["writes acknowledged during the roll"] > 0
    for host in target.control_planes:
        assert "%s restart to caught up and all ready" % host in roll
    assert restore["snapshot objects"] > 0 and "restore and start of the fresh cluster" in restore
    assert "[3/3] restarting" in text and "leader)" in text.split("[3/3] restarting", 1)[1].splitlines()[0]
    assert "every one of the" in text and "with the snapshot's digest" in text
    index = int(target.subnet.split(".")[2])
    left = [ns for ns in netns.namespaces() if ns.startswith("shepherd%d-" % index)]
    assert not left, "namespaces left after close(): %s" % left


def test_operations_drills_fail_with_a_reason_when_the_cluster_does_not_answer():
    run_drills, _ = import_runner()
    lines = []
    reports = run_drills.run(_DeadTarget(), run_drills.OPERATIONS, out=lines.append)
    for report in reports:
        assert report.verdict.startswith("FAIL: ") and len(report.verdict) > 11, (report.drill, report.verdict)
