"""Node lifecycle controller against an in-memory store and a fake monotonic clock."""
from controller_kit import ControllerHarness, FakeClock, create, write

from shepherd_ha.controllers.events import EventRecorder
from shepherd_ha.controllers.node_lifecycle import LEASE_NAMESPACE, NodeLifecycleController, controllers, ready_condition
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.store.fsm import Change

GRACE, EVICTION = 15.0, 10.0
RECHECK_SLACK = 7.0      # eviction_pacing.RECHECK (5 s) between looks at a held node, and a step


def node(name, ready="True"):
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "spec": {"unschedulable": False},
           "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                      "addresses": [{"type": "InternalIP", "address": "192.0.2.1"}]}}
    if ready is not None:
        obj["status"]["conditions"] = [{"type": "Ready", "status": ready, "reason": "AgentReady",
                                        "message": "agent says so", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    return obj


def lease(name, renew="2026-01-01T00:00:00Z"):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE},
            "spec": {"holderIdentity": name, "renewTime": renew, "leaseDurationSeconds": 40}}


def pod(name, node_name, ready=True, namespace="default"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}], "nodeName": node_name},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class Harness(ControllerHarness):
    def __init__(self, grace=GRACE, eviction=EVICTION, store=None, clock=None, **more_settings):
        clock = clock or FakeClock()
        store = store or MemoryStore(clock=clock, namespaces=("default", LEASE_NAMESPACE))
        self.renewals = 0
        settings = ControllerSettings(node_grace_period=grace, pod_eviction_timeout=eviction, node_lease_interval=5,
                                      **more_settings)
        super().__init__(lambda s: controllers(s, EventRecorder(s, "test"), settings), store=store, clock=clock)

    def advance(self, seconds, renewing=(), step=5.0):
        """Let `seconds` pass in steps, renewing the leases of `renewing` at each step."""
        left = seconds
        while left > 1e-9:
            dt = min(step, left)
            self.clock.now += dt
            left -= dt
            for name in renewing:
                self.renew(name)
            self.settle()

    def renew(self, name):
        self.renewals += 1
        current = self.store.get("leases", LEASE_NAMESPACE, name)
        spec = dict(current["spec"], renewTime="2026-01-01T00:%02d:%02dZ" % divmod(self.renewals % 3600, 60))
        write(self.store, {"op": "update", "resource": "leases", "namespace": LEASE_NAMESPACE, "name": name,
                           "object": dict(current, spec=spec)})

    def ready(self, name):
        cond = ready_condition(self.store.get("nodes", None, name))
        return cond and cond["status"]

    def events(self, reason):
        return [e for e in self.store.list("events") if e["reason"] == reason]


def two_nodes_with_pods():
    h = Harness()
    for name in ("n1", "n2"):
        create(h.store, "nodes", node(name))
        create(h.store, "leases", lease(name))
    create(h.store, "pods", pod("p1", "n1"))
    create(h.store, "pods", pod("p2", "n2"))
    create(h.store, "pods", pod("p3", "n2", ready=False))
    h.settle()
    return h


def test_a_node_that_stops_renewing_goes_not_ready_then_its_pods_are_evicted():
    h = two_nodes_with_pods()
    h.advance(GRACE - 1, renewing=("n1",), step=1.0)
    assert h.ready("n2") == "True", "inside the grace period"
    h.advance(1, renewing=("n1",))
    assert (h.ready("n1"), h.ready("n2")) == ("True", "Unknown")
    cond = ready_condition(h.store.get("nodes", None, "n2"))
    assert cond["reason"] == "NodeStatusUnknown" and "15s" in cond["message"]
    assert cond["lastTransitionTime"] != "2026-01-01T00:00:00Z"
    [event] = h.events("NodeNotReady")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "n2"
    # Its ready pod is marked not ready (endpoints stop sending it traffic); the node keeps its other status.
    assert ready_condition(h.store.get("pods", "default", "p2"))["status"] == "False"
    assert h.store.get("nodes", None, "n2")["status"]["allocatable"]["cpu"] == "2"
    assert any(s.startswith("node n2 is NotReady: lease not renewed for 15s and no status posted") for s in h.controller.sentences)

    h.advance(EVICTION - 1, renewing=("n1",), step=1.0)
    assert h.store.get("pods", "default", "p2") is not None, "eviction waits for the timeout"
    h.advance(1, renewing=("n1",))
    assert h.store.get("pods", "default", "p2") is None and h.store.get("pods", "default", "p3") is None
    assert h.store.get("pods", "default", "p1") is not None, "pods of the healthy node stay"
    evicted = h.events("Evicted")
    assert sorted(e["involvedObject"]["name"] for e in evicted) == ["p2", "p3"]
    assert {e["message"] for e in evicted} == {"node n2 not ready for 25s"}
    assert list(h.controller.sentences)[-1].startswith("evicted 2 pod(s) from node n2, not ready for 25s")


