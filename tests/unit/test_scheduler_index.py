"""The scheduler's usage index: a pass reads its own pods by key and walks no other pod
(even less so without any node), the index kept from changes equals a from-scratch
computation after random sequences of pod and node changes, and the scheduler decides
exactly what the from-scratch view (the code before the index) decided."""
import collections
import random

from shepherd_ha.controllers.scheduling.usage import UsageIndex
from shepherd_ha.controllers.scheduling.view import PodInfo, ViewBuilder, is_pending
from shepherd_ha.controllers.store_access import MemoryStore
from shepherd_ha.store.deletion import delete_op
from shepherd_ha.store.watch_log import WatchLog

from test_scheduler_support import Harness, node, op_create, pod


# ---- counting what a pass reads ----

class Reads:
    """Counts the pods the store hands out, per way of reading."""

    def __init__(self, store):
        self.listed = 0            # pods returned by list("pods") and snapshot(... "pods" ...)
        self.list_calls = 0
        self.gets = 0              # get("pods", ...) calls
        real_list, real_snapshot, real_get = store.list, store.snapshot, store.get

        def list_(resource, namespace=None):
            out = real_list(resource, namespace)
            if resource == "pods":
                self.list_calls += 1
                self.listed += len(out)
            return out

        def snapshot(resources):
            objects, revision = real_snapshot(resources)
            if "pods" in resources:
                self.list_calls += 1
                self.listed += len(objects["pods"])
            return objects, revision

        def get(resource, namespace, name):
            if resource == "pods":
                self.gets += 1
            return real_get(resource, namespace, name)
        store.list, store.snapshot, store.get = list_, snapshot, get

    def reset(self):
        self.listed = self.list_calls = self.gets = 0


def test_a_pass_reads_its_own_pods_by_key_and_walks_no_other_pod():
    h = Harness()
    h.create("nodes", *[node("n%d" % i, cpu="64", memory="256Gi", pods="1000") for i in range(4)])
    h.create("pods", *[pod("bound-%d" % i, cpu="10m", node_name="n%d" % (i % 4), owner="old") for i in range(2000)])
    h.create("pods", *[pod("done-%d" % i, node_name="n0", phase="Succeeded") for i in range(500)])
    h.run()
    reads = Reads(h.store)
    rebuilds = h.scheduler.index.rebuilds
    for i in range(30):                      # a stream of single creates: one small pass each
        h.create("pods", pod("new-%d" % i, cpu="10m", owner="web"))
        assert h.run()[0].startswith("bound default/new-%d to " % i)
    assert reads.list_calls == 0 and reads.listed == 0, "no pass lists or snapshots the pods"
    assert reads.gets == 30, "each pass reads its one pod by key"
    assert h.scheduler.index.rebuilds == rebuilds
    assert collections.Counter(h.node_of("new-%d" % i) for i in range(30)) == {"n0": 8, "n1": 8, "n2": 7, "n3": 7}
    # A resync (periodic, or the informer starting over) is what walks every pod, once.
    reads.reset()
    h.scheduler.resync()
    assert reads.list_calls == 1 and reads.listed == 2530
    assert h.scheduler.index.rebuilds == rebuilds + 1


def test_without_any_node_a_pass_walks_no_pod_at_all():
    h = Harness()
    h.create("pods", *[pod("old-%d" % i) for i in range(3000)])
    assert h.run()[-1].endswith("pods wait for a node: none is registered")
    reads = Reads(h.store)
    for i in range(20):
        h.create("pods", pod("p%d" % i))
        assert h.run() == ["1 pods wait for a node: none is registered"]
    assert reads.listed == 0 and reads.gets == 20
    h.create("nodes", node("n1", cpu="64", memory="256Gi", pods="5000"))
    h.run()
    assert h.node_of("p19") == "n1" and h.node_of("old-0") == "n1"
    assert reads.listed == 0, "the first node wakes the waiting pods; still no walk"


def test_pass_cost_does_not_grow_with_the_pods_in_the_store():
    """Work counters, not timings: what a pass reads is the same with 100 or 5,000 pods bound."""
    counts = []
    for bound in (100, 5000):
        h = Harness()
        h.create("nodes", *[node("n%d" % i, cpu="640", memory="2560Gi", pods="10000") for i in range(5)])
        h.create("pods", *[pod("b%d" % i, node_name="n%d" % (i % 5)) for i in range(bound)])
        h.run()
        reads = Reads(h.store)
        applied = h.scheduler.index.changes_applied
        h.create("pods", *[pod("p%d" % i) for i in range(10)])
        h.run()
        counts.append((reads.listed, reads.gets, h.scheduler.index.changes_applied - applied))
    assert counts[0] == counts[1] == (0, 10, counts[0][2])


