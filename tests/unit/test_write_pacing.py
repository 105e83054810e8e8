"""Controller writes yield to node heartbeats (controllers/write_pacing.py): paced while the
system level has requests queued or refused or nodes' heartbeats are late, faster again
once neither, then unpaced."""
import math
import threading

import pytest

from shepherd_ha.api.flow_control import SYSTEM, FlowControl
from shepherd_ha.controllers import write_pacing as wp
from shepherd_ha.controllers.replica_sets import ReplicaSetController
from shepherd_ha.controllers.scheduler import Scheduler
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.controllers.node_lifecycle import NodeLifecycleController
from shepherd_ha.controllers.write_pacing import Stopped, WritePacer
from shepherd_ha.store.raft_node import Unavailable


class World:
    """A fake clock the pacer's sleeps advance, and the system level's counters."""

    def __init__(self):
        self.now = 1000.0
        self.queued, self.refused = 0, 0
        self.refusing = False         # every look sees a new refusal
        self.slept = 0.0

    def clock(self):
        return self.now

    def sleep(self, seconds, stop=None):
        if stop is not None and stop.is_set():
            return True
        self.now += seconds
        self.slept += seconds
        return False

    def counts(self):
        if self.refusing:
            self.refused += 1
        return self.queued, self.refused

    def pacer(self):
        return WritePacer(self.counts, clock=self.clock, sleep=self.sleep)

    def paced_pacer(self):
        """A pacer that has just seen a refusal: pacing."""
        pacer = self.pacer()
        self.refused += 1
        self.now += wp.LOOK_EVERY
        pacer.take(1)
        assert pacer.pacing
        return pacer

    def floored_pacer(self):
        """A pacer that refusals at every look for 40 s have brought down to its floor."""
        pacer = self.paced_pacer()
        for _ in range(int(40 / wp.LOOK_EVERY)):
            self.refused += 1
            writes_in(self, pacer, wp.LOOK_EVERY)
        assert pacer.rate <= 1.5 * wp.MIN_RATE
        return pacer


def seconds_to_lift(writes_per_second):
    """From the floor, the looks that grow the rate to twice a writer's use, then the calm
    that lifts it (and a margin)."""
    looks = math.log(2 * writes_per_second / wp.MIN_RATE) / math.log(wp.INCREASE)
    return looks * wp.LOOK_EVERY + wp.LIFT_AFTER + 10


def writes_in(world, pacer, seconds, per_call=1):
    """Writes a busy controller gets through in `seconds` of the fake clock."""
    end, done = world.now + seconds, 0
    while world.now < end:
        pacer.take(per_call)
        done += per_call
        world.now += 0.001          # the write itself
    return done


def test_unpaced_while_heartbeats_find_seats():
    world = World()
    pacer = world.pacer()
    assert writes_in(world, pacer, 5.0) > 4000
    assert not pacer.pacing and world.slept == 0


def test_refusals_at_the_system_level_lower_the_rate_until_they_stop_then_it_is_lifted():
    world = World()
    pacer = world.pacer()
    writes_in(world, pacer, 1.0)                      # ~1,000 writes/s unpaced
    world.refused += 5                                # renewals refused (429)
    writes_in(world, pacer, wp.LOOK_EVERY)
    assert pacer.pacing and pacer.rate < 1000
    rates = []
    world.refusing = True
    for _ in range(int(40 / wp.LOOK_EVERY)):          # refusals keep coming for 40 s: lowered once per hold
        writes_in(world, pacer, wp.LOOK_EVERY)
        rates.append(pacer.rate)
    world.refusing = False
    assert rates[-1] <= 1.5 * wp.MIN_RATE and all(a >= b for a, b in zip(rates, rates[1:]))
    lowered = [i for i, (a, b) in enumerate(zip(rates, rates[1:])) if b < a]
    assert len(lowered) >= 5
    assert all(j - i >= wp.HOLD_AFTER_DECREASE / wp.LOOK_EVERY - 1 for i, j in zip(lowered, lowered[1:]))
    paced = writes_in(world, pacer, 2.0)
    assert paced <= 2.0 * wp.MIN_RATE * wp.INCREASE ** 4 + wp.MIN_RATE, "held to the paced rate, give or take its growth"
    assert world.slept > 0 and pacer.status()["pacedSeconds"] > 0
    # Heartbeats go through again: the rate grows back, then pacing is lifted.
    writes_in(world, pacer, seconds_to_lift(1000))
    assert not pacer.pacing
    assert writes_in(world, pacer, 1.0) > 900