def test_a_node_that_comes_back_becomes_ready_and_keeps_its_pods():
    h = two_nodes_with_pods()
    h.advance(GRACE, renewing=("n1",))
    assert h.ready("n2") == "Unknown"
    h.advance(5, renewing=("n1", "n2"))
    assert h.ready("n2") == "True"
    cond = ready_condition(h.store.get("nodes", None, "n2"))
    assert cond["reason"] == "NodeLeaseRenewed"
    assert [e["involvedObject"]["name"] for e in h.events("NodeReady")] == ["n2"]
    h.advance(EVICTION * 2, renewing=("n1", "n2"))
    assert h.store.get("pods", "default", "p2") is not None, "the eviction deadline was cancelled"
    assert h.ready("n2") == "True"


def test_every_node_gets_a_full_grace_period_from_first_sight_lease_or_not():
    clock = FakeClock()
    store = MemoryStore(clock=clock, namespaces=("default", LEASE_NAMESPACE))
    create(store, "nodes", node("old"))
    create(store, "leases", lease("old", renew="1999-01-01T00:00:00Z"))   # agents' timestamps mean nothing
    create(store, "nodes", node("bare"))                                    # no lease at all
    clock.now += 3600                           # an hour passes before this leader starts
    h = Harness(store=store, clock=clock)
    h.settle()
    assert (h.ready("old"), h.ready("bare")) == ("True", "True")
    h.advance(GRACE - 1, step=1.0)
    assert (h.ready("old"), h.ready("bare")) == ("True", "True")
    create(store, "nodes", node("late"))         # seen only now: its own full grace period
    h.advance(1)
    assert (h.ready("old"), h.ready("bare"), h.ready("late")) == ("Unknown", "Unknown", "True")
    assert ready_condition(h.store.get("nodes", None, "bare"))["message"] == "no node lease seen for 15s and no status posted (grace period 15s)"
    assert ready_condition(h.store.get("nodes", None, "old"))["message"] == "node lease not renewed for 15s and no status posted (grace period 15s)"
    h.advance(GRACE - 1, step=1.0)
    assert h.ready("late") == "True"
    h.advance(1)
    assert h.ready("late") == "Unknown"


def test_a_new_leader_restarts_the_clock_and_an_unknown_node_stays_unknown_until_its_lease_moves():
    h = two_nodes_with_pods()
    h.advance(GRACE, renewing=("n1",))
    assert h.ready("n2") == "Unknown"
    # A new leader: fresh controller on the same store, sees n2 already Unknown.
    h2 = Harness(store=h.store, clock=h.clock)
    h2.settle()
    assert h2.ready("n2") == "Unknown", "not seen moving yet: stays Unknown"
    h2.advance(EVICTION, renewing=("n1",))
    assert h.store.get("pods", "default", "p2") is not None, "the new leader gives a full grace period first"
    h2.advance(GRACE, renewing=("n1",))
    assert h.store.get("pods", "default", "p2") is None
    assert h2.ready("n1") == "True"


