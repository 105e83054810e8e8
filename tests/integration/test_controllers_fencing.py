"""Controller fencing: a deposed leader's controller writes are never applied.

In-process (three Replica objects with their ControllerManagers in this process, real
PySyncObj on loopback, so the old leader's StoreAccess can be held and used):
- once a newer epoch is claimed, a write through the old leader's StoreAccess is refused
  with reason Fenced, counted identically on every replica, and changes nothing;
- a real election: the leader's Raft thread is stalled (as a pause would) while one of
  its controller writes is in flight, the others elect a new leader whose manager
  claims a newer epoch; a write the old leader queued meanwhile is never applied, and
  once it is back as a follower its controllers are stopped and its writes refused.

Real processes (the issue's proof): a 3-replica cluster with short node settings and
three nodes whose leases the test keeps renewing. The leader is SIGSTOPped for longer
than the grace period plus the eviction timeout, so that when it resumes, its stale
view (no lease change seen, its clock jumped) makes its node lifecycle controller
want to mark every node NotReady and evict their pods. Meanwhile the others elect a
new leader whose controllers start with a newer epoch. After SIGCONT the old leader's
controllers stop within about a second, and every object the controllers could write
(nodes, pods, endpoints, events) is exactly as before: no write of the old epoch was
applied, and the new leader wrote nothing twice. The fenced-rejection counter is the
same on every replica.
"""
import os
import signal
import threading
import time
import uuid

import pytest
import requests

from shepherd_ha.cli.local_cluster import find_base_port
from shepherd_ha.controllers.manager import ControllerManager
from shepherd_ha.store.raft_node import RaftSettings, Unavailable
from shepherd_ha.store.fsm import StoreFSM
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store.replica import Peer, Replica
from shepherd_ha.store.watch_log import WatchLog

from .helpers import POD, PODS, call, expect, start_cluster, wait_for

pytestmark = pytest.mark.integration


def wait_quiet(replica, quiet_for=0.5, timeout=15.0):
    """Wait until the replica has applied all of its log and the log has not grown for
    `quiet_for` s. A stall taken then blocks on the next entry, the test's own write; taken
    while a controller's write was about to apply, it blocked on that one and the test's
    write was never appended (seen: old leader at log 4, applied 3, the write not in it)."""
    syncobj = replica.node.syncobj
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        state = (syncobj._SyncObj__getCurrentLogIndex(), replica.node.commit_index(), replica.node.applied_index())
        if state != last or len(set(state)) != 1:
            last, since = state, time.monotonic()
        elif time.monotonic() - since >= quiet_for:
            return
        time.sleep(0.02)
    raise AssertionError("%s never went quiet within %.0fs (log, commit, applied: %r)" % (replica.id, timeout, last))


# ---------------------------------------------------------------- in process

def namespace_op(name):
    return {"op": "create", "resource": "namespaces", "object": {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": str(uuid.uuid4()), "creationTimestamp": now_rfc3339()},
        "spec": {}, "status": {"phase": "Active"}}}


class InProcessCluster:
    def __init__(self, tmp_path):
        base = find_base_port(3)
        members = [("r%d" % i, "127.0.0.1:%d" % (base + 100 + i)) for i in (1, 2, 3)]
        password = uuid.uuid4().hex
        self.replicas, self.managers, self.stores = [], {}, {}
        for ident, address in members:
            others = [(i, a) for i, a in members if i != ident]
            settings = RaftSettings(self_address=address, peer_addresses=[a for _, a in others],
                                    data_dir=str(tmp_path / ident), password=password,
                                    salt="00112233445566778899aabbccddeeff")
            replica = Replica(ident, settings, [Peer(i, a) for i, a in others])
            self.stores[ident] = []
            manager = ControllerManager(replica, [self._factory(ident)])
            replica._on_leadership = manager.leadership_changed
            self.replicas.append(replica)
            self.managers[ident] = manager

    def _factory(self, ident):
        def build(store):
            self.stores[ident].append(store)     # the StoreAccess this epoch's controllers get
            return []
        return build

    def close(self):
        for r in self.replicas:
            try:
                r.close()
            except Exception:   # noqa: BLE001 - best effort at teardown
                pass

    def active_leader(self):
        """The replica whose manager runs controllers with the epoch every replica applied."""
        for r in self.replicas:
            status = self.managers[r.id].status()
            if r.node.is_leader() and status["active"] and all(
                    list(o.node.fsm.epoch) == status["epoch"] for o in self.replicas):
                return r
        return None

    def everywhere(self, predicate, replicas=None):
        return all(predicate(r) for r in (replicas or self.replicas))