def test_a_full_queue_at_the_system_level_is_pressure_too_and_quiet_controllers_keep_a_minimum():
    world = World()
    pacer = world.pacer()
    world.queued = 0.75                               # queued for a moment: normal
    writes_in(world, pacer, 2.0)
    assert not pacer.pacing
    world.queued = 1.0
    world.now += 3 * wp.LOOK_EVERY                    # controllers quiet meanwhile: counting starts over
    pacer.take(1)
    assert not pacer.pacing
    world.now += wp.LOOK_EVERY
    pacer.take(1)
    assert pacer.pacing
    for _ in range(10):
        world.now += wp.LOOK_EVERY
        pacer.take(1)                                 # still pressure, still quiet: down to the floor
    assert pacer.rate == wp.MIN_RATE
    assert 1 <= writes_in(world, pacer, 1.0) <= 2 * wp.MIN_RATE


def test_a_paced_batch_goes_in_chunks_as_its_tokens_come():
    world = World()
    pacer = world.paced_pacer()
    store = MemoryStore(clock=world.clock)
    store.pacer = pacer
    sizes = []
    real = store._submit_many
    store._submit_many = lambda cmds, timeout: sizes.append(len(cmds)) or real(cmds, timeout)
    pods = [[{"op": "create", "resource": "configmaps",
              "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c%d" % i, "namespace": "default"}}}]
            for i in range(60)]
    results = store.write_many(pods)
    assert len(results) == 60 and all(r["ok"] for r in results)
    assert sizes == [pacer.chunk, pacer.chunk, 60 - 2 * pacer.chunk]
    assert world.slept > 0
    # The scheduler's view of the store is not paced: one batch, no wait.
    unpaced = store.unpaced()
    slept, sizes[:] = world.slept, []
    assert all(r["ok"] for r in unpaced.write_many([[dict(op[0], object=dict(op[0]["object"], metadata={
        "name": "b%d" % i, "namespace": "default"}))] for i, op in enumerate(pods)]))
    assert sizes == [60] and world.slept == slept and store.pacer is pacer
    assert Scheduler.paced_writes is False and NodeLifecycleController.paced_writes is False
    assert ReplicaSetController.paced_writes is True


def test_flow_control_reports_the_system_level_queue_and_refusals():
    flow = FlowControl(max_inflight=4, queue_wait=0.0)
    level = flow.levels[SYSTEM]
    assert flow.system_pressure() == (0, 0)
    for _ in range(level.seats):
        assert level.acquire(0)[0]
    assert not level.acquire(0)[0]                      # refused: no seat, no wait
    waiter = threading.Thread(target=level.acquire, args=(5.0,))
    level.queue_length = 1
    waiter.start()
    for _ in range(200):
        if flow.system_pressure()[0]:
            break
        threading.Event().wait(0.01)
    assert flow.system_pressure() == (1, 1)
    level.release()
    waiter.join(5)
    assert FlowControl(max_inflight=0).system_pressure() == (0, 0)


def test_the_rate_limit_and_the_time_waited_are_in_metrics():
    from shepherd_ha.api.metrics import ReplicaCollector
    world = World()
    pacer = world.paced_pacer()
    writes_in(world, pacer, 1.0)

    class Replica:
        @staticmethod
        def controller_status(counts=False):
            return {"active": True, "deadThreads": [], "errorCounts": [], "restartCounts": {},
                    "writePacing": pacer.status()}
    families = {f.name: f for f in ReplicaCollector(Replica())._controllers()}
    assert families["shepherd_controller_write_rate_limit"].samples[0].value == pacer.rate > 0
    assert families["shepherd_controller_write_paced_seconds"].samples[0].value == pytest.approx(world.slept)
    assert world.slept > 0


def test_a_batch_is_not_starved_by_steady_pressure_or_by_single_writes():
    world = World()
    pacer = world.pacer()
    writes_in(world, pacer, 1.0)
    for _ in range(int(40 / wp.LOOK_EVERY)):          # pressure at every look for 40 s: down to the floor
        world.refused += 1
        writes_in(world, pacer, wp.LOOK_EVERY)
    assert pacer.rate <= 1.5 * wp.MIN_RATE
    started = world.now
    world.refused += 1
    pacer.take(pacer.chunk)                           # a chunk bigger than the bucket holds
    assert world.now - started <= pacer.chunk / wp.MIN_RATE + 1.0, "it waited its turn, not forever"
    # Single writes and a batch in turn: each waits its share, in order.
    waits = []
    for n in (1, pacer.chunk, 1):
        before = world.now
        world.refused += 1
        pacer.take(n)
        waits.append(world.now - before)
    assert waits[1] >= (pacer.chunk - 1) / (2 * wp.MIN_RATE) and waits[2] < waits[1]