def test_lease_deleted_counts_as_no_renewal_and_a_new_lease_revives():
    h = two_nodes_with_pods()
    write(h.store, {"op": "delete", "resource": "leases", "namespace": LEASE_NAMESPACE, "name": "n2"})
    h.advance(GRACE, renewing=("n1",))
    assert h.ready("n2") == "Unknown"
    create(h.store, "leases", lease("n2"))
    h.settle()
    assert h.ready("n2") == "True"


def post_status(h, name, beat, ready="True"):
    """The agent's status post: its own Ready condition with a new lastHeartbeatTime."""
    current = h.store.get("nodes", None, name)
    conditions = [{"type": "Ready", "status": ready, "reason": "AgentReady", "message": "agent says so",
                   "lastHeartbeatTime": beat, "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    write(h.store, {"op": "update", "resource": "nodes", "name": name, "subresource": "status",
                    "object": dict(current, status=dict(current["status"], conditions=conditions))})


def test_status_posts_are_heartbeats_too_when_the_lease_stops():
    h = two_nodes_with_pods()
    # n2's lease stops, but its agent still posts status every 10 s (a new lastHeartbeatTime each time).
    for beat in range(1, 5):
        post_status(h, "n2", "2026-01-01T00:00:%02dZ" % (10 * beat))
        h.advance(10, renewing=("n1",), step=1.0)
        assert h.ready("n2") == "True", "status posts keep the node alive (%d s)" % (10 * beat)
    assert h.events("NodeNotReady") == []
    # The same heartbeat time again is no new post (the last one was seen at 31 s); nor is the
    # controller's own write of the condition.
    post_status(h, "n2", "2026-01-01T00:00:40Z")
    h.advance(GRACE - 8, renewing=("n1",), step=1.0)
    assert h.ready("n2") == "Unknown"
    unknown = ready_condition(h.store.get("nodes", None, "n2"))
    assert "no status posted" in unknown["message"]
    assert unknown["lastHeartbeatTime"] == "2026-01-01T00:00:40Z", "when it was last heard from stays"
    h.advance(5, renewing=("n1",), step=1.0)
    assert h.ready("n2") == "Unknown", "marking it Unknown did not count as a heartbeat"
    # A post after that brings it back, and it stays: no flapping back to Unknown at the next look.
    post_status(h, "n2", "2026-01-01T00:01:30Z")
    h.advance(GRACE - 1, renewing=("n1",), step=1.0)
    assert h.ready("n2") == "True"
    assert h.store.get("pods", "default", "p2") is not None, "its pods were not evicted"
    h.advance(EVICTION + 2, renewing=("n1",), step=1.0)
    assert h.ready("n2") == "Unknown" and h.store.get("pods", "default", "p2") is None


def test_agent_reported_not_ready_is_not_overridden_by_a_moving_lease():
    h = Harness()
    create(h.store, "nodes", node("n1", ready="False"))
    create(h.store, "leases", lease("n1"))
    h.advance(GRACE * 2, renewing=("n1",))
    assert h.ready("n1") == "False"


def test_a_node_without_conditions_becomes_ready_when_its_lease_moves():
    h = Harness()
    create(h.store, "nodes", node("n1", ready=None))
    create(h.store, "leases", lease("n1"))
    h.settle()
    assert h.ready("n1") is None, "not judged before its lease is seen moving"
    h.advance(1, renewing=("n1",))
    assert h.ready("n1") == "True"


def test_pods_bound_to_an_evicted_node_later_are_deleted_too():
    h = two_nodes_with_pods()
    h.advance(GRACE + EVICTION, renewing=("n1",))
    assert h.store.get("pods", "default", "p2") is None
    create(h.store, "pods", pod("late", "n2"))
    h.settle()
    assert h.store.get("pods", "default", "late") is None
    create(h.store, "pods", pod("fine", "n1"))
    h.settle()
    assert h.store.get("pods", "default", "fine") is not None