@pytest.fixture
def inproc(tmp_path):
    cluster = InProcessCluster(tmp_path)
    try:
        wait_for("a leader whose controllers run with the epoch applied everywhere", cluster.active_leader, 20)
        yield cluster
    finally:
        cluster.close()


def test_write_from_an_older_epoch_is_refused_everywhere(inproc):
    leader = inproc.active_leader()
    old = inproc.stores[leader.id][-1]
    assert old.epoch == list(leader.node.fsm.epoch) == [leader.node.term(), leader.id]
    assert old.write([namespace_op("while-current")])["ok"], "the epoch's own writes apply"
    wait_for("applied everywhere", lambda: inproc.everywhere(lambda r: r.node.fsm.get("namespaces", None,
                                                                                     "while-current")), 5)

    # Another replica claims a newer epoch, as a newly elected leader's manager does.
    follower = [r for r in inproc.replicas if r is not leader][0]
    claim = follower.committer.call({"type": "claim", "term": leader.node.term() + 1, "replica": follower.id}, 5)
    assert claim["ok"], claim
    wait_for("the new epoch everywhere",
             lambda: inproc.everywhere(lambda r: list(r.node.fsm.epoch) == [leader.node.term() + 1, follower.id]), 5)
    before = {r.id: r.node.fsm.fenced_rejections for r in inproc.replicas}
    assert set(before.values()) == {0}

    result = old.write([namespace_op("from-old-epoch")])
    assert result["ok"] is False and result["reason"] == "Fenced", result
    assert "current epoch is [%d, '%s']" % (leader.node.term() + 1, follower.id) in result["message"]
    batch = old.write_many([[namespace_op("old-a")], [namespace_op("old-b")]])
    assert [r["reason"] for r in batch] == ["Fenced", "Fenced"]
    wait_for("3 fenced rejections on every replica",
             lambda: inproc.everywhere(lambda r: r.node.fsm.fenced_rejections == 3), 5)
    for r in inproc.replicas:
        for name in ("from-old-epoch", "old-a", "old-b"):
            assert r.node.fsm.get("namespaces", None, name) is None, (r.id, name)
    digests = {r.digest()[1] for r in inproc.replicas}
    assert len(digests) == 1, "replicas diverged"


