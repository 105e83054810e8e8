"""Every failure drill of vagrant/drills/ against NetnsTarget: 3 replicas and 2 hollow
workers, each in its own network namespace on this machine. The same drill code runs
against the Vagrant VMs (VagrantTarget); here CI checks its logic on every change.

Needs root and `ip netns`: without them the test FAILS (never skips).
"""

import pytest

from shepherd_ha.cli import netns

from .conftest import import_runner, run_netns_drills

def test_every_drill_passes_on_netns_target(tmp_path):
    run_drills, _ = import_runner()
    target, reports, text = run_netns_drills(tmp_path, run_drills.ORDER)
    assert [r.drill for r in reports] == run_drills.ORDER
    # Each drill measured what it is about (the figures are printed, not judged: the machine is shared).
    figures = {r.drill: r.figures for r in reports}
    assert "power-off to new ready leader" in figures["kill-leader"]
    assert "cut to new ready leader in the majority" in figures["partition"]
    assert "power-off to all pods Running elsewhere" in figures["worker-loss"]
    assert "power-on to a leader and every replica ready" in figures["full-restart"]
    for drill, figs in figures.items():
        assert figs.get("writes acknowledged", 0) > 0, "%s acknowledged no write" % drill
    # close() removed the whole network.
    index = int(target.subnet.split(".")[2])
    left = [ns for ns in netns.namespaces() if ns.startswith("shepherd%d-" % index)]
    assert not left, "namespaces left after close(): %s" % left


class _DeadTarget:
    """A target whose only replica is a closed loopback port: every drill must FAIL fast."""
    name = "dead"
    control_planes = ["cp1"]
    workers = ["w1", "w2"]
    boot_timeout = ready_timeout = node_not_ready_timeout = pod_move_timeout = 1.0
    fault_hold = 0.0

    def setup(self):
        pass

    def close(self):
        pass

    def describe(self):
        return "dead: nothing listens"

    def api_urls(self):
        return ["http://127.0.0.1:9"]

    def api_url(self, host):
        return self.api_urls()[0]

    def client(self, timeout=1.0, retry_deadline=1.0):
        from shepherd_ha.client import Client
        return Client(self.api_urls(), timeout=0.5, retry_deadline=0.5)

    def node_name(self, worker):
        return worker


def test_drills_fail_with_a_reason_when_the_cluster_does_not_answer():
    run_drills, _ = import_runner()
    lines = []
    reports = run_drills.run(_DeadTarget(), run_drills.ORDER, out=lines.append)
    for report in reports:
        assert report.verdict.startswith("FAIL: "), "%s: %s\n%s" % (report.drill, report.verdict, "\n".join(lines))
        assert len(report.verdict) > len("FAIL: ") + 5, report.verdict


def test_runner_rejects_unknown_target_and_drill():
    run_drills, _ = import_runner()
    for argv in (["--target", "nowhere"], ["--target", "netns", "--drill", "no-such"]):
        with pytest.raises(SystemExit) as exc:
            run_drills.main(argv)
        assert exc.value.code == 2, argv


class _StoreClient:
    """Answers the writer's read-back list with a fixed set of ConfigMaps."""

    def __init__(self, items):
        self.items = items

    def list(self, resource, namespace=None, label_selector=None):
        return {"items": self.items}

    def close(self):
        pass


def test_writer_check_catches_a_lost_and_a_changed_write():
    import_runner()
    from drill_kit import DrillFailed, Report, Writer

    class FakeTarget:
        def client(self, **kwargs):
            return _StoreClient([{"metadata": {"name": "a"}, "data": {"value": "1"}},
                                 {"metadata": {"name": "b"}, "data": {"value": "changed"}}])
    writer = Writer(FakeTarget(), "unit")
    writer.acked = {"a": "1", "b": "2", "c": "3"}
    with pytest.raises(DrillFailed, match=r"1 acknowledged write\(s\) lost \(c\), 1 changed \(b\)"):
        writer.check(Report("unit", out=lambda line: None))
    writer.acked = {"a": "1"}
    writer.check(Report("unit", out=lambda line: None))   # nothing lost: no exception
