"""The scheduler controller against an in-memory store: bindings, batching, accounting
across a batch, unschedulable pods (condition, event, retries), lost races, no-ops."""
import collections

from shepherd_ha.controllers.scheduler import BATCH_SIZE, controllers
from shepherd_ha.controllers.scheduling import filters as F
from shepherd_ha.controllers.scheduling import scorers as S
from shepherd_ha.controllers.settings import ControllerSettings

from test_scheduler_support import Harness, node, pod


def placement(h, names):
    return collections.Counter(h.node_of(n) for n in names)


def test_pending_pod_is_bound_with_condition_and_event():
    h = Harness()
    h.create("nodes", node("n1"))
    h.create("pods", pod("web"))
    before = h.pod("web")
    assert h.run() == ["bound default/web to n1"]
    after = h.pod("web")
    assert after["spec"]["nodeName"] == "n1"
    assert h.condition("web")["status"] == "True"
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["spec"]["containers"] == before["spec"]["containers"], "only nodeName changes in the spec"
    assert after["status"]["phase"] == "Pending", "the agent, not the scheduler, moves the phase on"
    [event] = h.events("Scheduled")
    assert event["message"] == "Successfully assigned default/web to n1"
    assert event["type"] == "Normal" and event["involvedObject"]["uid"] == before["metadata"]["uid"]
    assert event["involvedObject"]["kind"] == "Pod"


def test_a_binding_is_one_change_of_the_pod_for_watchers_and_mirrors():
    h = Harness()
    h.create("nodes", node("n1"))
    h.create("pods", pod("web"))
    revision = h.store.watch_log.last_revision
    assert h.run() == ["bound default/web to n1"]
    changes = [c for c in h.store.watch_log.since(revision) if c.resource == "pods"]
    assert len(changes) == 1, changes
    assert changes[0].object["spec"]["nodeName"] == "n1" and changes[0].previous["spec"].get("nodeName") is None
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in changes[0].object["status"]["conditions"])


def test_pods_already_bound_or_finished_are_left_alone():
    h = Harness()
    h.create("nodes", node("n1"), node("n2"))
    h.create("pods", pod("placed", node_name="n2"), pod("done", phase="Succeeded"))
    revision = h.store.revision()
    assert h.run() == []
    assert h.store.revision() == revision
    assert h.node_of("placed") == "n2" and h.node_of("done") is None


def test_many_pending_pods_are_bound_in_one_write_many():
    h = Harness()
    h.create("nodes", *[node("n%d" % i, cpu="64", memory="256Gi") for i in range(5)])
    h.create("pods", *[pod("p%03d" % i, cpu="100m") for i in range(120)])
    sentences = h.run()
    assert h.write_many_calls == [120], "one write_many for the whole pass"
    assert len(sentences) == 1 and sentences[0].startswith("bound 120 pods (default/p000 to ")
    assert all(h.node_of("p%03d" % i) for i in range(120))
    assert sorted(placement(h, ["p%03d" % i for i in range(120)]).values()) == [24] * 5, "equal nodes share"
    assert len(h.events("Scheduled")) == 120


def test_a_pass_takes_at_most_batch_size_pods():
    h = Harness(batch_size=10)
    h.create("nodes", node("n1", cpu="64", memory="256Gi", pods="500"))
    h.create("pods", *[pod("p%02d" % i) for i in range(25)])
    h.run()
    assert h.write_many_calls == [10, 10, 5]
    assert BATCH_SIZE >= 500


def test_bindings_earlier_in_a_pass_count_for_later_pods():
    # Each pod fits either node alone, but two do not fit on one: they must go to different nodes.
    h = Harness()
    h.create("nodes", node("n1", cpu="1", memory="1Gi"), node("n2", cpu="1", memory="1Gi"))
    h.create("pods", pod("a", cpu="600m"), pod("b", cpu="600m"))
    h.run()
    assert h.write_many_calls == [2]
    assert {h.node_of("a"), h.node_of("b")} == {"n1", "n2"}


def test_second_pod_of_a_pass_that_fits_nowhere_is_unschedulable():
    h = Harness()
    h.create("nodes", node("n1", cpu="1", memory="1Gi"))
    h.create("pods", pod("a", memory="700Mi"), pod("b", memory="700Mi"))
    sentences = h.run()
    assert h.node_of("a") == "n1" and h.node_of("b") is None
    assert sentences == ["bound default/a to n1; default/b is unschedulable: 0/1 nodes available: "
                         "1 Insufficient memory"]
    assert h.write_many_calls == [2], "the binding and the condition share the pass's Raft entry"