def test_re_checks_are_bounded_one_pending_timer_per_node():
    h = Harness()
    for i in range(20):
        create(h.store, "nodes", node("n%d" % i))
        create(h.store, "leases", lease("n%d" % i))
    h.settle()
    names = ["n%d" % i for i in range(20)]
    for _ in range(30):
        h.advance(1, renewing=names)
        assert len(h.controller.queue) <= 2 * len(names), "delayed re-checks pile up"
    assert all(h.ready(n) == "True" for n in names)


def test_deleted_node_is_forgotten():
    h = two_nodes_with_pods()
    write(h.store, {"op": "delete", "resource": "nodes", "name": "n2"})
    h.advance(GRACE + EVICTION, renewing=("n1",))
    assert h.store.get("pods", "default", "p2") is not None, "pods of a deleted node are not this controller's"
    assert not h.events("NodeNotReady")


def test_writes_are_refused_once_another_leader_claimed():
    h = two_nodes_with_pods()
    h.store.apply({"type": "claim", "term": 5, "replica": "other"})
    h.advance(GRACE, renewing=("n1",))
    assert h.ready("n2") == "True", "a deposed leader's writes do not apply"
    assert h.store.fsm.fenced_rejections >= 1
    assert isinstance(h.controller, NodeLifecycleController)


# ---- evictions paced by zone (eviction_pacing.py) ----

def fleet(count, zones=None, **settings):
    """`count` nodes n0.. with leases, one pod each (pod-n0, ...)."""
    h = Harness(**settings)
    for i in range(count):
        obj = node("n%d" % i)
        if zones:
            obj["metadata"]["labels"]["topology.kubernetes.io/zone"] = zones[i]
        create(h.store, "nodes", obj)
        create(h.store, "leases", lease("n%d" % i))
        create(h.store, "pods", pod("pod-n%d" % i, "n%d" % i))
    h.settle()
    return h


def evicted(h, names):
    return sorted(n for n in names if h.store.get("pods", "default", "pod-" + n) is None)


def test_evictions_start_one_node_per_ten_seconds_in_a_healthy_zone():
    h = fleet(10)
    alive = ["n%d" % i for i in range(2, 10)]
    h.advance(GRACE + EVICTION, renewing=alive, step=1.0)
    assert len(evicted(h, ["n0", "n1"])) == 1, "the first node at its deadline, the second waits"
    assert any("waits" in s and "at most 0.1 nodes per second" in s for s in h.controller.sentences)
    h.advance(9, renewing=alive, step=1.0)
    assert len(evicted(h, ["n0", "n1"])) == 1
    h.advance(1, renewing=alive, step=1.0)
    assert evicted(h, ["n0", "n1"]) == ["n0", "n1"], "ten seconds later"
    assert evicted(h, alive) == []


def test_a_small_zone_mostly_not_ready_evicts_nothing_until_it_recovers():
    h = fleet(5)
    down = ["n0", "n1", "n2"]               # 3 of 5: over 2 nodes and over 55 %
    h.advance(GRACE + EVICTION + 60, renewing=["n3", "n4"], step=1.0)
    assert [h.ready(n) for n in down] == ["Unknown"] * 3, "still marked NotReady"
    assert evicted(h, down) == [], "a partially disrupted zone of 50 nodes or fewer evicts none"
    assert any('zone "" is PartialDisruption (was Normal): 3 of 5 nodes NotReady' in s for s in h.controller.sentences)
    assert any("n0's pods waits" in s and "3 of 5 nodes of the zone are NotReady" in s
               for s in h.controller.sentences)
    h.advance(5, renewing=["n1", "n2", "n3", "n4"], step=1.0)      # two come back: 1 of 5 NotReady
    h.advance(5, renewing=["n1", "n2", "n3", "n4"], step=1.0)
    assert evicted(h, down) == ["n0"], "healthy again: the one still down is evicted"
    assert evicted(h, ["n1", "n2"]) == []