# ---- the index against a from-scratch computation ----

def summary(view):
    """Everything filters and scorers read of a view's usage, comparable."""
    owners = set()
    for n in view.nodes:
        owners.update(n.owner_counts)
    return ([(n.name, n.cpu, n.memory, n.nonzero_cpu, n.nonzero_memory, n.pod_count, sorted(n.ports),
              sorted((o, c) for o, c in n.owner_counts.items() if c)) for n in view.nodes],
            sorted((o, view.owner_max.get(o, 0)) for o in owners | {"web", "db", "ghost"}))


def index_state(index):
    with index.lock:
        return ({name: (u.cpu, u.memory, u.nonzero_cpu, u.nonzero_memory, u.pods, dict(u.ports), dict(u.owners))
                 for name, u in index.usage.items()},
                dict(index.bound), {k: v[0] for k, v in index.pending.items()},
                {o: dict(per) for o, per in index.owner_nodes.items()}, set(index.nodes))


class World:
    """A MemoryStore and random changes to its pods and nodes."""

    def __init__(self, rng, watch_log=None):
        self.rng = rng
        self.store = MemoryStore(namespaces=("default", "other"))
        if watch_log is not None:
            self.store.watch_log = watch_log
        self.serial = 0

    def write(self, *ops):
        result = self.store.apply({"type": "write", "key": None, "ops": list(ops)})
        assert result["ok"], result
        return result

    def pods(self):
        return self.store.list("pods")

    def random_pod(self, node_name=None):
        rng = self.rng
        self.serial += 1
        return pod("p%d" % self.serial, namespace=rng.choice(["default", "other"]),
                   cpu=rng.choice([None, "100m", "250m", "1"]), memory=rng.choice([None, "64Mi", "1Gi"]),
                   owner=rng.choice([None, "web", "db", "web"]), host_port=rng.choice([None, None, 80, 8080]),
                   containers=rng.choice([1, 1, 2]), node_name=node_name)

    def step(self):
        rng = self.rng
        pods = self.pods()
        nodes = [n["metadata"]["name"] for n in self.store.list("nodes")]
        names = ["n%d" % i for i in range(5)]
        what = rng.choice(["create", "create", "create bound", "bind", "bind", "finish", "terminate", "delete",
                           "recreate", "orphan", "node", "node", "delete node"])
        if what == "create" or not pods and what not in ("node", "create bound"):
            self.write(*[op_create("pods", self.random_pod()) for _ in range(rng.randint(1, 3))])
        elif what == "create bound":
            self.write(op_create("pods", self.random_pod(node_name=rng.choice(names))))
        elif what == "bind":
            pending = [p for p in pods if is_pending(p)]
            if pending:
                p = rng.choice(pending)
                self.write({"op": "update", "resource": "pods", "namespace": p["metadata"]["namespace"],
                            "name": p["metadata"]["name"],
                            "object": dict(p, spec=dict(p["spec"], nodeName=rng.choice(names)))})
        elif what == "finish":
            p = rng.choice(pods)
            self.write({"op": "update", "resource": "pods", "namespace": p["metadata"]["namespace"],
                        "name": p["metadata"]["name"], "subresource": "status",
                        "object": {"status": dict(p.get("status") or {}, phase=rng.choice(["Succeeded", "Failed",
                                                                                            "Running"]))}})
        elif what in ("terminate", "delete"):
            p = rng.choice(pods)
            self.write(delete_op("pods", p["metadata"]["namespace"], p["metadata"]["name"],
                                 force=what == "delete"))
        elif what == "recreate":                  # same name, another uid
            p = rng.choice(pods)
            ns, name = p["metadata"]["namespace"], p["metadata"]["name"]
            again = pod(name, namespace=ns, cpu="500m", owner=rng.choice(["web", "db"]),
                        node_name=rng.choice([None, rng.choice(names)]))
            self.write(delete_op("pods", ns, name, force=True), op_create("pods", again))
        elif what == "orphan":                    # ownerReferences change on a stored pod
            p = rng.choice(pods)
            meta = dict(p["metadata"])
            if meta.get("ownerReferences"):
                meta.pop("ownerReferences")
            else:
                meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "x",
                                            "uid": "db", "controller": True}]
            self.write({"op": "update", "resource": "pods", "namespace": meta["namespace"], "name": meta["name"],
                        "object": dict(p, metadata=meta)})
        elif what == "node":
            name = rng.choice(names)
            current = self.store.get("nodes", "", name)
            fresh = node(name, cpu=rng.choice(["2", "4", "8"]), memory=rng.choice(["4Gi", "8Gi"]),
                         ready=rng.choice(["True", "True", "False"]), unschedulable=rng.random() < 0.2)
            if current is None:
                self.write(op_create("nodes", fresh))
            else:
                self.write({"op": "update", "resource": "nodes", "namespace": "", "name": name,
                            "object": dict(fresh, metadata=current["metadata"])},
                           {"op": "update", "resource": "nodes", "namespace": "", "name": name,
                            "subresource": "status", "object": {"status": fresh["status"]}})
        elif what == "delete node" and nodes:
            self.write(delete_op("nodes", "", rng.choice(nodes)))


