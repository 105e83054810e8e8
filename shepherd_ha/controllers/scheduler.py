"""The scheduler: binds pending pods to nodes, in batches.

Pods without `spec.nodeName` (and not being deleted or finished) are keys on the
queue. One pass takes every ready key (up to `batch_size`), reads those pods by
key, builds a view of the nodes with what is already bound to each (pods in the
store, never an agent's usage report), and places the pods one after the other,
each seeing the bindings made before it in the pass. All of the pass's writes go
to the store in one `write_many` (bounded Raft entries); each is atomic on its own:

- a binding: `spec.nodeName` and the status with `PodScheduled=True` in one
  change (commands.bind, a store op as Kubernetes' pods/binding; precondition: the pod's
  resourceVersion, so a pod changed meanwhile is not bound blindly), and a
  Normal `Scheduled` event (within the scheduler's --event-qps: one over it is
  dropped, never the binding);
- a pod that fits nowhere: `PodScheduled=False` (reason Unschedulable, a message
  counting why each node refused it: "0/3 nodes available: 2 Insufficient
  memory, 1 node(s) were NotReady") and a Warning `FailedScheduling` event (within
  the budget too), both written only when that message changes, so retries that
  learn nothing new write nothing.

A lost race (the pod changed after the pass read it) re-queues that pod alone.
Unschedulable pods are remembered and re-queued when something could make room:
a node added or changed (readiness, cordon, labels, allocatable), or a bound pod
deleted or finished. With no node registered at all, pods simply wait (nothing is
written) until the first node appears.

Passes are pipelined: the worker plans the next pass while a writer thread waits
for the last one's Raft entry. Bindings are "assumed" from the moment they are
planned until their write is answered, and every pass counts them, so no pass
gives away room an earlier one took. A write with an unknown outcome (no quorum:
it may still apply) keeps its bindings assumed for twice the write timeout, and
its pods are retried with the same node.

What is bound to each node is not recomputed from every pod in each pass: a
`UsageIndex` (`scheduling/usage.py`) keeps it from the pod and node changes the
informer hands over (`handle`), catches up with the watch log at the start of
each pass, and is rebuilt from a snapshot when the informer starts or resyncs. A
pass thus costs O(its pods + nodes), whatever the number of pods in the store;
with no node at all it reads only its own pods.
"""
import logging
import queue
import threading
import weakref

from shepherd_ha.store import commands
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.model.times import now_rfc3339

from .controller import Controller, key_of
from .scheduling.algorithm import MIN_FEASIBLE_NODES, NodePicker
from .scheduling.batch_events import event_op
from .scheduling.filters import FILTERS
from .scheduling.scorers import SCORERS
from .scheduling.usage import UsageIndex
from .scheduling.view import is_pending, occupies_node, ready_status

log = logging.getLogger("shepherd_ha.controllers")

BATCH_SIZE = 500          # pods per pass, hence bindings per write_many at most
EVENT_COMPONENT = "shepherd-scheduler"    # its events' source, and their own budget (registry.py)
_SHOWN = 5                # pods named in a pass's sentence before "and N more"


def _pod_ref(pod):
    """The pod as an event's involvedObject source (kind and apiVersion always set)."""
    if pod.get("kind") and pod.get("apiVersion"):
        return pod
    return dict(pod, kind=pod.get("kind") or "Pod", apiVersion=pod.get("apiVersion") or "v1")


def _scheduled_condition(pod):
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
            return cond
    return None


def _with_condition(pod, condition):
    """The pod's status with its PodScheduled condition replaced (others kept in order)."""
    status = dict(pod.get("status") or {})
    conditions = [c for c in status.get("conditions") or () if not (isinstance(c, dict) and
                                                                     c.get("type") == "PodScheduled")]
    status["conditions"] = [condition] + conditions
    return status


def _node_scheduling_facts(node):
    """What about a node can change where pods fit (not heartbeat data)."""
    if node is None:
        return None
    status = node.get("status") or {}
    return ((node.get("metadata") or {}).get("labels"), (node.get("spec") or {}).get("unschedulable"),
            status.get("allocatable"), status.get("capacity"), ready_status(node))


