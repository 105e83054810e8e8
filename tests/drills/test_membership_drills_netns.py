"""The membership drills (replace-replica, grow-shrink: vagrant/drills/membership_drills.py)
against NetnsTarget: every replica in its own network namespace, new ones joining with
--join at new addresses. Needs root and `ip netns`: without them the test FAILS."""
from shepherd_ha.cli import netns

from .conftest import netns_or_fail
from .test_drills_netns import _import_runner


def test_membership_drills_pass_on_netns_target(tmp_path):
    netns_or_fail()
    run_drills, NetnsTarget = _import_runner()
    lines = []

    def out(line):
        lines.append(line)
        print(line, flush=True)

    target = NetnsTarget(str(tmp_path / "cluster"))
    reports = run_drills.run(target, run_drills.MEMBERSHIP, out=out)
    failed = ["%s: %s" % (r.drill, r.verdict) for r in reports if r.verdict != "PASS"]
    assert not failed, "drills failed: %s\n%s" % ("; ".join(failed), "\n".join(lines))
    text = "\n".join(lines)
    assert "add before remove refused as it should: 503" in text, text
    assert "members r1, r2, r4: quorum 2 of 3" in text, text
    assert "quorum 3 of 5" in text, text
    figures = {r.drill: r.figures for r in reports}
    for drill in run_drills.MEMBERSHIP:
        assert figures[drill].get("writes acknowledged", 0) > 0, "%s acknowledged no write" % drill
    # The removed replicas' namespaces went with them, and close() removed the rest.
    index = int(target.subnet.split(".")[2])
    left = [ns for ns in netns.namespaces() if ns.startswith("shepherd%d-" % index)]
    assert not left, "namespaces left after close(): %s" % left