def test_a_paced_writer_gives_up_when_its_controllers_stop():
    world = World()
    pacer = world.paced_pacer()
    stop = threading.Event()
    stop.set()
    with pytest.raises(Stopped):
        pacer.take(100, stop)                         # a stopped writer does not wait
    store = MemoryStore(clock=world.clock)
    store.pacer, store.stop = pacer, stop
    with pytest.raises(Unavailable) as raised:
        store.write_many([[{"op": "create", "resource": "configmaps", "object": {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}}]] * 100)
    assert raised.value.outcome == "not-applied" and "stopping" in str(raised.value)
    assert store.get("configmaps", "default", "c") is None


def test_refusals_from_long_ago_do_not_pace_the_next_writes():
    world = World()
    pacer = world.pacer()
    world.refused = 50                                # while this replica followed, or its controllers were quiet
    world.now += 3600
    assert writes_in(world, pacer, 2.0) > 1500
    assert not pacer.pacing


def test_the_manager_gives_paced_controllers_the_pacer_and_the_others_an_unpaced_store():
    from controller_kit import MemoryReplica, wait_for

    from shepherd_ha.controllers.manager import ControllerManager
    from shepherd_ha.controllers.registry import default_factories
    from shepherd_ha.controllers.settings import ControllerSettings
    world = World()
    pacer = world.pacer()
    replica = MemoryReplica(MemoryStore())
    manager = ControllerManager(replica, default_factories(ControllerSettings()), pacer=pacer)
    try:
        wait_for("controllers started", lambda: manager.status()["epoch"])
        by_name = {c.name: c for c in manager.controllers}
        assert by_name["scheduler"].store.pacer is None and by_name["node-lifecycle"].store.pacer is None
        assert by_name["replicasets"].store.pacer is pacer and by_name["replicasets"].store.stop is not None
        assert manager.status()["writePacing"]["paced"] is False
        # The pacer also watches the node lifecycle controller's late heartbeats.
        assert pacer._heartbeats == by_name["node-lifecycle"].heartbeats_at_risk
    finally:
        replica.leading = False
    wait_for("stopped", lambda: manager.status()["epoch"] is None)
    assert pacer._heartbeats is None, "no controller of a stopped epoch is asked"


def test_a_lone_writer_of_big_chunks_still_sees_the_pressure_end():
    world = World()
    pacer = world.paced_pacer()
    world.refusing = True
    for _ in range(40):                               # one controller, a chunk at a time, refusals meanwhile
        pacer.take(pacer.chunk)
        world.now += 0.05
    world.refusing = False
    assert pacer.rate <= 1.5 * wp.MIN_RATE
    start = world.now
    while pacer.pacing and world.now - start < seconds_to_lift(500):   # heartbeats are fine again
        pacer.take(pacer.chunk)
        world.now += 0.05                             # the chunk's own write
    assert not pacer.pacing, "lifted once the refusals stopped"


def test_late_heartbeats_are_pressure_too_and_pacing_waits_for_both_signals_to_clear():
    world = World()
    pacer = world.pacer()
    late = {"nodes": 0}
    pacer.watch_heartbeats(lambda: late["nodes"])
    writes_in(world, pacer, 2.0)
    assert not pacer.pacing and pacer.status()["heartbeatsAtRisk"] == 0
    late["nodes"] = 3                                 # three nodes' renewals are late, no refusal anywhere
    writes_in(world, pacer, wp.LOOK_EVERY)
    assert pacer.pacing and pacer.status()["heartbeatsAtRisk"] == 3
    for _ in range(12):
        writes_in(world, pacer, wp.LOOK_EVERY)
    assert pacer.rate <= 1.5 * wp.MIN_RATE
    late["nodes"] = 0
    for _ in range(8):                                # on time again, but renewals are refused now
        world.refused += 2
        writes_in(world, pacer, wp.LOOK_EVERY)
    assert pacer.rate <= 1.5 * wp.MIN_RATE, "either signal holds the rate down"
    writes_in(world, pacer, seconds_to_lift(1000))    # neither: lifted
    assert not pacer.pacing
    pacer.watch_heartbeats(None)                      # no node lifecycle controller: the system level alone
    late["nodes"] = 50
    writes_in(world, pacer, 2.0)
    assert not pacer.pacing and pacer.status()["heartbeatsAtRisk"] is None