def test_deposed_leader_queued_writes_are_never_applied(inproc):
    old_leader = inproc.active_leader()
    old_term = old_leader.node.term()
    old = inproc.stores[old_leader.id][-1]
    # The stall lasts an election and a claim (2-3 s on a loaded machine): the stalled
    # leader's writes must outlive it to show what it answers once it runs again.
    old.write_timeout = 10.0
    others = [r for r in inproc.replicas if r is not old_leader]
    results = {}

    def write_in_background(label, name):
        def run():
            try:
                results[label] = old.write([namespace_op(name)])
            except Unavailable as exc:
                results[label] = {"ok": False, "reason": "Unavailable", "message": str(exc)}
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    # Stall the leader's Raft thread: it blocks applying the next entry, as a paused process would.
    wait_quiet(old_leader)
    old_leader.node.lock.acquire()
    try:
        first = write_in_background("committed-before", "fence-first")
        wait_for("the first write committed and applied on the followers",
                 lambda: all(r.node.fsm.get("namespaces", None, "fence-first") for r in others), 10)
        new_leader = wait_for("a new leader with a newer claimed epoch", lambda: next(
            (r for r in others if r.node.is_leader() and r.node.term() > old_term
             and inproc.managers[r.id].status()["active"]), None), 15)
        new_epoch = inproc.managers[new_leader.id].status()["epoch"]
        assert new_epoch[0] > old_term
        wait_for("the new epoch applied on the live replicas",
                 lambda: all(list(r.node.fsm.epoch) == new_epoch for r in others), 5)
        assert inproc.managers[old_leader.id].status()["active"], "the stalled leader still thinks it leads"
        queued = write_in_background("queued-while-deposed", "fence-queued")
        time.sleep(0.3)          # let it reach the stalled leader's queue
    finally:
        old_leader.node.lock.release()
    released = time.monotonic()

    first.join(10)
    queued.join(10)
    assert results["committed-before"]["ok"], ("committed before the new claim: legitimately applied",
                                              results)
    assert results["queued-while-deposed"]["ok"] is False, results["queued-while-deposed"]
    assert results["queued-while-deposed"]["reason"] in ("Fenced", "Unavailable"), results
    wait_for("the old leader's controllers stopped", lambda: not inproc.managers[old_leader.id].status()["active"], 2)
    stopped_after = time.monotonic() - released

    # Back as a follower: its controllers' StoreAccess is refused, whatever route the write takes.
    wait_for("the old leader caught up with the new epoch", lambda: list(old_leader.node.fsm.epoch) == new_epoch, 10)
    late = old.write([namespace_op("fence-late")])
    assert late["ok"] is False and late["reason"] == "Fenced", late
    wait_for("same state everywhere",
             lambda: len({r.node.fsm.revision for r in inproc.replicas}) == 1
             and len({r.node.fsm.fenced_rejections for r in inproc.replicas}) == 1, 10)
    counts = {r.id: r.node.fsm.fenced_rejections for r in inproc.replicas}
    assert min(counts.values()) >= 1, counts
    for r in inproc.replicas:
        assert r.node.fsm.get("namespaces", None, "fence-first") is not None
        assert r.node.fsm.get("namespaces", None, "fence-queued") is None, "a deposed leader's queued write applied"
        assert r.node.fsm.get("namespaces", None, "fence-late") is None
    assert len({r.digest()[1] for r in inproc.replicas}) == 1, "replicas diverged"
    assert stopped_after < 2.0


class _FakeNode:
    def __init__(self):
        self.lock = threading.RLock()
        self.fsm = StoreFSM()
        self.leader, self.current_term = True, 1

    def is_leader(self):
        return self.leader

    def term(self):
        return self.current_term


class _FakeReplica:
    def __init__(self):
        self.id, self.write_timeout = "r1", 1.0
        self.node = _FakeNode()
        self.watch_log = WatchLog(100)
        self.claims = []
        self.committer = self

    def call(self, command, timeout):
        self.claims.append(command["term"])
        return self.node.fsm.apply(command)

    def call_many(self, commands, timeout):
        return [self.node.fsm.apply(c) for c in commands]


def test_manager_never_claims_a_term_it_does_not_lead():
    """PySyncObj stores a newer term before it steps down: in that window another thread
    sees role leader with the new term. The manager must not claim that term (the claim
    would be forwarded to the real leader and could beat its own claim, leaving the
    cluster without controllers)."""
    replica = _FakeReplica()
    manager = ControllerManager(replica, [lambda store: []])
    wait_for("controllers on term 1", lambda: manager.status()["epoch"] == [1, "r1"], 2)
    replica.node.current_term = 2          # the step-down window: new term, role not yet follower
    wait_for("controllers stopped", lambda: not manager.status()["active"], 2)
    time.sleep(0.5)
    assert replica.claims == [1], "claimed a term it does not lead: %s" % replica.claims
    replica.node.leader = False
    manager.leadership_changed(False)
    replica.node.current_term, replica.node.leader = 3, True   # elected in term 3
    manager.leadership_changed(True)
    wait_for("controllers on term 3", lambda: manager.status()["epoch"] == [3, "r1"], 2)
    assert replica.claims == [1, 3]


# ---------------------------------------------------------------- real processes

GRACE, EVICTION, LEASE_INTERVAL = 2.0, 1.0, 0.5
PAUSE = GRACE + EVICTION + 1.5        # the old leader's timers for NotReady and eviction are all due on resume
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
MERGE = {"Content-Type": "application/merge-patch+json"}


