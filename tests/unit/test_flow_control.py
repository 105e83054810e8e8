"""Admission control (shepherd_ha/api/flow_control.py): seats per priority level, the
bounded queue, time-outs, long-running pools, exempt paths and classification."""
import threading

import pytest

from shepherd_ha.api import flow_control as fc
from shepherd_ha.api.flow_control import (BULK, LATE, LONG_RUNNING_OTHER, LONG_RUNNING_SYSTEM, STATUS, SYSTEM, WORKLOAD,
                                          Classification, FlowControl, Level, Rejected, seats_by_level)
from shepherd_ha.options import ConfigError
from tests import waiting

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1"
PODS = "/api/v1/pods"
NS_PODS = "/api/v1/namespaces/default/pods"


def wait_until(predicate, timeout=5.0):
    return waiting.wait_for("condition", predicate, timeout, interval=0.005)


class Waiter(threading.Thread):
    """acquire() on a thread: .result is (ok, reason) once it returns."""

    def __init__(self, level, timeout):
        super().__init__(daemon=True)
        self.level, self.timeout, self.result = level, timeout, None
        self.start()

    def run(self):
        self.result = self.level.acquire(self.timeout)


# ---- seats ----

def test_seats_are_shares_of_the_limit_rounded_up_at_least_one():
    assert seats_by_level(64) == {SYSTEM: 16, STATUS: 2, WORKLOAD: 44, BULK: 1, LATE: 2}
    assert seats_by_level(8) == {SYSTEM: 2, STATUS: 1, WORKLOAD: 6, BULK: 1, LATE: 1}
    assert seats_by_level(1) == {SYSTEM: 1, STATUS: 1, WORKLOAD: 1, BULK: 1, LATE: 1}


def test_a_level_runs_its_seats_at_once_and_queues_the_rest():
    level = Level("bulk", seats=2, queue_length=2)
    assert level.acquire(0) == (True, None)
    assert level.acquire(0) == (True, None)
    assert level.in_flight == 2
    waiter = Waiter(level, timeout=10)
    assert wait_until(lambda: level.queued == 1)
    assert waiter.result is None                      # still waiting: no seat
    level.release()
    waiter.join(5)
    assert waiter.result == (True, None)
    assert level.in_flight == 2 and level.queued == 0  # the seat passed on, not freed
    level.release()
    level.release()
    assert level.in_flight == 0
    assert level.snapshot()["dispatched"] == 3


def test_queued_requests_get_seats_oldest_first():
    level = Level("workload", seats=1, queue_length=3)
    level.acquire(0)
    order = []
    waiters = []
    for i in range(3):
        w = Waiter(level, timeout=10)
        waiters.append(w)
        assert wait_until(lambda: level.queued == i + 1)
    for _ in range(3):
        level.release()
        assert wait_until(lambda: any(w.result and w not in order for w in waiters))
        order.extend(w for w in waiters if w.result and w not in order)
    assert order == waiters


def test_a_full_queue_rejects_at_once():
    level = Level("bulk", seats=1, queue_length=1)
    level.acquire(0)
    waiter = Waiter(level, timeout=10)
    assert wait_until(lambda: level.queued == 1)
    assert level.acquire(30) == (False, "queue-full")  # would block 30 s if it queued
    assert level.rejected["queue-full"] == 1
    level.release()
    waiter.join(5)
    assert waiter.result == (True, None)


def test_a_wait_that_runs_out_is_a_rejection_and_leaves_the_queue():
    level = Level("bulk", seats=1, queue_length=4)
    level.acquire(0)
    assert level.acquire(0.05) == (False, "time-out")
    assert level.queued == 0 and level.rejected["time-out"] == 1
    level.release()
    assert level.in_flight == 0                       # the seat is free, not handed to a ghost
    assert level.acquire(0) == (True, None)