def random_assumed(rng, pods):
    """Bindings as passes in flight would hold them: pending pods (some on two nodes),
    bound pods (applied meanwhile), and pods gone since."""
    assumed = {}
    for p in rng.sample(pods, min(len(pods), rng.randint(0, 4))):
        targets = rng.sample(["n0", "n1", "n2", "n3", "n4", "gone-node"], rng.choice([1, 1, 2]))
        assumed[p["metadata"]["uid"]] = [(PodInfo(p), t) for t in targets]
    if rng.random() < 0.3:
        assumed["uid-of-a-deleted-pod"] = [(PodInfo(pod("x", cpu="1")), "n0")]
    return assumed


def check_against_scratch(world, index, rng):
    nodes, pods = world.store.list("nodes"), world.pods()
    pending = [p for p in pods if is_pending(p)]
    wanted = rng.sample(pending, min(len(pending), rng.randint(0, 6)))
    assumed = random_assumed(rng, pods)
    reference, ref_pending = ViewBuilder().build(nodes, pods, {ViewBuilder().pod_info(p).key for p in wanted},
                                                 assumed)
    view, chosen = index.view([(p, index.pod_info(p)) for p in wanted], assumed)
    assert summary(view) == summary(reference)
    assert sorted(chosen) == sorted(ref_pending)
    assert index.revision == world.store.revision()
    return view


def test_index_equals_a_from_scratch_computation_after_random_changes():
    for seed in range(12):
        rng = random.Random(seed)
        world = World(rng, watch_log=WatchLog(25) if seed % 3 == 2 else None)   # small: the log gets trimmed
        index = UsageIndex(world.store)
        index.rebuild()
        cursor = world.store.revision()
        kept = []                               # earlier views: what they said must not change
        for step in range(150):
            world.step()
            how = rng.random()
            if how < 0.4:                        # the informer hands the changes over one by one
                try:
                    changes = world.store.watch_log.since(cursor)
                except Exception:                # trimmed: the informer would start over
                    changes = []
                for change in changes:
                    if change.resource in ("pods", "nodes"):
                        index.apply(change)
                if changes:
                    cursor = changes[-1].revision
            elif how < 0.5:
                index.sync()
            elif how < 0.55:
                index.rebuild()                  # a resync
            elif how < 0.58:
                world.store.watch_log.reset(world.store.revision())   # a snapshot installed
            if rng.random() < 0.3:
                view = check_against_scratch(world, index, rng)
                for n in view.nodes[:2]:         # the pass's own bindings change its copy only
                    view.assume(PodInfo(stamped_pod(rng)), n)
                kept.append((view, summary(view)))
                fresh = UsageIndex(world.store)
                fresh.rebuild()
                assert index_state(index) == index_state(fresh), "seed %d step %d" % (seed, step)
            for view, seen in kept[-5:]:
                assert summary(view) == seen, "an earlier pass's view changed under it"
        if seed % 3 == 2:
            assert index.rebuilds > 1, "the trimmed log made it start over"


def stamped_pod(rng):
    from test_scheduler_support import stamped
    return stamped("pods", pod("extra", cpu="100m", owner=rng.choice(["web", "db"]), host_port=9999))