def test_with_no_node_ready_anywhere_nothing_is_evicted():
    h = fleet(2)
    h.advance(5, renewing=["n0", "n1"], step=1.0)     # both renewed once, then neither
    h.advance(GRACE + EVICTION + 60, step=1.0)
    assert evicted(h, ["n0", "n1"]) == []
    assert any("no node is Ready in any zone" in s for s in h.controller.sentences)
    h.advance(5, renewing=["n1"], step=1.0)
    assert h.ready("n1") == "True"
    assert any("every other node gets a full grace period again" in s for s in h.controller.sentences)
    obj = h.store.get("nodes", None, "n0")        # a change of n0 reconciles it inside its new grace period
    write(h.store, {"op": "update", "resource": "nodes", "name": "n0",
                    "object": dict(obj, metadata=dict(obj["metadata"], labels={"touched": "yes"}))})
    for _ in range(int(GRACE + EVICTION - 7)):
        h.advance(1, renewing=["n1"], step=1.0)
        assert h.ready("n0") == "Unknown", "its lease has not moved: it stays NotReady meanwhile"
    assert evicted(h, ["n0", "n1"]) == [], "back from every zone down: n0 gets a full grace period again"
    h.advance(RECHECK_SLACK, renewing=["n1"], step=1.0)
    assert evicted(h, ["n0", "n1"]) == ["n0"], "and is evicted after it"


def test_evictions_under_way_stop_when_every_zone_goes_down():
    h = fleet(10)
    alive = ["n%d" % i for i in range(1, 10)]
    h.advance(GRACE + EVICTION, renewing=alive, step=1.0)
    assert evicted(h, ["n0"]) == ["n0"]
    h.advance(GRACE + EVICTION + 10, step=1.0)      # now every node stops
    create(h.store, "pods", pod("late", "n0"))
    h.advance(5, step=1.0)
    assert h.store.get("pods", "default", "late") is not None, "no eviction at all while every zone is down"
    assert evicted(h, alive) == []


def test_a_zone_with_no_node_ready_beside_a_healthy_zone_is_evicted():
    h = fleet(3, zones=["a", "a", "b"])
    h.advance(GRACE + EVICTION, renewing=["n2"], step=1.0)
    assert len(evicted(h, ["n0", "n1"])) == 1
    h.advance(10, renewing=["n2"], step=1.0)
    assert evicted(h, ["n0", "n1", "n2"]) == ["n0", "n1"]


def test_a_large_zone_partially_disrupted_evicts_at_the_secondary_rate():
    h = fleet(60)
    down = ["n%d" % i for i in range(40)]
    alive = ["n%d" % i for i in range(40, 60)]
    h.advance(GRACE + EVICTION, renewing=alive, step=1.0)
    assert len(evicted(h, down)) == 1, "one node at once, then one per 100 s (0.01 per second)"
    h.advance(95, renewing=alive, step=5.0)
    assert len(evicted(h, down)) == 1
    h.advance(5, renewing=alive, step=5.0)
    assert len(evicted(h, down)) == 2
    assert evicted(h, alive) == []


def test_pods_landing_on_a_node_whose_eviction_started_go_without_waiting_for_the_pacer():
    h = fleet(10)
    alive = ["n%d" % i for i in range(2, 10)]
    h.advance(GRACE + EVICTION, renewing=alive, step=1.0)
    [first] = evicted(h, ["n0", "n1"])
    create(h.store, "pods", pod("late", first))
    h.settle()
    assert h.store.get("pods", "default", "late") is None
    assert len(evicted(h, ["n0", "n1"])) == 1, "the other node's eviction still waits its turn"


def test_eviction_pacing_settings_are_checked():
    import pytest
    from shepherd_ha.options import ConfigError
    for bad, match in (({"node_eviction_rate": -1}, "--node-eviction-rate"),
                       ({"secondary_node_eviction_rate": -0.5}, "--secondary-node-eviction-rate"),
                       ({"unhealthy_zone_threshold": 0}, "--unhealthy-zone-threshold"),
                       ({"unhealthy_zone_threshold": 1.5}, "--unhealthy-zone-threshold"),
                       ({"large_cluster_size_threshold": -1}, "--large-cluster-size-threshold"),
                       ({"pod_batch_period": -0.1}, "--pod-batch-period")):
        with pytest.raises(ConfigError, match=match):
            ControllerSettings.from_values(bad)