def test_unschedulable_pod_gets_condition_and_warning_event_with_reasons():
    h = Harness()
    h.create("nodes", node("n1", memory="1Gi"), node("n2", memory="1Gi"), node("n3", ready="False"))
    h.create("pods", pod("big", memory="2Gi"))
    h.run()
    message = "0/3 nodes available: 2 Insufficient memory, 1 node(s) were NotReady"
    cond = h.condition("big")
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", message)
    assert h.pod("big")["status"]["phase"] == "Pending"
    [event] = h.events("FailedScheduling")
    assert (event["type"], event["message"], event["count"]) == ("Warning", message, 1)
    assert list(h.scheduler.sentences) == ["default/big is unschedulable: " + message]


def test_nothing_is_written_again_while_nothing_changes():
    h = Harness()
    h.create("nodes", node("n1", memory="1Gi"))
    h.create("pods", pod("big", memory="2Gi"))
    h.run()
    revision = h.store.revision()
    calls = len(h.write_many_calls)
    h.scheduler.resync()                   # a periodic resync retries every pending pod
    h.run()
    h.update("pods", dict(h.pod("big"), status=dict(h.pod("big")["status"], message="x")), subresource="status")
    revision = h.store.revision()
    assert h.run() == [], "a status-only change of a pending pod is not a reason to retry"
    n1 = h.store.get("nodes", "", "n1")
    h.update("nodes", dict(n1, status=dict(n1["status"], usage={"cpu": "1"})), subresource="status")
    revision = h.store.revision()
    h.scheduler.resync()
    assert h.run() == []
    assert h.store.revision() == revision, "same message: the condition is not rewritten, no event is added"
    assert len(h.write_many_calls) == calls
    assert h.events("FailedScheduling")[0]["count"] == 1


def test_unschedulable_pod_is_retried_when_a_node_is_added():
    h = Harness()
    h.create("nodes", node("n1", memory="1Gi"))
    h.create("pods", pod("big", memory="2Gi"))
    h.run()
    assert h.node_of("big") is None
    h.create("nodes", node("n2", memory="4Gi"))
    assert h.run() == ["bound default/big to n2"]
    assert h.condition("big")["status"] == "True"


def test_unschedulable_pod_message_follows_the_nodes():
    h = Harness()
    h.create("nodes", node("n1", memory="1Gi"))
    h.create("pods", pod("big", memory="2Gi"))
    h.run()
    first = h.condition("big")
    h.create("nodes", node("n2", ready="False", memory="4Gi"))
    h.run()
    cond = h.condition("big")
    assert cond["message"] == "0/2 nodes available: 1 Insufficient memory, 1 node(s) were NotReady"
    assert cond["lastTransitionTime"] == first["lastTransitionTime"], "still False: no transition"
    assert len(h.events("FailedScheduling")) == 2
    n2 = h.store.get("nodes", "", "n2")
    ready = dict(n2["status"]["conditions"][0], status="True")
    h.update("nodes", dict(n2, status=dict(n2["status"], conditions=[ready])), subresource="status")
    assert h.run() == ["bound default/big to n2"]


def test_unschedulable_pod_is_retried_when_a_bound_pod_is_deleted_or_finishes():
    h = Harness()
    h.create("nodes", node("n1", cpu="2", memory="8Gi"))
    h.create("pods", pod("first", cpu="1", node_name="n1"), pod("second", cpu="1", node_name="n1",
                                                                 phase="Running"))
    h.create("pods", pod("waiting", cpu="1"), pod("later", cpu="1"))
    h.run()
    assert h.condition("waiting")["message"] == "0/1 nodes available: 1 Insufficient cpu"
    h.delete("pods", "first", "default")
    h.run()
    placed = [n for n in ("waiting", "later") if h.node_of(n) == "n1"]
    assert len(placed) == 1, "the freed cpu takes exactly one of the waiting pods"
    other = ({"waiting", "later"} - set(placed)).pop()
    second = h.pod("second")
    h.update("pods", dict(second, status=dict(second["status"], phase="Succeeded")), subresource="status")
    assert h.run() == ["bound default/%s to n1" % other]


def test_a_cordoned_node_gets_no_pods_and_uncordoning_retries():
    h = Harness()
    h.create("nodes", node("n1", unschedulable=True))
    h.create("pods", pod("p"))
    h.run()
    assert h.condition("p")["message"] == "0/1 nodes available: 1 node(s) were unschedulable"
    n1 = h.store.get("nodes", "", "n1")
    h.update("nodes", dict(n1, spec={"unschedulable": False}))
    h.run()
    assert h.node_of("p") == "n1"


def test_node_selector_and_host_ports():
    h = Harness()
    h.create("nodes", node("ssd", labels={"disk": "ssd"}), node("hdd"))
    h.create("pods", pod("fast", selector={"disk": "ssd"}), pod("port-1", host_port=80, selector={"disk": "ssd"}),
             pod("port-2", host_port=80, selector={"disk": "ssd"}))
    h.run()
    assert h.node_of("fast") == "ssd" and h.node_of("port-1") == "ssd"
    assert h.condition("port-2")["message"] == ("0/2 nodes available: 1 node(s) didn't have free ports for the "
                                                "requested pod ports, 1 node(s) didn't match Pod's node "
                                                "affinity/selector")


