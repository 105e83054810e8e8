"""The operations drills (vagrant/drills/ops_drills.py: roll, restore) against NetnsTarget:
3 replicas and 2 hollow workers, each in its own network namespace. The same code runs on
the Vagrant VMs (`make drills DRILL=operations`).

Needs root and `ip netns`: without them the test FAILS (never skips).
"""
from shepherd_ha.cli import netns

from .conftest import netns_or_fail
from .test_drills_netns import _DeadTarget, _import_runner


def test_roll_and_restore_drills_pass_on_netns_target(tmp_path):
    netns_or_fail()
    run_drills, NetnsTarget = _import_runner()
    lines = []

    def out(line):
        lines.append(line)
        print(line, flush=True)

    target = NetnsTarget(str(tmp_path / "cluster"))
    reports = run_drills.run(target, run_drills.OPERATIONS, out=out)
    assert [r.drill for r in reports] == ["roll", "restore"]
    failed = ["%s: %s" % (r.drill, r.verdict) for r in reports if r.verdict != "PASS"]
    assert not failed, "drills failed: %s\n%s" % ("; ".join(failed), "\n".join(lines))
    roll, restore = (r.figures for r in reports)
    assert "longest write gap during the roll" in roll and roll["writes acknowledged during the roll"] > 0
    for host in target.control_planes:
        assert "%s restart to caught up and all ready" % host in roll
    assert restore["snapshot objects"] > 0 and "restore and start of the fresh cluster" in restore
    text = "\n".join(lines)
    assert "[3/3] restarting" in text and "leader)" in text.split("[3/3] restarting", 1)[1].splitlines()[0]
    assert "every one of the" in text and "with the snapshot's digest" in text
    index = int(target.subnet.split(".")[2])
    left = [ns for ns in netns.namespaces() if ns.startswith("shepherd%d-" % index)]
    assert not left, "namespaces left after close(): %s" % left


def test_operations_drills_fail_with_a_reason_when_the_cluster_does_not_answer():
    run_drills, _ = _import_runner()
    lines = []
    reports = run_drills.run(_DeadTarget(), run_drills.OPERATIONS, out=lines.append)
    for report in reports:
        assert report.verdict.startswith("FAIL: ") and len(report.verdict) > 11, (report.drill, report.verdict)