def test_a_zero_eviction_rate_evicts_nothing():
    h = fleet(10, node_eviction_rate=0)
    h.advance(GRACE + EVICTION + 30, renewing=["n%d" % i for i in range(1, 10)], step=1.0)
    assert evicted(h, ["n0"]) == []
    assert any("n0's pods waits" in s and "--node-eviction-rate is 0" in s for s in h.controller.sentences)


def test_a_node_whose_agent_reports_not_ready_counts_as_not_ready_in_its_zone():
    h = fleet(5)
    for name in ("n3", "n4"):       # their agents say NotReady (their leases still move)
        obj = h.store.get("nodes", None, name)
        status = dict(obj["status"], conditions=[{"type": "Ready", "status": "False", "reason": "AgentSaysSo"}])
        write(h.store, {"op": "update", "resource": "nodes", "name": name, "subresource": "status",
                        "object": dict(obj, status=status)})
    h.advance(GRACE + EVICTION + 20, renewing=["n2", "n3", "n4"], step=1.0)
    assert evicted(h, ["n0", "n1"]) == [], "4 of 5 NotReady: a small zone partially disrupted evicts none"
    assert any("4 of 5 nodes of the zone are NotReady" in s for s in h.controller.sentences)


def test_a_faster_rate_applies_at_once_when_a_zone_recovers():
    h = fleet(60)
    down = ["n%d" % i for i in range(40)]
    alive = ["n%d" % i for i in range(40, 60)]
    h.advance(GRACE + EVICTION, renewing=alive, step=1.0)
    assert len(evicted(h, down)) == 1               # partially disrupted: 0.01 per second
    back = [n for n in down if n not in evicted(h, down)][:35]
    h.advance(10, renewing=alive + back, step=1.0)    # 4 still down of 59: healthy, 0.1 per second
    assert len(evicted(h, down)) == 2, "the normal rate's bucket starts with its token"


def test_nodes_whose_heartbeats_are_late_but_not_yet_a_grace_period_are_at_risk():
    h = two_nodes_with_pods()                        # 5 s renewals, 15 s grace: at risk from 7.5 s
    assert h.controller.at_risk_after == 7.5
    assert h.controller.heartbeats_at_risk() == 0
    h.advance(7, renewing=("n1",), step=1.0)
    assert h.controller.heartbeats_at_risk() == 0, "n2 is 7 s late: within a renewal and its slack"
    h.advance(1, renewing=("n1",), step=1.0)
    assert h.controller.heartbeats_at_risk() == 1, "n2 is 8 s late"
    h.renew("n2")
    h.settle()
    assert h.controller.heartbeats_at_risk() == 0, "its renewal came"
    h.advance(GRACE, renewing=("n1",), step=1.0)
    assert h.ready("n2") == "Unknown"
    assert h.controller.heartbeats_at_risk() == 0, "past the grace period a node is NotReady, no longer at risk"


def test_a_renewal_the_informer_passed_on_counts_before_the_worker_reconciles_it():
    h = two_nodes_with_pods()
    h.advance(8, renewing=("n1",), step=1.0)
    assert h.controller.heartbeats_at_risk() == 1
    # The informer hands n2's renewal over; the controller's worker is behind.
    renewed = dict(lease("n2"), metadata={"name": "n2", "namespace": LEASE_NAMESPACE, "resourceVersion": "999"})
    assert h.controller.keys_for(Change(999, "MODIFIED", "leases", renewed, lease("n2"))) == ["n2"]
    assert h.controller.heartbeats_at_risk() == 0
    deleted = Change(1000, "DELETED", "leases", None, renewed)
    h.clock.now += 8
    h.controller.keys_for(deleted)
    assert h.controller.heartbeats_at_risk() == 2, "a deleted lease is no renewal; n1 was not renewed for 8 s either"
