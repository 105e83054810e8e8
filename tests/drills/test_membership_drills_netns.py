"""The membership drills (replace-replica, grow-shrink: vagrant/drills/membership_drills.py)
against NetnsTarget: every replica in its own network namespace, new ones joining with
--join at new addresses. Needs root and `ip netns`: without them the test FAILS."""
from shepherd_ha.cli import netns

from .conftest import import_runner, run_netns_drills


def test_membership_drills_pass_on_netns_target(tmp_path):
    run_drills, _ = import_runner()
    target, reports, text = run_netns_drills(tmp_path, run_drills.MEMBERSHIP)
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