def test_seats_hold_under_concurrency():
    level = Level("workload", seats=3, queue_length=5)
    lock = threading.Lock()
    state = {"now": 0, "max": 0, "ok": 0, "refused": 0}

    def worker():
        for _ in range(30):
            ok, _ = level.acquire(0.5)
            if not ok:
                with lock:
                    state["refused"] += 1
                continue
            with lock:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
                state["ok"] += 1
            with lock:
                state["now"] -= 1
            level.release()
    threads = [threading.Thread(target=worker) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert state["max"] <= 3
    assert state["ok"] + state["refused"] == 12 * 30
    assert level.in_flight == 0 and level.queued == 0
    assert level.dispatched == state["ok"]


# ---- admission ----

def test_a_saturated_bulk_level_leaves_system_seats_free():
    flow = FlowControl(max_inflight=8, queue_wait=0.05)
    bulk = Classification(BULK)
    held = [flow.admit(bulk)]                          # its one seat
    with pytest.raises(Rejected) as exc:
        flow.admit(bulk)
    assert exc.value.level == BULK and exc.value.reason == "time-out"
    lease = flow.classify("PATCH", LEASE, {})
    assert lease == Classification(SYSTEM, lease="n1")
    tickets = [flow.admit(lease), flow.admit(lease)]   # both system seats, at once
    for t in tickets + held:
        t.release()
    assert all(s["inFlight"] == 0 for s in flow.snapshot().values())


def test_a_fleet_holding_every_system_seat_still_lets_the_replica_status_through():
    flow = FlowControl(max_inflight=64, queue_wait=0.05)
    lease = flow.classify("PATCH", LEASE, {})
    held = [flow.admit(lease) for _ in range(flow.levels[SYSTEM].seats)]
    with pytest.raises(Rejected) as exc:
        flow.admit(lease)
    assert exc.value.level == SYSTEM
    status = flow.classify("GET", "/shepherd/v1/replica", {})
    assert status == Classification(STATUS)
    tickets = [flow.admit(status), flow.admit(flow.classify("GET", "/metrics", {}))]   # both status seats
    for t in tickets + held:
        t.release()
    assert all(s["inFlight"] == 0 for s in flow.snapshot().values())


def test_rejection_says_which_limit_and_what_to_do():
    flow = FlowControl(max_inflight=8, queue_wait=0, replica_id="r2")
    flow.admit(Classification(BULK))
    with pytest.raises(Rejected) as exc:
        flow.admit(Classification(BULK))
    message = str(exc.value)
    assert "priority level bulk" in message and "on replica r2" in message
    assert "--max-requests-inflight" in message and "retry after 2 s" in message
    assert "label or field selector" in message
    assert exc.value.retry_after == 2


def test_exempt_paths_need_no_seat():
    flow = FlowControl(max_inflight=1, max_watches=1, queue_wait=0)
    for level in flow.levels.values():
        level.acquire(0)
    for path in ("/healthz", "/readyz"):
        c = flow.classify("GET", path, {})
        assert c == Classification(None)
        flow.admit(c).release()                       # no Rejected, nothing to give back
    with pytest.raises(Rejected):
        flow.admit(flow.classify("GET", "/metrics", {}))


def test_long_running_requests_hold_a_slot_not_a_seat():
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=0)
    assert flow.pools[LONG_RUNNING_SYSTEM].seats == 3 and flow.pools[LONG_RUNNING_OTHER].seats == 1
    watch = flow.classify("GET", NS_PODS, {"watch": "1", "resourceVersion": "10"})
    assert watch == Classification(WORKLOAD, LONG_RUNNING_OTHER)
    ticket = flow.admit(watch)
    ticket.release_seat()                             # the watch started: its seat goes back
    snap = flow.snapshot()
    assert snap[WORKLOAD]["inFlight"] == 0 and snap[LONG_RUNNING_OTHER]["inFlight"] == 1
    with pytest.raises(Rejected) as exc:
        flow.admit(watch)
    assert exc.value.reason == "concurrency-limit" and "--max-watches" in str(exc.value)
    agent = flow.classify("GET", PODS, {"watch": "1", "fieldSelector": "spec.nodeName=n1", "resourceVersion": "9"})
    flow.admit(agent)                                 # agents' watches have their own pool
    ticket.release_slot()
    ticket.release()                                  # given back once only
    assert flow.snapshot()[LONG_RUNNING_OTHER]["inFlight"] == 0
    flow.admit(watch)


def test_a_refused_seat_gives_the_slot_back():
    flow = FlowControl(max_inflight=8, max_watches=4, queue_wait=0)
    flow.admit(Classification(BULK))
    big_watch = flow.classify("GET", PODS, {"watch": "1"})
    assert big_watch == Classification(BULK, LONG_RUNNING_OTHER)   # starts with a list of every pod
    with pytest.raises(Rejected):
        flow.admit(big_watch)
    assert flow.snapshot()[LONG_RUNNING_OTHER]["inFlight"] == 0