# ---- the same decisions as the from-scratch view ----

class ScratchIndex:
    """What the scheduler did before the index: snapshot every node and pod each pass
    and build the view from scratch."""

    def __init__(self, store):
        self.store = store
        self.builder = ViewBuilder()

    def apply(self, change):
        pass

    def sync(self):
        pass

    def rebuild(self):
        return [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.store.list("pods")
                if is_pending(p)]

    def pod_info(self, pod):
        return self.builder.pod_info(pod)

    def view(self, pods, assumed=None):
        objects, _ = self.store.snapshot(("nodes", "pods"))
        wanted = {info.key for _, info in pods}
        view, pending = self.builder.build(objects["nodes"], objects["pods"], wanted, assumed)
        return view, {key: (p, self.builder.pod_info(p)) for key, p in pending.items()}


def make_pair():
    pair = [Harness(), Harness()]
    pair[1].scheduler.index = ScratchIndex(pair[1].store)
    return pair


def outcome(h):
    out = {}
    for p in h.store.list("pods", "default"):
        cond = h.condition(p["metadata"]["name"]) or {}
        out[p["metadata"]["name"]] = (p["spec"].get("nodeName"), cond.get("status"), cond.get("message"))
    return out


def test_scheduler_decides_exactly_what_the_from_scratch_view_decided():
    for seed in range(6):
        rng = random.Random(100 + seed)
        pair = make_pair()
        script = []
        serial = 0
        for round_ in range(25):
            what = rng.choice(["pods", "pods", "pods", "node", "delete", "finish", "cordon", "pipelined"])
            if what == "pods" or round_ < 2:
                batch = []
                for _ in range(rng.randint(1, 12)):
                    serial += 1
                    batch.append(pod("p%03d" % serial, cpu=rng.choice(["100m", "300m", "700m", None]),
                                     memory=rng.choice(["128Mi", "1Gi", None]), owner=rng.choice(["web", "db", None]),
                                     host_port=rng.choice([None, None, None, 80]),
                                     selector=rng.choice([None, None, {"disk": "ssd"}])))
                script.append(("create pods", batch))
            elif what == "node":
                name = "n%d" % rng.randint(0, 6)
                script.append(("node", node(name, cpu=rng.choice(["1", "2"]), memory=rng.choice(["2Gi", "4Gi"]),
                                            pods=rng.choice(["4", "110"]),
                                            labels=rng.choice([{}, {"disk": "ssd"}]))))
            else:
                script.append((what, rng.random()))
        results = []
        for h in pair:
            for what, arg in script:
                if what == "create pods":
                    h.create("pods", *arg)
                elif what == "node":
                    if h.store.get("nodes", "", arg["metadata"]["name"]) is None:
                        h.create("nodes", arg)
                else:
                    names = sorted(p["metadata"]["name"] for p in h.store.list("pods", "default"))
                    if not names:
                        continue
                    target = h.pod(names[int(arg * len(names))])
                    if what == "delete":
                        h.delete("pods", target["metadata"]["name"], "default")
                    elif what == "finish" and target["spec"].get("nodeName"):
                        h.update("pods", dict(target, status=dict(target["status"], phase="Succeeded")),
                                 subresource="status")
                    elif what == "cordon":
                        nodes = sorted(n["metadata"]["name"] for n in h.store.list("nodes"))
                        if nodes:
                            n = h.store.get("nodes", "", nodes[int(arg * len(nodes))])
                            h.update("nodes", dict(n, spec={"unschedulable": not n["spec"].get("unschedulable")}))
                    elif what == "pipelined":     # two passes planned before either is written
                        pending = [k for k in names if not h.node_of(k)]
                        first = h.scheduler.plan([("default", k) for k in pending[:3]])
                        second = h.scheduler.plan([("default", k) for k in pending[3:8]])
                        for job in (first, second):
                            h.scheduler.commit(job)
                            h.scheduler._forget_assumed(job)
                        results.append((h is pair[0], [p[:3:2] for p in first.plans + second.plans]))
                h.run()
                results.append((h is pair[0], outcome(h)))
        mine = [r for own, r in results if own]
        theirs = [r for own, r in results if not own]
        assert mine == theirs, "seed %d" % seed
        assert any(n for state in mine if isinstance(state, dict) for n, _, _ in state.values())


# ---- the ordering rule about assumed bindings ----