def _names(items):
    shown = ", ".join(items[:_SHOWN])
    return shown if len(items) <= _SHOWN else "%s and %d more" % (shown, len(items) - _SHOWN)


def _outcome_unknown(exc):
    """A write that failed this way may still be applied later (no quorum, timed out)."""
    return not isinstance(exc, Unavailable) or getattr(exc, "outcome", "unknown") != "not-applied"


class _Job:
    """One planned pass: its keys, the writes (one list of ops each) and what each is."""
    __slots__ = ("keys", "writes", "plans", "waiting", "assumed")

    def __init__(self, keys):
        self.keys = keys
        self.writes, self.plans, self.waiting = [], [], []
        self.assumed = {}            # (pod uid, node name) -> PodInfo for this pass's bindings


class Scheduler(Controller):
    name = "scheduler"
    watches = ("pods", "nodes")
    workers = 1       # one pass at a time: a pass's view of node usage must include the last pass's bindings
    # A binding lets a created pod run; the creations are paced (write_pacing.py), and with
    # them the pipeline, which pacing the bindings too would only stall.
    paced_writes = False

    def __init__(self, store, events=None, filters=None, scorers=None, batch_size=BATCH_SIZE,
                 percentage_of_nodes_to_score=0, min_feasible_nodes=MIN_FEASIBLE_NODES, pipelined=True):
        super().__init__(store, events)
        self.filters = list(FILTERS if filters is None else filters)
        self.scorers = list(SCORERS if scorers is None else scorers)
        self.batch_size = batch_size
        self.picker = NodePicker(self.filters, self.scorers, percentage_of_nodes_to_score, min_feasible_nodes)
        # A weak reference: a bound method would make a cycle, and a deposed epoch's scheduler
        # (with its index of every pod) would wait for a full collection, which the store's
        # periodic gc.freeze() (store/gc_tuning.py) puts off for good.
        on_fault = weakref.WeakMethod(self._left_out_of_index)
        self.index = UsageIndex(store, on_fault=lambda *fault: on_fault()(*fault))   # per node: what is bound there
        self._lock = threading.Lock()
        self.unschedulable = set()    # keys of pods that fit no node at their last attempt
        self.passes = 0               # passes that wrote something (tests and benchmarks read these)
        self.write_batches = 0        # write_many calls
        self.bound = 0
        # Pipelining: once start()ed, a pass's writes go to a writer thread (at most one
        # pass waiting for it), and its bindings stay assumed until written, so the next
        # pass, planned meanwhile, counts them. Passes run synchronously otherwise.
        self.pipelined = pipelined
        self._writer_alive = False
        self._jobs = queue.Queue(maxsize=1)
        # (pod uid, node name) -> (PodInfo, expiry or None): bindings decided, maybe not applied yet.
        # A pass's entries go once its write is answered; after an unknown outcome (no quorum:
        # the write may still apply) they linger for twice the write timeout.
        self._assumed = {}

    # ---- which keys ----

    def keys_for(self, change):
        if change.resource == "nodes":
            if _node_scheduling_facts(change.object) != _node_scheduling_facts(change.previous) \
                    and change.object is not None:
                return self._waiting()
            return []
        obj, prev = change.object, change.previous
        if obj is None:                               # deleted
            key = key_of(prev)
            with self._lock:
                self.unschedulable.discard(key)
            return self._waiting() if occupies_node(prev) else []
        if is_pending(obj):
            # Status-only changes (our own condition writes among them) change nothing here.
            if prev is None or obj.get("spec") != prev.get("spec") or \
                    (obj.get("metadata") or {}).get("ownerReferences") != \
                    (prev.get("metadata") or {}).get("ownerReferences"):
                return [key_of(obj)]
            return []
        with self._lock:
            self.unschedulable.discard(key_of(obj))
        if prev is not None and occupies_node(prev) and not occupies_node(obj):
            return self._waiting()                    # finished: its room is free again
        return []

    def _left_out_of_index(self, resource, obj, exc):
        self.object_failed("usage-index", resource, obj, exc)

    def _skip(self, key, pod, exc):
        """A pod this pass cannot place because reading it raised: reported, left alone until it changes."""
        with self._lock:
            self.unschedulable.discard(key)
        self.object_failed("schedule", "pods", pod if isinstance(pod, dict) else
                           {"metadata": {"namespace": key[0], "name": key[1]}}, exc)

    def _waiting(self):
        with self._lock:
            return list(self.unschedulable)

    def handle(self, change):
        self.index.apply(change)
        super().handle(change)

    def all_keys(self):
        """A resync: the index starts over from a snapshot (the informer starts from a fresh
        one, or the watch log may have been reset), and every pending pod is queued."""
        return self.index.rebuild()

    def maybe_resync(self):
        # The informer thread, between pumps: let the index follow the watch log beyond the
        # pods and nodes (other changes only move its revision), so a pass rarely finds the
        # log trimmed past it, which would cost a rebuild from a snapshot.
        self.index.sync()
        super().maybe_resync()

    # ---- one pass over many keys ----

    def thread_specs(self):
        """Worker thread plus, when pipelined, a writer thread: the next pass is planned
        while the last one's writes are in Raft."""
        specs = super().thread_specs()
        if self.pipelined:
            self._writer_alive = True
            specs.append(("scheduler-writer", self._write_loop))
        return specs

    def thread_restarted(self, name):
        if name == "scheduler-writer":
            self._writer_alive = True
        super().thread_restarted(name)

    def process_one(self, timeout=0.2):
        """Take every ready key (up to batch_size) and schedule them in one pass."""
        first = self.queue.get(timeout)
        if first is None:
            return False
        keys = [first]
        while len(keys) < self.batch_size:
            key = self.queue.get(0)
            if key is None:
                break
            keys.append(key)
        try:
            job = self.plan(keys)
        except Exception as exc:
            self._failed(keys, exc)
            for key in keys:
                self.queue.done(key)
            return True
        while job.writes and self._writer_alive:
            try:
                self._jobs.put(job, timeout=0.1)     # the writer commits it and releases its keys
                return True
            except queue.Full:
                continue
        self._commit_and_release(job)
        return True

    def _write_loop(self, stop):
        try:
            while not stop.is_set():
                try:
                    job = self._jobs.get(timeout=0.1)
                except queue.Empty:
                    continue
                self._commit_and_release(job)
        finally:
            # Stopping, or dying: the worker then commits its passes itself, until a restart.
            self._writer_alive = False
        while True:                      # stopping: give back what was never written
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            self._forget_assumed(job)
            for key in job.keys:
                self.queue.done(key)

    def _commit_and_release(self, job):
        unknown = False
        try:
            sentence = self.commit(job)
            if sentence:
                self.record(sentence)
        except Exception as exc:
            unknown = _outcome_unknown(exc)
            self._failed(job.keys, exc)
        finally:
            self._forget_assumed(job, linger=unknown)
            for key in job.keys:
                self.queue.done(key)

    def _failed(self, keys, exc):
        if isinstance(exc, Unavailable):
            log.info("%s: store unavailable (%s); retrying %d pods", self.name, exc, len(keys))
        else:
            log.error("%s: a pass over %d pods failed; retrying with backoff", self.name, len(keys),
                      exc_info=(type(exc), exc, exc.__traceback__))
        for key in keys:
            self.queue.add_with_backoff(key)

    def reconcile(self, key):
        return self.schedule([key])

    def schedule(self, keys):
        """Place the pending pods among `keys` and write the outcome; returns what was done,
        in one sentence."""
        job = self.plan(keys)
        unknown = False
        try:
            return self.commit(job)
        except Exception as exc:
            unknown = _outcome_unknown(exc)
            raise
        finally:
            self._forget_assumed(job, linger=unknown)

    def plan(self, keys):
        """Decide where the pending pods among `keys` go, against the store plus the
        bindings of passes still being written. Returns a _Job (nothing written yet)."""
        # Assumed bindings first, then the store (the index): a binding the writer forgets
        # in between was applied before it was forgotten, so the index has it (a write is
        # answered once applied here, its changes are in the watch log by then, and
        # index.view() catches up with the watch log under its lock before reading).
        # (The other order could miss it in both and count its room twice.)
        now_clock = self.store.clock()
        assumed = {}
        with self._lock:
            for (uid, node_name), (info, expiry) in list(self._assumed.items()):
                if expiry is not None and expiry <= now_clock:
                    del self._assumed[(uid, node_name)]
                else:
                    assumed.setdefault(uid, []).append((info, node_name))
        # The pass's own pods, by key; view() keeps those still pending at its revision.
        read = []
        for key in dict.fromkeys(keys):
            pod = self.store.get("pods", key[0], key[1])
            try:
                if pod is not None and is_pending(pod):
                    read.append((pod, self.index.pod_info(pod)))
            except Exception as exc:
                self._skip(key, pod, exc)
        view, pending = self.index.view(read, assumed)
        with self._lock:
            for key in keys:
                if key not in pending:
                    self.unschedulable.discard(key)    # bound, finished or gone meanwhile
        now = now_rfc3339()
        event_now = self.events.now() if self.events is not None and getattr(self.events, "now", None) else now
        job = _Job(keys)
        for key in keys:
            found = pending.get(key)
            if found is None:
                continue
            try:
                self._place(job, key, found, view, assumed, now, event_now)
            except Exception as exc:
                self._skip(key, found[0], exc)
        if job.assumed:
            with self._lock:
                for entry, info in job.assumed.items():
                    self._assumed[entry] = (info, None)
        return job

    def _place(self, job, key, found, view, assumed, now, event_now):
        """Plan one pending pod into the job: bound, unschedulable or waiting."""
        pod, info = found
        uid = pod["metadata"]["uid"]
        earlier = [n for _, n in assumed.get(uid, ()) if n in view.by_name]
        if earlier:
            # A binding whose write had an unknown outcome: its room is still counted
            # there, so write the same decision again (once applied, either wins).
            job.writes.append(self._binding(pod, earlier[0], now, event_now))
            job.plans.append(("bind", key, earlier[0]))
            job.assumed[(uid, earlier[0])] = assumed[uid][0][0]
            return
        node, diagnosis = self.picker.pick(info, view)
        if node is not None:
            ops = self._binding(pod, node.name, now, event_now)     # first: it raises on a malformed pod
            view.assume(info, node)
            job.writes.append(ops)
            job.plans.append(("bind", key, node.name))
            job.assumed[(uid, node.name)] = info
            return
        if not view.nodes:
            with self._lock:
                self.unschedulable.add(key)
            job.waiting.append(key)
            return
        message = diagnosis.message()
        ops = self._unschedulable(pod, message, now, event_now)
        with self._lock:
            self.unschedulable.add(key)
        if ops:
            job.writes.append(ops)
            job.plans.append(("unschedulable", key, message))

    def commit(self, job):
        """Write a planned pass in one write_many; returns its sentence."""
        if not job.writes:
            if job.waiting:
                return "%d pods wait for a node: none is registered" % len(job.waiting)
            return None
        results = self.store.write_many(job.writes)
        self.write_batches += 1
        self.passes += 1
        return self._account(job.plans, results, job.waiting)

    def _forget_assumed(self, job, linger=False):
        """The pass's write was answered: its bindings are in the store or not at all. With
        linger (the outcome is unknown), they keep counting for a while instead."""
        if job.assumed:
            expiry = self.store.clock() + 2 * self.store.write_timeout if linger else None
            with self._lock:
                for entry in job.assumed:
                    if linger:
                        if entry in self._assumed:
                            self._assumed[entry] = (self._assumed[entry][0], expiry)
                    else:
                        self._assumed.pop(entry, None)

    def _binding(self, pod, node_name, now, event_now=None):
        meta = pod["metadata"]
        if not isinstance(pod["spec"], dict):        # a malformed pod raises here, before any write
            raise TypeError("spec is %s, not a mapping" % type(pod["spec"]).__name__)
        condition = {"type": "PodScheduled", "status": "True", "lastTransitionTime": now}
        # One change for node and condition (not an update and a status update: two changes
        # for every replica's store, mirrors and watchers), and only those in the log entry.
        ops = [commands.bind(meta["namespace"], meta["name"], node_name, _with_condition(pod, condition),
                             precondition={"resourceVersion": meta["resourceVersion"], "uid": meta.get("uid")})]
        if self.events is not None:
            ops.append(event_op(self.store, self.events, _pod_ref(pod), "Scheduled",
                                "Successfully assigned %s/%s to %s" % (meta["namespace"], meta["name"], node_name),
                                now=event_now))
        return [op for op in ops if op is not None]     # an event over the budget is dropped

    def _unschedulable(self, pod, message, now, event_now=None):
        """Ops recording that the pod fits nowhere; None when it already says exactly that."""
        current = _scheduled_condition(pod)
        if current is not None and current.get("status") == "False" and \
                current.get("reason") == "Unschedulable" and current.get("message") == message:
            return None
        since = current.get("lastTransitionTime") if current is not None and current.get("status") == "False" \
            else None
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message,
                     "lastTransitionTime": since or now}
        meta = pod["metadata"]
        ops = [commands.update("pods", meta["namespace"], meta["name"], {"status": _with_condition(pod, condition)},
                               subresource="status", precondition={"resourceVersion": meta["resourceVersion"]})]
        if self.events is not None:
            ops.append(event_op(self.store, self.events, _pod_ref(pod), "FailedScheduling", message, "Warning",
                                now=event_now))
        return [op for op in ops if op is not None]     # an event over the budget is dropped

    def _account(self, plans, results, waiting):
        bound, unschedulable, requeued, dropped = [], [], [], []
        for (what, key, detail), result in zip(plans, results):
            name = "%s/%s" % key
            if result.get("ok"):
                if what == "bind":
                    bound.append("%s to %s" % (name, detail))
                    with self._lock:
                        self.unschedulable.discard(key)
                else:
                    unschedulable.append((name, detail))
                continue
            reason = result.get("reason")
            if reason == "NotFound":
                dropped.append(name)        # deleted meanwhile: nothing to do
                with self._lock:
                    self.unschedulable.discard(key)
            elif reason == "Fenced":
                self.queue.add_with_backoff(key)
                requeued.append(name)
            else:                           # lost a race (Conflict), or an event name clash: look again
                log.debug("%s: %s of %s refused (%s: %s); re-queued", self.name, what, name, reason,
                          result.get("message"))
                self.queue.add(key)
                requeued.append(name)
        self.bound += len(bound)
        if requeued or dropped:          # bindings that did not happen leave room for waiting pods
            for key in self._waiting():
                self.queue.add(key)
        parts = []
        if bound:
            parts.append("bound %s" % _names(bound) if len(bound) <= _SHOWN else
                         "bound %d pods (%s)" % (len(bound), _names(bound)))
        for name, message in unschedulable[:_SHOWN]:
            parts.append("%s is unschedulable: %s" % (name, message))
        if len(unschedulable) > _SHOWN:
            parts.append("%d more unschedulable" % (len(unschedulable) - _SHOWN))
        if requeued:
            parts.append("re-queued %s after a lost race" % _names(requeued))
        if dropped:
            parts.append("%s gone before binding" % _names(dropped))
        if waiting:
            parts.append("%d pods wait for a node: none is registered" % len(waiting))
        return "; ".join(parts) or None


def controllers(store, recorder, settings):
    scheduler = Scheduler(store, recorder)
    if settings is not None:
        scheduler.resync_period = settings.resync_period
    return [scheduler]
