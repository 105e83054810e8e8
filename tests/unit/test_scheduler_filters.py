"""Scheduler filters, scorers, node sampling and the failure message, one by one."""
import collections

import pytest

from shepherd_ha.controllers.scheduling import filters as F
from shepherd_ha.controllers.scheduling import scorers as S
from shepherd_ha.controllers.scheduling.algorithm import NodePicker, failure_message, feasible_nodes_to_find
from shepherd_ha.controllers.scheduling.view import NONZERO_CPU, NONZERO_MEMORY, PodInfo, ViewBuilder, pod_requests

from test_scheduler_support import node, pod, stamped

GI = 1 << 30


def view_of(nodes, pods=()):
    """A ClusterView of these node/pod manifests (stamped like stored objects)."""
    view, _ = ViewBuilder().build([stamped("nodes", n) for n in nodes], [stamped("pods", p) for p in pods])
    return view


def info(p):
    return PodInfo(stamped("pods", p))


# ---- filters ----

@pytest.mark.parametrize("ready,expected", [("True", None), ("False", F.NOT_READY), ("Unknown", F.NOT_READY),
                                            (None, F.NOT_READY)])
def test_node_ready(ready, expected):
    n = view_of([node("n1", ready=ready)]).by_name["n1"]
    assert F.node_ready(info(pod("p")), n) == expected


def test_cordoned_node_is_refused():
    view = view_of([node("n1", unschedulable=True), node("n2")])
    assert F.node_schedulable(info(pod("p")), view.by_name["n1"]) == F.UNSCHEDULABLE
    assert F.node_schedulable(info(pod("p")), view.by_name["n2"]) is None


def test_node_selector_needs_every_label_with_its_value():
    view = view_of([node("ssd", labels={"disk": "ssd", "zone": "a"}), node("hdd", labels={"disk": "hdd"})])
    p = info(pod("p", selector={"disk": "ssd"}))
    assert F.node_selector(p, view.by_name["ssd"]) is None
    assert F.node_selector(p, view.by_name["hdd"]) == F.SELECTOR_MISMATCH
    both = info(pod("p", selector={"disk": "ssd", "zone": "b"}))
    assert F.node_selector(both, view.by_name["ssd"]) == F.SELECTOR_MISMATCH
    assert F.node_selector(info(pod("any")), view.by_name["hdd"]) is None


def test_cpu_and_memory_count_what_is_bound_to_the_node():
    bound = [pod("a", cpu="1500m", memory="3Gi", node_name="n1"),
             pod("b", cpu="1", memory="1Gi", node_name="n1", containers=2),     # 2 containers: 2 cpu, 2Gi
             pod("done", cpu="4", memory="8Gi", node_name="n1", phase="Succeeded"),   # finished: not counted
             pod("failed", cpu="4", memory="8Gi", node_name="n1", phase="Failed"),
             pod("elsewhere", cpu="4", memory="8Gi", node_name="n2")]
    n1 = node("n1", cpu="4", memory="6Gi")
    n1["status"]["usage"] = {"cpu": "0", "memory": "0"}    # an agent's usage report is never what counts
    view = view_of([n1, node("n2")], bound)
    n = view.by_name["n1"]
    assert (n.cpu, n.memory, n.pod_count) == (3500, 5 * GI, 2)
    assert F.cpu_fits(info(pod("p", cpu="500m")), n) is None
    assert F.cpu_fits(info(pod("p", cpu="501m")), n) == F.INSUFFICIENT_CPU
    assert F.memory_fits(info(pod("p", memory="1Gi")), n) is None
    assert F.memory_fits(info(pod("p", memory="1025Mi")), n) == F.INSUFFICIENT_MEMORY
    no_requests = info(pod("p"))
    assert F.cpu_fits(no_requests, n) is None and F.memory_fits(no_requests, n) is None, "absent requests are 0"


def test_requests_sum_containers_and_nonzero_minimum_is_for_scoring_only():
    cpu, memory, nz_cpu, nz_memory, ports = pod_requests(stamped("pods", pod("p", cpu="250m", containers=3)))
    assert (cpu, memory) == (750, 0)
    assert (nz_cpu, nz_memory) == (750, 3 * NONZERO_MEMORY)
    assert pod_requests(stamped("pods", pod("q")))[:4] == (0, 0, NONZERO_CPU, NONZERO_MEMORY)