def test_zero_turns_a_limit_off():
    flow = FlowControl(max_inflight=0, max_watches=0)
    tickets = [flow.admit(flow.classify("GET", PODS, {})) for _ in range(100)]
    tickets += [flow.admit(flow.classify("GET", PODS, {"watch": "1"})) for _ in range(100)]
    assert flow.snapshot() == {}
    assert flow.threads_needed() is None


def test_threads_cover_every_seat_queue_and_slot():
    flow = FlowControl(max_inflight=8, max_watches=4)
    # seats 2+1+6+1+1, queues as long, 3+1 long-running slots, spares
    assert flow.threads_needed() == 2 * 11 + 4 + fc.SPARE_THREADS
    assert FlowControl().threads_needed() == 2 * 65 + 4096 + fc.SPARE_THREADS
    assert FlowControl().threads_without_watches() == 2 * 65 + fc.SPARE_THREADS


def test_options_are_checked():
    values = {"max_requests_inflight": 32, "max_watches": 10, "request_queue_wait": 0.5}
    flow = FlowControl.from_values(values, "r1")
    assert flow.levels[SYSTEM].seats == 8 and flow.queue_wait == 0.5
    for key in values:
        with pytest.raises(ConfigError, match="--%s must be 0 or more" % key.replace("_", "-")):
            FlowControl.from_values(dict(values, **{key: -1}))


# ---- classification ----

ANONYMOUS = [
    ("PATCH", LEASE, {}, SYSTEM, None),
    ("PUT", LEASE, {}, SYSTEM, None),
    ("GET", LEASE, {}, SYSTEM, None),
    ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {}, SYSTEM, None),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {}, BULK, None),
    ("PATCH", "/apis/coordination.k8s.io/v1/namespaces/default/leases/x", {}, WORKLOAD, None),
    ("POST", "/api/v1/nodes", {}, SYSTEM, None),
    ("PATCH", "/api/v1/nodes/n1/status", {}, SYSTEM, None),
    ("GET", "/api/v1/nodes/n1", {"resourceVersion": "0"}, SYSTEM, None),
    ("GET", "/api/v1/nodes", {}, BULK, None),
    ("GET", "/api/v1/nodes", {"labelSelector": "zone=a"}, WORKLOAD, None),
    ("GET", PODS, {}, BULK, None),
    ("GET", NS_PODS, {"resourceVersion": "0"}, BULK, None),
    ("GET", NS_PODS, {"labelSelector": "app=web"}, WORKLOAD, None),
    ("GET", PODS, {"fieldSelector": "spec.nodeName=n1"}, SYSTEM, None),    # an agent's own pods
    ("GET", "/api/v1/namespaces/default/events", {}, BULK, None),
    ("GET", "/apis/apps/v1/deployments", {}, WORKLOAD, None),             # a small collection
    ("POST", NS_PODS, {}, WORKLOAD, None),
    ("PATCH", "/api/v1/namespaces/default/pods/p/status", {}, WORKLOAD, None),
    ("DELETE", "/api/v1/namespaces/default/pods/p", {}, WORKLOAD, None),
    ("GET", PODS, {"watch": "1", "fieldSelector": "spec.nodeName=n1", "resourceVersion": "7"},
     SYSTEM, LONG_RUNNING_SYSTEM),
    ("GET", PODS, {"watch": "true", "resourceVersion": "7"}, WORKLOAD, LONG_RUNNING_OTHER),
    ("GET", PODS, {"watch": "1", "resourceVersion": "0"}, BULK, LONG_RUNNING_OTHER),
    ("GET", PODS, {"watch": "0"}, BULK, None),                             # watch=0 is a list
    ("GET", PODS, {"watch": "maybe"}, BULK, None),                         # ... as the API reads it
    ("GET", "/api/v1/namespaces/default/pods/p/log", {"follow": "true"}, WORKLOAD, LONG_RUNNING_OTHER),
    ("GET", "/api/v1/namespaces/default/pods/p/log", {}, WORKLOAD, None),
    ("GET", "/metrics", {}, STATUS, None),
    ("GET", "/shepherd/v1/replica", {}, STATUS, None),
    ("GET", "/shepherd/v1/cluster", {}, WORKLOAD, None),
    ("GET", "/version", {}, STATUS, None),
    ("GET", "/no/such/path", {}, WORKLOAD, None),
]


@pytest.mark.parametrize("method,path,args,level,pool", ANONYMOUS)
def test_without_tokens_paths_decide(method, path, args, level, pool):
    found = FlowControl().classify(method, path, args)
    assert (found.level, found.long_running) == (level, pool)
    # a renewal of a node lease says whose (late ones may take a seat of their own)
    assert found.lease == ("n1" if path == LEASE and method in ("PATCH", "PUT") else None)


