"""The service-traffic drill's meter and verdict (vagrant/drills/traffic_meter.py), and the
drill refusing a target whose workers are simulated."""
import os
import sys

import pytest

DRILLS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "vagrant", "drills")
if DRILLS_DIR not in sys.path:
    sys.path.insert(0, DRILLS_DIR)

import traffic_meter as M  # noqa: E402


def log(*results, start=100.0, step=0.2):
    """Log text of one request per result: 'a'/'b' answered by backend a/b, 'x' failed."""
    lines = []
    for i, r in enumerate(results, 1):
        at = start + (i - 1) * step
        lines.append("%d %.2f fail" % (i, at) if r == "x" else "%d %.2f ok backend=%s" % (i, at, r))
    return "\n".join(lines) + "\n"


def test_parse_skips_noise_and_repeats():
    text = "1 10.00 ok backend=web-1\nsh: oops\n2 10.20 fail\n2 10.20 ok backend=web-2\n3 10.4" \
           "\n4 10.60 ok <html>\n5 x ok backend=a\n6 11.00 ok backend=web-2\n"
    samples = M.parse_lines(text)
    assert [(s.seq, s.ok, s.backend) for s in samples] == [(1, True, "web-1"), (2, False, None), (6, True, "web-2")]
    assert M.parse_lines("") == [] and M.parse_lines(None) == []


def test_outages_fraction_and_longest():
    samples = M.parse_lines(log("a", "b", "x", "x", "x", "a", "b", "x", "a"))
    assert M.failed_fraction(samples) == pytest.approx(4 / 9)
    found = M.outages(samples)
    assert [(o.failed, round(o.length(), 2)) for o in found] == [(3, 0.8), (1, 0.4)]
    assert M.longest_outage(samples) == pytest.approx(0.8)
    assert M.longest_outage(M.parse_lines(log("a", "b"))) == 0.0
    # still failing at the end: the open outage counts to the last sample
    open_ended = M.parse_lines(log("a", "x", "x", "x", "x", "x", "x"))
    assert M.longest_outage(open_ended) == pytest.approx(1.2)
    assert M.outages(open_ended)[0].end is None
    # failing from the start: measured from the first failure
    assert M.longest_outage(M.parse_lines(log("x", "x", "a"))) == pytest.approx(0.4)
    assert M.backends(samples) == {"a": 3, "b": 2}


def test_recovery_needs_a_run_of_successes_after_the_fault():
    samples = M.parse_lines(log("a", "b", "x", "a", "x", "a", "b", "a", "b", "a"))
    assert M.recovered_at(samples, 2) == 10          # 6..10 are 5 successes in a row
    assert M.recovered_at(samples, 2, run=6) is None
    assert M.recovered_at(samples, 10) is None       # nothing after the end yet


def test_verdict_passes_only_when_traffic_recovers_after_each_fault():
    good = M.parse_lines(log(*("ab" * 3), "x", "x", *("ab" * 3), "x", *("ab" * 3)))
    faults = [M.FaultWindow("kill-leader", 6, 8), M.FaultWindow("worker-loss", 14, 15)]
    for f in faults:
        f.recovered_seq = M.recovered_at(good, f.end_seq)
    assert M.verdict(good, faults) == (True, [])
    lines = M.summary(good, faults)
    assert lines[0].startswith("21 requests, 14.29% failed, longest outage 0.60 s")
    assert lines[1].startswith("kill-leader: ") and lines[1].endswith("recovered")

    broken = M.parse_lines(log(*("ab" * 3), *("x" * 10)))
    ok, reasons = M.verdict(broken, [M.FaultWindow("partition", 6, 10)])
    assert not ok and reasons == ["traffic did not recover after partition"]
    ok, reasons = M.verdict(M.parse_lines(log("a", "x", "a", "x")), [M.FaultWindow("kill-leader", 4, None)])
    assert not ok and "no steady traffic before the first fault" in reasons[0] and "was not undone" in reasons[1]