def node_body(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"unschedulable": False},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Registered",
                                       "message": "registered by the test",
                                       "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}


class Renewer(threading.Thread):
    """Renews the nodes' leases every LEASE_INTERVAL / 2 through replicas not in `skip`."""

    def __init__(self, urls, names, limit=120.0):
        super().__init__(name="renewer", daemon=True)
        self.urls, self.names, self.limit = dict(urls), list(names), limit
        self.skip = set()
        self.stop = threading.Event()
        self.failures = 0

    def run(self):
        deadline = time.monotonic() + self.limit
        n = 0
        while not self.stop.wait(LEASE_INTERVAL / 2) and time.monotonic() < deadline:
            n += 1
            targets = [u for i, u in sorted(self.urls.items()) if i not in self.skip]
            for name in self.names:
                body = {"spec": {"renewTime": "2026-01-01T00:00:00.%06dZ" % n, "leaseTransitions": n}}
                for k in range(len(targets)):
                    try:
                        resp = call("PATCH", targets[(n + k) % len(targets)] + LEASES + "/" + name, headers=MERGE,
                                    json=body, timeout=1.0)
                        if resp.status_code == 200:
                            break
                    except requests.RequestException:
                        pass
                else:
                    self.failures += 1


def replica_state(url, timeout=1.0):
    try:
        return requests.get(url + "/shepherd/v1/replica", timeout=timeout).json()
    except (requests.RequestException, ValueError):
        return None


def controller_objects(url):
    """Everything the controllers could have written here, by identity and version."""
    out = {}
    for path in ("/api/v1/nodes", "/api/v1/pods", "/api/v1/endpoints", "/api/v1/events", "/apis/apps/v1/deployments"):
        for obj in expect(call("GET", url + path), 200)["items"]:
            meta = obj["metadata"]
            out[(path, meta.get("namespace"), meta["name"])] = (meta["uid"], meta["resourceVersion"])
    return out