def test_pod_count_against_allocatable_pods():
    view = view_of([node("n1", pods="2")], [pod("a", node_name="n1"), pod("b", node_name="n1", phase="Succeeded")])
    n = view.by_name["n1"]
    assert F.pod_count(info(pod("p")), n) is None
    view.assume(info(pod("c")), n)
    assert F.pod_count(info(pod("p")), n) == F.TOO_MANY_PODS


def test_host_ports_conflict_by_port_and_protocol():
    view = view_of([node("n1")], [pod("a", node_name="n1", host_port=8080)])
    n = view.by_name["n1"]
    assert F.host_ports_free(info(pod("p", host_port=8080)), n) == F.PORTS_IN_USE
    assert F.host_ports_free(info(pod("p", host_port=8080, protocol="UDP")), n) is None
    assert F.host_ports_free(info(pod("p", host_port=8081)), n) is None
    assert F.host_ports_free(info(pod("p")), n) is None


def test_host_network_uses_container_ports_on_the_host():
    p = pod("p")
    p["spec"]["hostNetwork"] = True
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 9000}]
    assert info(p).host_ports == (("TCP", 9000),)


# ---- scorers ----

def test_least_allocated_prefers_the_emptier_node():
    view = view_of([node("busy", cpu="4", memory="8Gi"), node("idle", cpu="4", memory="8Gi")],
                   [pod("a", cpu="2", memory="4Gi", node_name="busy")])
    p = info(pod("p", cpu="1", memory="2Gi"))
    assert S.least_allocated(p, view.by_name["idle"]) == pytest.approx(75.0)
    assert S.least_allocated(p, view.by_name["busy"]) == pytest.approx(25.0)
    # Pods without requests count the scoring minimum, so load still tells nodes apart.
    view = view_of([node("busy"), node("idle")], [pod("a", node_name="busy")])
    assert S.least_allocated(info(pod("p")), view.by_name["idle"]) > \
        S.least_allocated(info(pod("p")), view.by_name["busy"])


def test_balanced_allocation_prefers_equal_cpu_and_memory_fractions():
    view = view_of([node("cpu-heavy", cpu="4", memory="8Gi"), node("even", cpu="4", memory="8Gi")],
                   [pod("a", cpu="3", memory="1Gi", node_name="cpu-heavy")])
    p = info(pod("p", cpu="1", memory="2Gi"))
    even = S.balanced_allocation(p, view.by_name["even"])
    heavy = S.balanced_allocation(p, view.by_name["cpu-heavy"])
    assert even == pytest.approx(100.0)                     # 1/4 cpu and 2/8 memory
    assert heavy == pytest.approx((1 - abs(4 / 4 - 3 / 8) / 2) * 100)
    assert 0 <= heavy < even <= 100


def test_spread_by_owner_prefers_nodes_with_fewer_pods_of_the_same_owner():
    view = view_of([node("n1"), node("n2"), node("n3")],
                   [pod("a", node_name="n1", owner="web"), pod("b", node_name="n1", owner="web"),
                    pod("c", node_name="n2", owner="web"),
                    pod("x", node_name="n3", owner="other"), pod("y", node_name="n3", owner="other")])
    p = info(pod("p", owner="web"))
    assert [S.spread_by_owner(p, view.by_name[n]) for n in ("n1", "n2", "n3")] == [0.0, 50.0, 100.0]
    assert S.spread_by_owner(info(pod("q")), view.by_name["n1"]) == 100.0, "no owner: no preference"
    assert S.spread_by_owner(info(pod("r", owner="new")), view.by_name["n1"]) == 100.0


def test_scores_stay_within_0_and_100_on_overcommitted_or_empty_nodes():
    view = view_of([node("tiny", cpu="100m", memory="1Mi"), node("zero", cpu="0", memory="0")],
                   [pod("a", cpu="100m", memory="1Mi", node_name="tiny")])
    p = info(pod("p", cpu="2", memory="4Gi", owner="o"))
    for n in view.nodes:
        for scorer in S.SCORERS:
            assert 0.0 <= scorer(p, n) <= 100.0, (scorer.__name__, n)


# ---- picking, sampling and the message ----

def test_failure_message_counts_reasons_most_common_first():
    reasons = [F.INSUFFICIENT_MEMORY, F.NOT_READY, F.INSUFFICIENT_MEMORY]
    assert failure_message(3, reasons) == "0/3 nodes available: 2 Insufficient memory, 1 node(s) were NotReady"
    tied = [F.UNSCHEDULABLE, F.INSUFFICIENT_CPU, F.NOT_READY, F.INSUFFICIENT_CPU, F.NOT_READY]
    assert failure_message(5, tied) == ("0/5 nodes available: 2 Insufficient cpu, 2 node(s) were NotReady, "
                                        "1 node(s) were unschedulable")
    assert failure_message(0, []) == "0/0 nodes available: no nodes are registered"