def test_with_tokens_only_agents_get_system_seats_for_liveness():
    flow = FlowControl()
    agent, admin = ("system:nodes",), ("system:masters",)
    assert flow.classify("PATCH", LEASE, {}, agent, True) == Classification(SYSTEM, lease="n1")
    assert flow.classify("PATCH", LEASE, {}, admin, True) == Classification(WORKLOAD)
    assert flow.classify("PATCH", "/api/v1/nodes/n1/status", {}, agent, True) == Classification(SYSTEM)
    assert flow.classify("PATCH", "/api/v1/nodes/n1/status", {}, (), True) == Classification(WORKLOAD)
    # an agent's watch is an agent's watch whatever it selects ...
    watch = {"watch": "1", "resourceVersion": "5"}
    assert flow.classify("GET", PODS, watch, agent, True) == Classification(SYSTEM, LONG_RUNNING_SYSTEM)
    assert flow.classify("GET", PODS, dict(watch, fieldSelector="spec.nodeName=n1"), admin, True) == \
        Classification(WORKLOAD, LONG_RUNNING_OTHER)
    # ... but a list of every pod is bulk, whoever asks
    assert flow.classify("GET", PODS, {}, agent, True) == Classification(BULK)
    assert flow.classify("GET", PODS, {"watch": "1"}, agent, True) == Classification(BULK, LONG_RUNNING_SYSTEM)
    assert flow.classify("GET", "/healthz", {}, (), True) == Classification(None)


def test_server_threads_follow_the_limits():
    from shepherd_ha.cli.server import LEGACY_THREADS, api_threads
    flow = FlowControl(max_inflight=8, max_watches=4)
    needed = flow.threads_needed()
    assert api_threads({"api_threads": 0}, flow) == needed
    assert api_threads({"api_threads": needed + 10}, flow) == needed + 10
    with pytest.raises(ConfigError, match="--api-threads %d is fewer than flow control needs \\(%d" % (needed - 1,
                                                                                                      needed)):
        api_threads({"api_threads": needed - 1}, flow)
    with pytest.raises(ConfigError, match="--api-threads must be 0"):
        api_threads({"api_threads": -1}, flow)
    unbounded = FlowControl(max_inflight=0, max_watches=4)
    assert api_threads({"api_threads": 0}, unbounded) == LEGACY_THREADS
    assert api_threads({"api_threads": 5}, unbounded) == 5


def test_one_user_holds_at_most_its_watches_and_agents_are_not_counted():
    flow = FlowControl(max_inflight=64, max_watches=64, queue_wait=0, max_watches_per_user=2)
    watch = flow.classify("GET", NS_PODS, {"watch": "1", "resourceVersion": "10"})
    tickets = [flow.admit(watch, "alice"), flow.admit(watch, "alice")]
    with pytest.raises(Rejected) as exc:
        flow.admit(watch, "alice")
    assert exc.value.reason == "per-user" and "--max-watches-per-user" in exc.value.message
    assert flow.snapshot()[LONG_RUNNING_OTHER]["inFlight"] == 2        # the refused one gave its slot back
    flow.admit(watch, "bob")
    agent = flow.classify("GET", PODS, {"watch": "1", "fieldSelector": "spec.nodeName=n1", "resourceVersion": "9"})
    for _ in range(5):
        flow.admit(agent, "alice")                                       # agents' pool: not per user
    tickets[0].release()
    flow.admit(watch, "alice")


def test_without_tokens_the_agents_dns_proxy_and_network_watches_are_agents_watches():
    """Agents on one host share an address: counted per user (the address), four agents'
    Service, Endpoints and Node watches (5 each) were refused with 429 per-user."""
    flow = FlowControl(max_inflight=0, max_watches=64, queue_wait=0, max_watches_per_user=4)
    for i in range(4):
        for resource in ("services", "endpoints", "services", "endpoints", "nodes"):
            watch = flow.classify("GET", "/api/v1/" + resource, {"watch": "1", "resourceVersion": "5"},
                                  user_agent="shepherd-agent/0.1 (n%d)" % i)
            assert watch.long_running == LONG_RUNNING_SYSTEM
            flow.admit(watch, "127.0.0.1")
    person = flow.classify("GET", "/api/v1/services", {"watch": "1", "resourceVersion": "5"},
                           user_agent="shepherd-client/0.1")
    assert person.long_running == LONG_RUNNING_OTHER