def test_pods_of_one_owner_spread_over_nodes():
    h = Harness()
    h.create("nodes", node("n1"), node("n2"), node("n3"))
    h.create("pods", pod("other-1", node_name="n1", owner="other"), pod("other-2", node_name="n1", owner="other"))
    names = ["web-%d" % i for i in range(6)]
    h.create("pods", *[pod(n, owner="web") for n in names])
    h.run()
    assert placement(h, names) == {"n1": 2, "n2": 2, "n3": 2}


def test_pods_without_owner_spread_by_load():
    h = Harness()
    h.create("nodes", node("n1"), node("n2"), node("n3"))
    names = ["p%d" % i for i in range(9)]
    h.create("pods", *[pod(n) for n in names])
    h.run()
    assert placement(h, names) == {"n1": 3, "n2": 3, "n3": 3}


def test_filter_and_scorer_lists_can_be_extended():
    def not_on_odd(p, n):
        return "node(s) were odd" if n.labels.get("odd") == "yes" else None

    def prefer_last(p, n):
        return 100.0 if n.name == "n4" else 0.0
    h = Harness(filters=F.FILTERS + [not_on_odd], scorers=[prefer_last])
    h.create("nodes", node("n1", labels={"odd": "yes"}), node("n2"), node("n3", labels={"odd": "yes"}), node("n4"))
    h.create("pods", pod("a"), pod("b"))
    h.run()
    assert h.node_of("a") == "n4" and h.node_of("b") == "n4"
    h2 = Harness(filters=[not_on_odd])
    h2.create("nodes", node("n1", labels={"odd": "yes"}))
    h2.create("pods", pod("a"))
    h2.run()
    assert h2.condition("a")["message"] == "0/1 nodes available: 1 node(s) were odd"
    assert F.FILTERS[-1] is not not_on_odd and len(S.SCORERS) == 3, "module lists are not changed"


def test_lost_race_requeues_only_that_pod():
    h = Harness()
    h.create("nodes", node("n1"))
    h.create("pods", pod("a"), pod("b"), pod("c"))
    real = h.store.write_many
    raced = []

    def racing(writes):
        if not raced:                       # someone changes pod b between the pass's read and its write
            b = h.pod("b")
            raced.append(h.update("pods", dict(b, metadata=dict(b["metadata"], labels={"touched": "yes"}))))
        return real(writes)
    h.store.write_many = racing
    h.informer.pump()
    h.scheduler.process_one(timeout=0)
    assert h.node_of("a") == "n1" and h.node_of("c") == "n1" and h.node_of("b") is None
    assert list(h.scheduler.sentences)[-1].endswith("re-queued default/b after a lost race")
    h.run()
    assert h.node_of("b") == "n1"
    assert h.pod("b")["metadata"]["labels"] == {"touched": "yes"}, "the other writer's change is kept"
    assert len(h.events("Scheduled")) == 3


def test_deleted_pending_pod_is_forgotten():
    h = Harness()
    h.create("nodes", node("n1", memory="1Gi"))
    h.create("pods", pod("big", memory="2Gi"))
    h.run()
    assert ("default", "big") in h.scheduler.unschedulable
    h.delete("pods", "big", "default")
    h.run()
    assert not h.scheduler.unschedulable


def test_without_any_node_pods_wait_and_nothing_is_written():
    h = Harness()
    h.create("pods", pod("p"))
    revision = h.store.revision()
    assert h.run() == ["1 pods wait for a node: none is registered"]
    assert h.store.revision() == revision
    h.create("nodes", node("n1"))
    assert h.run() == ["bound default/p to n1"]


def test_writes_of_a_deposed_scheduler_are_fenced():
    h = Harness()
    h.create("nodes", node("n1"))
    h.store.apply({"type": "claim", "term": 5, "replica": "newer"})
    h.create("pods", pod("p"))
    h.informer.pump()
    h.scheduler.process_one(timeout=0)
    assert h.node_of("p") is None
    assert h.store.fsm.fenced_rejections == 1


def test_controllers_factory_uses_the_settings():
    h = Harness()
    [scheduler] = controllers(h.store, h.recorder, ControllerSettings(resync_period=7.0))
    assert scheduler.name == "scheduler" and scheduler.resync_period == 7.0