def test_picker_reports_the_first_refusing_filter_per_node():
    view = view_of([node("down", ready="False", memory="1Gi"), node("small1", memory="1Gi"),
                    node("small2", memory="1Gi")])
    found, diagnosis = NodePicker(F.FILTERS, S.SCORERS).pick(info(pod("p", memory="2Gi")), view)
    assert found is None
    assert diagnosis.reasons == collections.Counter({F.INSUFFICIENT_MEMORY: 2, F.NOT_READY: 1})
    assert diagnosis.message() == "0/3 nodes available: 2 Insufficient memory, 1 node(s) were NotReady"


def test_picker_takes_the_best_average_score():
    view = view_of([node("a"), node("b"), node("c")], [pod("x", cpu="1", node_name="a"),
                                                       pod("y", cpu="2", node_name="c")])
    found, _ = NodePicker(F.FILTERS, S.SCORERS).pick(info(pod("p", cpu="1")), view)
    assert found.name == "b"


def test_feasible_nodes_to_find_follows_kube_scheduler():
    assert feasible_nodes_to_find(50) == 50
    assert feasible_nodes_to_find(100) == 100
    assert feasible_nodes_to_find(500) == 230          # 46% of 500
    assert feasible_nodes_to_find(5000) == 500         # 10%
    assert feasible_nodes_to_find(200) == 100          # never fewer than 100
    assert feasible_nodes_to_find(500, percentage=100) == 500
    assert feasible_nodes_to_find(500, percentage=10) == 100


def test_sampling_stops_early_and_rotates_the_start():
    nodes = [node("n%03d" % i) for i in range(300)]
    view = view_of(nodes)
    seen = []

    def spy(p, n):
        seen.append(n.name)
        return None
    picker = NodePicker([spy], S.SCORERS, percentage=0, minimum=100)
    picker.pick(info(pod("p")), view)
    assert len(seen) == feasible_nodes_to_find(300) == 144
    first = seen[:]
    del seen[:]
    picker.pick(info(pod("q")), view)
    assert seen[0] == "n144" and not set(seen) & set(first), "the next pod starts where the last stopped"


def test_shared_verdicts_place_pods_exactly_as_checking_every_node_would():
    import random
    rng = random.Random(7)
    nodes = [node("n%02d" % i, cpu=str(rng.choice([2, 4, 8])), memory="%dGi" % rng.choice([4, 8, 16]),
                  pods=str(rng.choice([5, 10, 110])), ready=rng.choice(["True"] * 5 + ["False"]),
                  labels={"disk": rng.choice(["ssd", "hdd"])}) for i in range(30)]
    bound = [pod("b%d" % i, cpu="%dm" % rng.choice([100, 500, 1000]), node_name="n%02d" % rng.randrange(30),
                 owner=rng.choice(["web", "db"])) for i in range(40)]
    kinds = [dict(cpu="250m", memory="256Mi", owner="web"), dict(cpu="1", owner="db"),
             dict(memory="1Gi", selector={"disk": "ssd"}, owner="web"), dict(host_port=80), dict()]
    pending = [pod("p%03d" % i, **rng.choice(kinds)) for i in range(400)]
    placements = []
    for share in (True, False):
        view = view_of(nodes, bound)
        picker = NodePicker(F.FILTERS, S.SCORERS, minimum=10)
        picker.share_verdicts = share
        out = []
        for p in pending:
            pi = info(p)
            found, diagnosis = picker.pick(pi, view)
            if found is not None:
                view.assume(pi, found)
            out.append(found.name if found else diagnosis.message())
        placements.append(out)
    assert placements[0] == placements[1]
    assert any(not p.startswith("0/") for p in placements[0]) and any(p.startswith("0/") for p in placements[0])


def test_custom_functions_keep_verdicts_per_pod():
    assert NodePicker(F.FILTERS, S.SCORERS).share_verdicts
    assert not NodePicker(F.FILTERS + [lambda p, n: None], S.SCORERS).share_verdicts
    assert not NodePicker(F.FILTERS, [lambda p, n: 1.0]).share_verdicts