def test_the_rate_grows_only_to_twice_what_the_writers_use_so_a_later_backlog_cannot_burst():
    world = World()
    pacer = world.paced_pacer()
    start = world.now
    while world.now - start < 25:                     # calm for 25 s, writers wanting ~20 writes/s
        pacer.take(2)
        world.now += 0.1
    assert pacer.pacing and pacer.rate <= 2 * 20 * 1.01, pacer.rate
    burst = writes_in(world, pacer, 1.0)              # then a backlog: held near that, growing slowly
    assert burst <= 2 * 20 * wp.INCREASE ** 2 + pacer.rate * wp.BURST_SECONDS + 1, burst


def test_a_refusal_lowers_the_rate_once_per_hold_a_late_heartbeat_at_every_look():
    """Writes already let out still arrive (with their bindings and status writes) for a
    second or two after the rate was lowered: a refusal lowers it again only after a hold.
    A late heartbeat is graver: every look."""
    world = World()
    pacer = world.paced_pacer()
    writes_in(world, pacer, 2 * wp.HOLD_AFTER_DECREASE)   # the first hold runs out; the rate grows
    world.refusing = True
    writes_in(world, pacer, wp.LOOK_EVERY)
    lowered = pacer.rate
    writes_in(world, pacer, wp.HOLD_AFTER_DECREASE - 2 * wp.LOOK_EVERY)   # refused at every look: held
    assert pacer.rate == lowered
    writes_in(world, pacer, 2 * wp.LOOK_EVERY)        # the hold is over, still refused: lowered again
    assert pacer.rate == pytest.approx(lowered * wp.DECREASE) or pacer.rate == wp.MIN_RATE
    world.refusing = False
    late = {"nodes": 4}
    pacer.watch_heartbeats(lambda: late["nodes"])
    rates = [pacer.rate]
    for _ in range(3):                                # late heartbeats: lowered at every look
        writes_in(world, pacer, wp.LOOK_EVERY)
        rates.append(pacer.rate)
    assert all(b < a or b == wp.MIN_RATE for a, b in zip(rates, rates[1:])), rates


def test_a_writer_queued_at_a_low_rate_goes_as_soon_as_the_rate_rises():
    """A place in line is not a fixed sleep: a batch that queued at the floor goes as the
    rate grows back, and writers waiting in line count as using all of it (the rate may
    grow past twice what they reserved lately)."""
    world = World()
    pacer = world.floored_pacer()
    rate, start = pacer.rate, world.now               # calm from now on
    pacer.take(300)                                   # a batch: 300 / rate seconds at the rate it queued at
    waited = world.now - start
    assert waited < 0.5 * 300 / rate, (waited, rate)
    assert pacer.rate > 4 * rate, "the rate grew while the batch waited in line"


def test_writers_that_give_up_in_line_leave_no_debt_behind_them():
    """A writer of a stopping epoch leaves the line: those after it (the next epoch's)
    do not wait for its tokens, and its place does not count as writers in line."""
    world = World()
    pacer = world.floored_pacer()
    stop = threading.Event()
    stop.set()
    for _ in range(10):                               # 250 writes' places, given up
        with pytest.raises(Stopped):
            pacer.take(pacer.chunk, stop)
    rate, start = pacer.rate, world.now
    pacer.take(1)
    assert world.now - start <= 1.0 / rate + 1e-6, "waited only its own share"
    for _ in range(6):                                # calm looks, nobody writing: no queue to grow for
        world.now += wp.LOOK_EVERY
        pacer.take(1)
    assert pacer.rate <= 2 * wp.MIN_RATE + 1e-9, pacer.rate


def test_a_batch_whose_own_take_starts_the_pacing_goes_a_chunk_at_a_time():
    """Pacing can start inside a batch's own take (its look sees the pressure): then only a
    chunk of it takes a place in line, not the whole batch ahead of every other writer."""
    world = World()
    pacer = world.pacer()
    writes_in(world, pacer, 1.0)
    world.refused += 1
    world.now += wp.LOOK_EVERY
    assert pacer.take(1000, divisible=True) == pacer.chunk
    assert pacer.pacing
    start = world.now
    assert pacer.take(1) == 1
    assert world.now - start <= (pacer.chunk + 1) / pacer.rate + 1e-6, "behind a chunk, not a whole batch"
    assert pacer.take(10, divisible=True) == 10
    assert pacer.take(40) == 40, "a write that cannot be divided takes all its places"
