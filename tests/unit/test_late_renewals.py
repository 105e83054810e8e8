"""Late lease renewals (api/flow_control.py, level `late`): while every system seat is
busy, the renewal of a node whose stored Lease is older than renewal_late_after takes a
seat of its own instead of queueing behind the fleet's on-time renewals. Alone, and
through the real app (its early refusal and its admission) over a real store."""
import threading
import time
import types

import pytest
from real_api import memory_replica
from werkzeug.test import Client

from shepherd_ha.api.app import create_app
from shepherd_ha.api.flow_control import LATE, SYSTEM, Classification, FlowControl, Rejected
from shepherd_ha.controllers.node_lifecycle import NodeLifecycleController
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.model.node_lease import lease_age, renewal_late_after
from shepherd_ha.model.times import format_micro_time
from tests.waiting import wait_for
from test_early_refusal import fill

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
MERGE = {"Content-Type": "application/merge-patch+json"}


class Ages:
    def __init__(self, **ages):
        self.ages, self.asked = ages, []

    def __call__(self, node):
        self.asked.append(node)
        return self.ages.get(node)


def flow_with(ages, queue_wait=0.0):
    flow = FlowControl(max_inflight=8, queue_wait=queue_wait, late_after=7.5)
    flow.lease_age = ages
    return flow


def renewal(node):
    return Classification(SYSTEM, lease=node)


def test_the_late_threshold_is_the_controllers_at_risk_point():
    settings = ControllerSettings(node_lease_interval=10.0, node_grace_period=40.0)
    store = types.SimpleNamespace(clock=time.monotonic)
    assert NodeLifecycleController(store, settings=settings).at_risk_after == renewal_late_after(10.0, 40.0)
    assert renewal_late_after(5.0, 15.0) == 7.5
    assert renewal_late_after(10.0, 40.0) == 17.5
    lease = {"spec": {"renewTime": "2026-12-06T01:00:00.250000Z"}}
    assert lease_age(lease, 1796518810.25) == pytest.approx(10.0)
    assert lease_age({"spec": {}}, time.time()) is None and lease_age(None, time.time()) is None


def test_only_renewals_of_node_leases_are_candidates():
    flow = FlowControl()
    assert flow.classify("PATCH", LEASES + "/n1", {}).lease == "n1"
    assert flow.classify("PUT", LEASES + "/n1", {}).lease == "n1"
    assert flow.classify("POST", LEASES, {}).lease is None            # a first lease: on time by definition
    assert flow.classify("PATCH", "/api/v1/nodes/n1/status", {}).lease is None
    assert flow.classify("PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/n1", {}).level != SYSTEM


def test_a_late_renewal_gets_a_late_seat_while_every_system_seat_is_busy():
    ages = Ages(late=20.0, fresh=5.0)
    flow = flow_with(ages, queue_wait=0.05)
    fill(flow.levels[SYSTEM])
    ticket = flow.admit(renewal("late"))
    assert flow.snapshot()[LATE]["inFlight"] == 1
    with pytest.raises(Rejected) as refused:
        flow.admit(renewal("fresh"))                 # on time: its level, system, is full
    assert refused.value.level == SYSTEM
    with pytest.raises(Rejected):
        flow.admit(renewal("unknown"))               # no lease stored here: not known to be late
    assert flow.refuse_if_full(renewal("late")) is None
    assert flow.refuse_if_full(renewal("fresh")).level == SYSTEM
    ticket.release()
    assert flow.snapshot()[LATE]["inFlight"] == 0


def test_the_lease_is_looked_at_only_while_the_system_level_is_busy():
    ages = Ages(late=20.0)
    flow = flow_with(ages)
    ticket = flow.admit(renewal("late"))
    assert flow.snapshot()[SYSTEM]["inFlight"] == 1 and flow.snapshot()[LATE]["dispatched"] == 0
    assert ages.asked == []
    ticket.release()


def late_level_full():
    """(flow, late level, tickets holding its seats) with system busy and late full."""
    flow = flow_with(Ages(a=30.0, c=30.0))
    fill(flow.levels[SYSTEM])
    late = flow.levels[LATE]
    late.queue_length = 0
    return flow, late, [flow.admit(renewal("a")) for _ in range(late.seats)]