def test_service_traffic_refuses_simulated_workers_with_a_reason():
    from drill_kit import DrillFailed
    from drills import DRILLS
    from run_drills import MEMBERSHIP, OPERATIONS, ORDER, selected

    class Hollow:
        name = "netns"
        workers = ["w1", "w2"]
        real_workers = False

    with pytest.raises(DrillFailed, match="needs workers that run real containers"):
        DRILLS["service-traffic"](Hollow(), None)
    assert selected(Hollow(), "all") == ORDER + MEMBERSHIP + OPERATIONS
    Hollow.real_workers = True
    assert selected(Hollow(), "all") == ORDER + MEMBERSHIP + OPERATIONS + ["service-traffic"]
    assert selected(Hollow(), "partition") == ["partition"]
    assert selected(Hollow(), "failures") == ORDER, "a group stays without the data-plane drill"
    assert selected(Hollow(), "operations") == ["roll", "restore"]


class _FakeCluster:
    """Just enough API for the drill's flow: objects by kind, Ready pods on both nodes, and
    a client log that grows by 5 requests per look (failing while `failing` is set)."""

    def __init__(self, heals=True):
        self.objects = {}
        self.lines = []
        self.failing = self.node_down = False
        self.heals = heals
        self.deleted = []

    def create(self, resource, obj, namespace=None):
        self.objects[(resource, obj["metadata"]["name"])] = obj
        return obj

    def list(self, resource, namespace=None, label_selector=None):
        ready = [{"type": "Ready", "status": "True"}]
        return {"items": [{"metadata": {"name": "web-%d" % i}, "spec": {"nodeName": "node-w%d" % (i % 2 + 1)},
                           "status": {"conditions": ready}} for i in range(4)]}

    def get(self, resource, name, namespace=None):
        self.request("GET", "")              # time passes: the client keeps sending
        return {"status": {"conditions": [{"type": "Ready", "status": "False" if self.node_down else "True"}]}}

    def request(self, method, path, **kw):
        for _ in range(5):
            seq = len(self.lines) + 1
            self.lines.append("%d %.2f fail" % (seq, seq * 0.2) if self.failing else
                              "%d %.2f ok backend=web-%d" % (seq, seq * 0.2, seq % 2))
        return "\n".join(self.lines) + "\n"

    def delete(self, resource, name, namespace=None, propagation_policy=None):
        self.deleted.append((resource, name))

    def close(self):
        pass


def _fake_target(cluster, faults):
    class Target:
        name, real_workers = "fake", True
        workers = ["w1", "w2"]
        workload_image = "shepherd/busybox:1"
        ready_timeout = pod_move_timeout = node_not_ready_timeout = boot_timeout = 3.0

        def client(self, **kw):
            return cluster

        def node_name(self, worker):
            return "node-" + worker

        def power_off(self, host):
            faults.append(("off", host))
            cluster.failing = cluster.node_down = True

        def power_on(self, host):
            faults.append(("on", host))
            cluster.node_down = False
            cluster.failing = not cluster.heals
    return Target()


def test_the_drill_flow_reports_figures_and_cleans_up(monkeypatch):
    import drills
    import service_traffic
    from drill_kit import DrillFailed, Report
    faults = []
    monkeypatch.setattr(drills, "kill_leader", lambda target, report: faults.append("kill-leader"))
    monkeypatch.setattr(drills, "partition", lambda target, report: faults.append("partition"))
    cluster = _FakeCluster()
    lines = []
    report = Report("service-traffic", out=lines.append)
    service_traffic.service_traffic(_fake_target(cluster, faults), report)
    assert faults == ["kill-leader", "partition", ("off", "w2"), ("on", "w2")]
    pod = [o for (kind, _), o in cluster.objects.items() if kind == "pods"][0]
    assert pod["spec"]["nodeName"] == "node-w1"
    assert "nc -w 2 drill-st-web-" in pod["spec"]["containers"][0]["command"][2]
    assert report.figures["failed requests"] > 0 and report.figures["longest outage"] > 0
    assert any(line.split("] ", 1)[-1].startswith("worker-loss: ") and line.endswith(" recovered")
               for line in lines), lines
    assert sorted(kind for kind, _ in cluster.deleted) == ["deployments", "pods", "services"]

    # traffic that never comes back fails the drill with that reason, and still cleans up
    cluster = _FakeCluster(heals=False)
    with pytest.raises(DrillFailed, match="traffic did not recover after worker-loss"):
        service_traffic.service_traffic(_fake_target(cluster, faults), Report("service-traffic", out=lines.append))
    assert sorted(kind for kind, _ in cluster.deleted) == ["deployments", "pods", "services"]