def test_a_pass_planned_while_the_last_is_being_written_counts_its_bindings():
    h = Harness()
    h.create("nodes", node("n1", cpu="1"), node("n2", cpu="1"))
    h.create("pods", pod("a", cpu="600m"), pod("b", cpu="600m"), pod("c", cpu="600m"))
    first = h.scheduler.plan([("default", "a")])            # its writes are not in the store yet
    second = h.scheduler.plan([("default", "b"), ("default", "c")])
    assert [p[2] for p in first.plans + second.plans][:2] == ["n1", "n2"] or \
        [p[2] for p in first.plans + second.plans][:2] == ["n2", "n1"]
    assert second.plans[1][0] == "unschedulable", "c fits nowhere once a and b are counted"
    h.scheduler.commit(first)
    h.scheduler._forget_assumed(first)
    h.scheduler.commit(second)
    h.scheduler._forget_assumed(second)
    assert {h.node_of("a"), h.node_of("b")} == {"n1", "n2"} and h.node_of("c") is None
    assert h.scheduler._assumed == {}


def test_an_assumed_pod_deleted_before_its_write_frees_its_room():
    h = Harness()
    h.create("nodes", node("n1", cpu="1"))
    h.create("pods", pod("a", cpu="600m"), pod("b", cpu="600m"))
    first = h.scheduler.plan([("default", "a")])
    h.delete("pods", "a", "default")
    second = h.scheduler.plan([("default", "b")])
    assert second.plans == [("bind", ("default", "b"), "n1")]
    h.scheduler.commit(first)          # a is gone: its binding is refused (NotFound)
    h.scheduler.commit(second)
    assert h.node_of("b") == "n1"


def test_running_scheduler_binds_everything_without_overcommitting():
    import threading
    import time
    h = Harness(clock=time.monotonic, batch_size=40)
    h.create("nodes", *[node("n%d" % i, cpu="2", memory="4Gi", pods="30") for i in range(9)])
    stop = threading.Event()
    threads = h.scheduler.start(stop)
    informer = threading.Thread(target=h.informer.run, args=(stop,), daemon=True)
    informer.start()
    try:
        for batch in range(6):
            h.create("pods", *[pod("p%d-%d" % (batch, i), cpu="100m", memory="128Mi") for i in range(30)])
        names = ["p%d-%d" % (b, i) for b in range(6) for i in range(30)]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            placed = [h.node_of(n) for n in names]
            unsched = [n for n in names if h.condition(n) and h.condition(n)["status"] == "False"]
            if all(placed) or len([p for p in placed if p]) + len(unsched) == len(names):
                break
            time.sleep(0.02)
    finally:
        stop.set()
        for t in threads + [informer]:
            t.join(2)
    placed = collections.Counter(h.node_of(n) for n in names)
    assert None not in placed, placed
    assert max(placed.values()) <= 20, "2 cpu / 100m: at most 20 pods per node"
    assert sum(placed.values()) == 180
    assert len(h.write_many_calls) < 180 / 2, "passes are batched"
    assert "writer" in " ".join(t.name for t in threads)
    assert h.scheduler._assumed == {}


def test_bindings_with_an_unknown_outcome_keep_their_room_and_are_written_again():
    from shepherd_ha.store.raft_node import Unavailable
    h = Harness()
    h.create("nodes", node("n1", cpu="1"), node("n2", cpu="1"))
    h.create("pods", pod("a", cpu="600m"))
    real = h.store.write_many
    calls = []

    def lost_answer(writes):          # no answer: the write may or may not apply (here it does not)
        calls.append(len(writes))
        if len(calls) == 1:
            raise Unavailable("write not confirmed", "unknown")
        return real(writes)
    h.store.write_many = lost_answer
    h.informer.pump()
    h.scheduler.process_one(timeout=0)
    assert h.node_of("a") is None
    [(uid, first_node)] = list(h.scheduler._assumed)
    h.create("pods", pod("b", cpu="600m"))
    h.clock.now += 1.0                 # a's retry backoff is over, well within the linger time
    h.run()
    assert h.node_of("a") == first_node, "the same decision is written again"
    assert h.node_of("b") not in (None, first_node), "b never counted a's room as free"


def test_lingering_assumptions_expire():
    h = Harness()
    h.create("nodes", node("n1", cpu="1"))
    h.create("pods", pod("a", cpu="600m"))
    job = h.scheduler.plan([("default", "a")])
    h.scheduler._forget_assumed(job, linger=True)      # as after a write with an unknown outcome
    h.create("pods", pod("b", cpu="600m"))
    assert h.scheduler.plan([("default", "b")]).plans[0][0] == "unschedulable", "a's room still counts"
    h.clock.now += 2 * h.store.write_timeout + 0.1      # the write never applied: a's room is free again
    assert h.scheduler.plan([("default", "b")]).plans[0] == ("bind", ("default", "b"), "n1")
    a_uid = h.pod("a")["metadata"]["uid"]
    assert (a_uid, "n1") not in h.scheduler._assumed, "expired entries are dropped"