def test_late_seats_are_bounded_and_a_renewal_beyond_them_is_the_system_levels():
    flow, late, held = late_level_full()
    with pytest.raises(Rejected) as refused:
        flow.admit(renewal("c"))
    assert refused.value.level == SYSTEM, "late has no room: the renewal is the system level's, as before"
    assert late.in_flight == late.seats and sum(late.rejected.values()) == 0
    for t in held:
        t.release()


def test_late_renewals_beyond_the_late_levels_room_queue_in_system_as_before():
    flow = flow_with(Ages(a=30.0, b=30.0, c=30.0, d=30.0), queue_wait=5.0)
    system, late = flow.levels[SYSTEM], flow.levels[LATE]
    for _ in range(system.seats):
        assert system.acquire(0) == (True, None)
    held = [flow.admit(renewal("a"))]                # late's only seat (max_inflight 8)
    assert late.in_flight == late.seats == 1
    waiter = threading.Thread(target=lambda: held.append(flow.admit(renewal("b"))), daemon=True)
    waiter.start()                                   # late's queue
    assert wait_for("b queued in late", lambda: late.queued == 1, 5)
    third = threading.Thread(target=lambda: held.append(flow.admit(renewal("c"))), daemon=True)
    third.start()                                    # late is full: c waits in system's queue, not refused
    assert wait_for("c queued in system", lambda: system.queued == 1, 5)
    system.release()                                 # a system seat frees: c takes it
    held[0].release()                                # a is done: its late seat passes to b
    third.join(5)
    waiter.join(5)
    assert len(held) == 3
    for t in held[1:]:
        t.release()
    for _ in range(system.seats - 1):
        system.release()
    assert all(level["inFlight"] == 0 for level in flow.snapshot().values())


def test_a_late_level_filled_since_it_was_chosen_sends_the_renewal_to_system_uncounted():
    flow, late, held = late_level_full()
    late.has_room = lambda timeout: True             # as if another thread took the last seat meanwhile
    with pytest.raises(Rejected) as refused:
        flow.admit(renewal("c"))
    assert refused.value.level == SYSTEM and sum(late.rejected.values()) == 0
    for t in held:
        t.release()


def test_a_failing_age_reader_leaves_the_renewal_in_its_queue():
    def broken(node):
        raise RuntimeError("store gone")
    flow = flow_with(broken)
    fill(flow.levels[SYSTEM])
    with pytest.raises(Rejected) as refused:
        flow.admit(renewal("n1"))
    assert refused.value.level == SYSTEM and flow.lease_age_failures == 1


def test_without_a_threshold_nothing_is_late():
    flow = FlowControl(max_inflight=8, queue_wait=0.0)
    flow.lease_age = Ages(n1=3600.0)
    fill(flow.levels[SYSTEM])
    with pytest.raises(Rejected):
        flow.admit(renewal("n1"))


def test_the_server_takes_its_threshold_from_the_lease_interval_and_grace_period():
    values = {"max_requests_inflight": 64, "max_watches": 16, "request_queue_wait": 1.0,
              "node_lease_interval": 10.0, "node_grace_period": 40.0}
    assert FlowControl.from_values(values).late_after == 17.5


def lease(node, renewed):
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": node},
            "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": format_micro_time(renewed)}}


def test_through_the_app_a_late_nodes_renewal_is_served_and_an_on_time_one_refused():
    replica = memory_replica()
    flow = FlowControl(max_inflight=8, queue_wait=0.0, late_after=7.5)
    client = Client(create_app(replica, flow=flow))
    for node, renewed in (("late", time.time() - 20), ("fresh", time.time())):
        resp = client.post(LEASES, json=lease(node, renewed))
        assert resp.status_code == 201, resp.get_json()
        resp.close()          # gives its seat back
    fill(flow.levels[SYSTEM])
    patch = {"spec": {"renewTime": format_micro_time()}}
    served = client.patch(LEASES + "/late", json=patch, headers=MERGE)
    assert served.status_code == 200, served.get_json()
    assert lease_age(served.get_json(), time.time()) < 5
    served.close()
    refused = client.patch(LEASES + "/fresh", json=patch, headers=MERGE)
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert "priority level system" in refused.get_json()["message"]
    assert flow.snapshot()[LATE]["dispatched"] == 1 and flow.snapshot()[LATE]["inFlight"] == 0