def test_a_binding_written_between_reading_assumed_and_the_index_counts_once():
    h = Harness()
    h.create("nodes", node("n1", cpu="1"))
    h.create("pods", pod("a", cpu="600m"), pod("b", cpu="600m"), pod("c", cpu="400m"))
    first = h.scheduler.plan([("default", "a")])
    index = h.scheduler.index
    real_view = index.view

    def writer_finishes_meanwhile(pods, assumed=None):
        # The writer commits a's binding and forgets it after plan() read the assumed
        # bindings and before it reads the index.
        if first.assumed and ("default", "a") not in [info.key for _, info in pods]:
            h.scheduler.commit(first)
            h.scheduler._forget_assumed(first)
            first.assumed = {}
        return real_view(pods, assumed)
    index.view = writer_finishes_meanwhile
    second = h.scheduler.plan([("default", "b"), ("default", "c")])
    assert h.node_of("a") == "n1"
    assert second.plans[0][:2] == ("unschedulable", ("default", "b")), "a's room is counted"
    assert second.plans[1] == ("bind", ("default", "c"), "n1"), "...but only once"


def test_a_pod_bound_after_the_pass_read_it_is_not_placed_again():
    h = Harness()
    h.create("nodes", node("n1"), node("n2"))
    h.create("pods", pod("a", cpu="1"))
    index = h.scheduler.index
    real_view = index.view

    def bound_meanwhile(pods, assumed=None):
        a = h.pod("a")
        h.update("pods", dict(a, spec=dict(a["spec"], nodeName="n2")))      # someone else binds it
        return real_view(pods, assumed)
    index.view = bound_meanwhile
    job = h.scheduler.plan([("default", "a")])
    assert job.plans == [] and job.writes == []
    index.view = real_view
    view, _ = index.view()
    assert view.by_name["n2"].cpu == 1000 and view.by_name["n1"].cpu == 0


def test_scheduler_started_by_the_informer_builds_the_index_and_follows_changes():
    h = Harness()
    assert h.scheduler.index.rebuilds == 1, "the informer's start is a resync"
    h.create("nodes", node("n1"))
    h.create("pods", pod("x", cpu="1", node_name="n1"))
    h.informer.pump()
    assert h.scheduler.index.revision == h.store.revision(), "handed over by the informer"
    view, _ = h.scheduler.index.view()
    assert view.by_name["n1"].cpu == 1000 and h.scheduler.index.rebuilds == 1


# ---- no garbage in cycles ----

def test_passes_are_freed_by_reference_counting_alone():
    """A server process freezes whatever survives a young collection (store/gc_tuning.py),
    so garbage in a reference cycle frozen that way is never freed: the views of every
    pass stayed (52 of ~0.6 MB each on the leader's worker after a 10,000-pod run). With the
    cyclic collector off, passes must leave nothing of theirs behind but the latest view."""
    import gc
    from shepherd_ha.controllers.scheduling import view as view_module

    def ours(o):
        module = type(o).__dict__.get("__module__")
        return isinstance(module, str) and module.startswith("shepherd_ha.controllers.scheduling")

    def scheduling_garbage():
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            found = [o for o in gc.garbage if ours(o) and id(o) not in older]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        return found

    older = set()
    h = Harness()
    h.create("nodes", *[node("n%d" % i, cpu="64", memory="256Gi", pods="1000") for i in range(20)])
    h.run()
    scheduling_garbage()
    # What exists now (this harness, other tests' leftovers) stays until the end: their ids
    # are not reused, and garbage among them is not the passes'.
    older = {id(o) for o in gc.get_objects() if ours(o)}

    def views():        # (not isinstance: a dead proxy, from another test, raises)
        return {id(o) for o in gc.get_objects() if type(o) is view_module.ClusterView}
    before = views()
    gc.disable()
    try:
        for i in range(12):
            h.create("pods", pod("p%d" % i, cpu="10m", owner="web"))
            h.run()
        alive = views() - before
        garbage = scheduling_garbage()
    finally:
        gc.enable()
    assert all(p["spec"].get("nodeName") for p in h.store.list("pods")), "the pods were not all bound"
    assert len(alive) <= 2, "%d pass views still alive after 12 passes (expected the latest only)" % len(alive)
    assert garbage == [], "passes left %d scheduling objects in reference cycles: %s" % (
        len(garbage), sorted({type(o).__name__ for o in garbage}))