def test_sigstopped_leader_cannot_apply_its_queued_controller_writes(tmp_path):
    cluster = start_cluster(tmp_path, server_options={"node_grace_period": GRACE, "pod_eviction_timeout": EVICTION,
                                                     "node_lease_interval": LEASE_INTERVAL})
    urls = {i: cluster.url(i) for i in cluster.ids}
    renewer = Renewer(urls, ["f1", "f2", "f3"])
    paused = None
    try:
        url = urls[cluster.ids[0]]
        for name in renewer.names:
            expect(call("POST", url + "/api/v1/nodes", json=node_body(name)), 201)
            expect(call("POST", url + LEASES, json={
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40}}), 201)
        renewer.start()
        expect(call("POST", url + "/api/v1/namespaces/default/services", json={
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "fenced"},
            "spec": {"selector": {"app": "fenced"}, "ports": [{"port": 80}]}}), 201)
        for i, node in enumerate(renewer.names, start=1):
            created = expect(call("POST", url + PODS.format(ns="default"), json={
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "fenced-%s" % node, "labels": {"app": "fenced"}},
                "spec": {"nodeName": node, "containers": [{"name": "main", "image": "nginx:1.25"}]}}), 201)
            created["status"] = {"phase": "Running", "podIP": "10.9.0.%d" % i,
                                 "conditions": [{"type": "Ready", "status": "True"}]}
            expect(call("PUT", url + POD.format(ns="default", name=created["metadata"]["name"]) + "/status",
                        json=created), 200)

        def endpoints_ready():
            resp = call("GET", url + "/api/v1/namespaces/default/endpoints/fenced")
            if resp.status_code != 200:
                return False
            return sorted(a["ip"] for s in resp.json().get("subsets") or [] for a in s.get("addresses") or []) == [
                "10.9.0.1", "10.9.0.2", "10.9.0.3"]
        wait_for("the endpoints list the three pods", endpoints_ready, 10)
        time.sleep(GRACE)     # the leader has seen every lease move for a while: all quiet

        old_leader = cluster.leader()
        old_state = replica_state(urls[old_leader])
        assert old_state["controllers"]["active"] and old_state["controllers"]["epoch"] == old_state["epoch"]
        old_epoch = old_state["epoch"]
        others = [i for i in cluster.ids if i != old_leader]
        before = controller_objects(urls[others[0]])
        fenced_before = old_state["fencedRejections"]

        renewer.skip.add(old_leader)
        assert cluster.lc.signal(old_leader, signal.SIGSTOP)     # every process of the replica
        paused = old_leader
        stopped_at = time.monotonic()

        def new_leader_active():
            for ident in others:
                state = replica_state(urls[ident], timeout=0.5)
                if (state and state["role"] == "leader" and state["term"] > old_state["term"]
                        and state["controllers"]["active"] and state["controllers"]["epoch"] == state["epoch"]
                        and state["epoch"][0] > old_epoch[0]):
                    return ident, state
            return None
        new_leader, new_state = wait_for("a new leader with controllers on a newer epoch", new_leader_active, 10)
        elected_after = time.monotonic() - stopped_at
        time.sleep(max(0.0, PAUSE - (time.monotonic() - stopped_at)))
        cluster.lc.signal(old_leader, signal.SIGCONT)
        paused = None
        resumed_at = time.monotonic()

        def old_leader_stopped():
            state = replica_state(urls[old_leader], timeout=0.5)
            return state if state and not state["controllers"]["active"] and state["role"] != "leader" else None
        wait_for("the old leader's controllers stopped", old_leader_stopped, 3)
        stop_delay = time.monotonic() - resumed_at
        assert stop_delay <= 1.0, "old leader's controllers still active %.2fs after SIGCONT" % stop_delay

        time.sleep(GRACE + EVICTION)        # time for anything the old leader had queued to land, if it could
        renewer.skip.clear()

        # Converged: same revision and digest everywhere, same fenced count everywhere.
        def converged():
            states = [requests.get(u + "/shepherd/v1/replica", params={"digest": "1"}, timeout=2).json()
                      for u in urls.values()]
            return states if len({(s["revision"], s["digest"]) for s in states}) == 1 else None
        states = wait_for("replicas converged", converged, 10, interval=0.2)
        assert len({s["fencedRejections"] for s in states}) == 1
        assert all(s["epoch"] == new_state["epoch"] for s in states), [s["epoch"] for s in states]
        fenced_delta = states[0]["fencedRejections"] - fenced_before

        after = controller_objects(urls[new_leader])
        changed = {k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)}
        if changed:
            nodes = {n: [(c["status"], c["reason"], c.get("message")) for c in
                         call("GET", urls[new_leader] + "/api/v1/nodes/" + n).json()["status"]["conditions"]
                         if c["type"] == "Ready"] for n in renewer.names}
            raise AssertionError(
                "controller objects changed across the failover (old-epoch or duplicate writes): %s; "
                "new leader %s elected %.2fs after SIGSTOP, fenced rejections %+d, renewal rounds that found no "
                "replica: %d, Ready conditions now: %s" % (sorted(changed.items())[:10], new_leader, elected_after,
                                                          fenced_delta, renewer.failures, nodes))
        for name in renewer.names:
            node = expect(call("GET", urls[new_leader] + "/api/v1/nodes/" + name), 200)
            [cond] = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
            assert (cond["status"], cond["reason"]) == ("True", "Registered"), cond
        print("\nnew leader %s elected %.2fs after SIGSTOP; old leader %s paused %.1fs, its controllers stopped "
              "%.2fs after SIGCONT; fenced rejections %+d; renewals that found no replica: %d"
              % (new_leader, elected_after, old_leader, PAUSE, stop_delay, fenced_delta, renewer.failures))
        with open(os.path.join(cluster.lc.dir, old_leader, "server.log"), errors="replace") as fh:
            tail = fh.read()[-20000:]
        assert "controllers stopping" in tail
    finally:
        if paused is not None:
            cluster.lc.signal(paused, signal.SIGCONT)
        renewer.stop.set()
        if renewer.is_alive():
            renewer.join(5)
        cluster.stop_all()
