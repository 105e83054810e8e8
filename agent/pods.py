"""The pods of one node: watch them, converge containers to their specs, report status.

Threads (all stop with the agent; containers keep running):
- watch: lists the pods bound to this node (`spec.nodeName`, resourceVersion=0,
  any replica) and watches them from the list's revision through the client, which
  fails over between replicas; a 410 lists again. While no replica answers, the
  pods known so far stay as they are.
- workers (--workers): take pod uids from a de-duplicating queue and sync one pod
  at a time (`_sync`): start missing containers, restart exited ones per
  restartPolicy with backoff, kill unhealthy ones, then compute the status and hand
  it to the status writer (agent/status_writer.py) when it changed.
- housekeeping: lists this node's containers every --housekeeping-interval
  seconds and queues the pods whose containers changed state (a container killed
  outside the agent), removes orphaned containers (their pod is no longer bound
  here), and re-syncs every pod now and then.
- runtime events (Docker's event stream, when the runtime has one): queues a pod as
  soon as one of its containers dies.
- prober (agent/prober.py): runs readiness and liveness probes.
- one short-lived thread per container being killed and per pod being terminated
  (they wait out grace periods without holding a worker).

Deletion: a pod with deletionTimestamp gets SIGTERM, then SIGKILL once its grace
period (deletionGracePeriodSeconds from deletionTimestamp) is over; its containers
are removed and the pod is deleted for good (gracePeriodSeconds=0, uid
precondition). A pod that disappears outright (forced delete, eviction) has its
containers killed and removed at once.
"""
import logging
import signal
import threading
import time

from shepherd_ha.client import ApiError, ClientError, NoReplicaReachable, WatchExpired, resolve_resource

from . import backoff as B
from . import labels as L
from . import spec as P
from . import status as S
from . import volumes as V
from .events import EventSink
from .runtime.base import ContainerGone, CreateError, ImagePullError, RuntimeFailure
from .status_writer import StatusWriter
from shepherd_ha.workqueue import WorkQueue

log = logging.getLogger(__name__)

TERMINAL = ("Succeeded", "Failed")
RESYNC_PERIOD = 10.0          # every pod is synced at least this often
KILL_WAIT = 5.0               # seconds to wait for a SIGKILLed container to be gone
TOMBSTONE_SECONDS = 60.0      # a pod deleted for good is ignored if a late event names it
ORPHAN_VOLUME_AGE = 60.0      # seconds before an unknown pod's volume directory is removed


class ContainerState:
    """What the agent remembers of one container of a pod (across its instances)."""

    def __init__(self, name, base, cap):
        self.name = name
        self.restart_count = 0
        self.backoff = B.Backoff(base, cap)          # crash loop
        self.retry_backoff = B.Backoff(base, cap)    # image pulls, refused creates
        self.retry_at = None          # monotonic time before which nothing is (re)started
        self.backoff_for = None       # id of the exited instance retry_at was computed for
        self.waiting = None           # (reason, message) while it cannot run
        self.last_terminated = None   # lastState.terminated of the current instance
        self.instance = None          # the latest instance's ContainerInfo
        self.final = None             # container status kept once it will not run again
        self.killing = None           # id of the instance being killed
        self.kill_for = None          # id of the instance kill_reason/kill_message are about
        self.kill_message = None      # why it was killed (terminated.message)
        self.kill_reason = None
        self.current_delay = 0.0      # the crash-loop delay applied to the last exit
        self.gone = None              # terminated state of an instance removed outside the agent
        self.retry_pending = False    # retry_at is for a failed pull/create, not a crash loop
        self.probe_instance = None    # the instance the probe states belong to
        self.readiness = None
        self.liveness = None
        self.pod_ip = ""


class PodState:
    def __init__(self, pod):
        meta = pod["metadata"]
        self.uid = meta["uid"]
        self.namespace = meta.get("namespace") or "default"
        self.name = meta["name"]
        self.pod = pod
        self.removed = False          # gone from the API (deleted for good, or bound elsewhere)
        self.containers = {}          # name -> ContainerState
        self.sandbox = None           # ContainerInfo of the network holder (multi-container pods)
        self.sandbox_backoff = None
        self.sandbox_retry_at = None
        self.sandbox_error = None
        self.pod_ip = ""
        self.start_time = (pod.get("status") or {}).get("startTime")
        phase = (pod.get("status") or {}).get("phase")
        self.terminal = phase if phase in TERMINAL else None
        self.terminator = None        # thread stopping the pod
        self.fingerprint = None       # container ids and states seen by housekeeping
        self.last_status = None       # the last status handed to the writer
        self.volumes_refreshed = time.monotonic()    # configMap volumes were last rewritten then

    @property
    def key(self):
        return "%s/%s" % (self.namespace, self.name)


def _rv(obj):
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class PodManager:
    def __init__(self, client, runtime, node_name, node_address, stop, backoff_base=B.DEFAULT_BASE,
                 backoff_cap=B.DEFAULT_CAP, sandbox_image="shepherd/busybox:1", housekeeping_interval=2.0,
                 workers=4, probes=True, state_dir=None, events=None, configmap_refresh_interval=60.0):
        self.client = client
        self.runtime = runtime
        self.node = node_name
        self.address = node_address
        self.stop = stop
        self.backoff_base = float(backoff_base)
        self.backoff_cap = float(backoff_cap)
        self.sandbox_image = sandbox_image
        self.housekeeping_interval = float(housekeeping_interval)
        self.n_workers = max(1, int(workers))
        self.states = {}              # uid -> PodState
        self._lock = threading.RLock()
        self._tombstones = {}         # uid -> monotonic time of the final delete
        self.queue = WorkQueue()
        self.synced = threading.Event()     # the pods were listed at least once
        self.api_reachable = False
        self.runtime_error = None           # the runtime's last failure, while it fails
        self.writer = StatusWriter(client, self.pod_of, self.observe, stop)
        self.state_dir = state_dir            # the pods' volume directories (agent/volumes.py)
        self.configmap_refresh_interval = float(configmap_refresh_interval)
        self.events = events if events is not None else EventSink(client, node_name, stop)
        self._get_configmap = V.configmap_getter(client)
        self._threads = []
        self._pods_resource = resolve_resource("pods")
        self.prober = None
        if probes:
            from .prober import Prober
            self.prober = Prober(self, runtime, stop)

    # ------------------------------------------------------------ lifecycle

    def start(self):
        self.writer.start()
        self.events.start()
        targets = [("pod-watch", self._watch_loop), ("housekeeping", self._housekeeping_loop),
                   ("runtime-events", self._events_loop)]
        targets += [("pod-worker-%d" % i, self._worker) for i in range(self.n_workers)]
        for name, target in targets:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        if self.prober is not None:
            self.prober.start()
        # Adopt what runs already, before the control plane answers: nothing is
        # touched until the pods are listed, but housekeeping knows the containers.

    def shutdown(self, timeout=5.0):
        """Stop the threads (the stop event is set by the caller); containers keep running."""
        self.queue.close()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self.writer.join(max(0.0, deadline - time.monotonic()))
        self.events.join(max(0.0, deadline - time.monotonic()))
        if self.prober is not None:
            self.prober.join(max(0.0, deadline - time.monotonic()))

    # ------------------------------------------------------------ pods from the API

    def pod_of(self, uid):
        state = self.states.get(uid)
        if state is None or state.removed:
            return None
        return state.pod

    def snapshot(self):
        with self._lock:
            return list(self.states.values())

    def observe(self, pod):
        """A pod object from a list, a watch event or a write's answer."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid or not meta.get("name"):
            return
        if (pod.get("spec") or {}).get("nodeName") != self.node:
            self.forget(pod)
            return
        with self._lock:
            if uid in self._tombstones:
                return
            state = self.states.get(uid)
            if state is None:
                state = self.states[uid] = PodState(pod)
                log.info("pod %s/%s (uid %s) is bound to this node", state.namespace, state.name, uid)
            elif _rv(pod) < _rv(state.pod):
                return            # older than what we know
            elif _rv(pod) == _rv(state.pod) and not state.removed:
                return
            state.pod = pod
            state.removed = False
        self.queue.add(uid)

    def forget(self, pod):
        """The pod is gone from this node (deleted, or no longer bound here)."""
        uid = (pod.get("metadata") or {}).get("uid")
        with self._lock:
            state = self.states.get(uid)
            if state is None:
                return
            state.removed = True
        self.writer.drop(uid)
        self.queue.add(uid)

    def _replace_all(self, items, list_rv):
        """A full list: pods missing from it are gone, unless we know a version of
        them newer than the list (a replica a little behind answered the list)."""
        seen = set()
        for pod in items:
            if (pod.get("spec") or {}).get("nodeName") == self.node:
                seen.add((pod.get("metadata") or {}).get("uid"))
                self.observe(pod)
        for state in self.snapshot():
            if state.uid not in seen and not state.removed and _rv(state.pod) <= list_rv:
                self.forget(state.pod)

    def _watch_loop(self):
        selector = "spec.nodeName=%s" % self.node
        delay = 0.5
        while not self.stop.is_set():
            try:
                listed = self.client.list("pods", None, field_selector=selector, consistent=False)
                items = (listed or {}).get("items") or []
                rv = ((listed or {}).get("metadata") or {}).get("resourceVersion") or "0"
                self._replace_all(items, int(rv) if str(rv).isdigit() else 0)
                self.api_reachable = True
                if not self.synced.is_set():
                    log.info("listed %d pod(s) bound to node %s", len(items), self.node)
                    self.synced.set()
                delay = 0.5
                for event in self.client.watch("pods", None, resource_version=rv, field_selector=selector,
                                               stop=self.stop):
                    self.api_reachable = True
                    etype = event.get("type")
                    obj = event.get("object") or {}
                    if etype in ("ADDED", "MODIFIED"):
                        self.observe(obj)
                    elif etype == "DELETED":
                        self.forget(obj)
            except WatchExpired:
                log.info("pod watch expired; listing again")
                continue
            except (NoReplicaReachable, ApiError, ClientError) as exc:
                self.api_reachable = False
                log.warning("pod list/watch failed: %s; retrying in %.1fs (pods keep running)", exc, delay)
            except Exception:  # noqa: BLE001 - the watch must survive anything
                log.exception("pod watch failed")
            self.stop.wait(delay)
            delay = min(10.0, delay * 2)

    # ------------------------------------------------------------ housekeeping

    def _own_containers(self):
        return self.runtime.list({L.NODE: self.node})

    def _housekeeping_loop(self):
        last_resync = time.monotonic()
        while not self.stop.wait(self.housekeeping_interval):
            try:
                self.housekeeping(resync=time.monotonic() - last_resync >= RESYNC_PERIOD)
                if time.monotonic() - last_resync >= RESYNC_PERIOD:
                    last_resync = time.monotonic()
            except RuntimeFailure as exc:
                if self.runtime_error is None:
                    log.warning("cannot list this node's containers: %s", exc)
                self.runtime_error = str(exc)
            except Exception:  # noqa: BLE001
                log.exception("housekeeping failed")

    def housekeeping(self, resync=False):
        """One pass: queue pods whose containers changed, remove orphans."""
        by_pod = {}
        for c in self._own_containers():
            by_pod.setdefault(c.labels.get(L.POD_UID, ""), []).append(c)
        if self.runtime_error is not None:
            log.info("the container runtime answers again")
            self.runtime_error = None
        now = time.monotonic()
        with self._lock:
            for uid, t in list(self._tombstones.items()):
                if now - t > TOMBSTONE_SECONDS:
                    del self._tombstones[uid]
            states = dict(self.states)
        for uid, containers in by_pod.items():
            state = states.get(uid)
            if state is None:
                if self.synced.is_set() and self.api_reachable:
                    self._remove_orphans(uid, containers)
                continue
            fingerprint = tuple(sorted((c.id, c.state) for c in containers))
            if fingerprint != state.fingerprint:
                state.fingerprint = fingerprint
                self.queue.add(uid)
        for uid, state in states.items():
            if uid not in by_pod and state.fingerprint:
                state.fingerprint = ()
                self.queue.add(uid)
            elif resync:
                self.queue.add(uid)
        if resync and self.synced.is_set() and self.api_reachable:
            self._remove_orphaned_volumes(set(by_pod))

    def _remove_orphaned_volumes(self, with_containers):
        """Volume directories of pods that are neither known nor have containers here
        (the agent stopped between removing a pod's containers and its directory).
        A directory younger than ORPHAN_VOLUME_AGE is left alone: its pod may have
        been observed after the snapshot this pass works from."""
        for uid in V.pod_uids(self.state_dir):
            if uid in with_containers or V.pod_dir_age(self.state_dir, uid) < ORPHAN_VOLUME_AGE:
                continue
            with self._lock:
                if uid in self.states:
                    continue
            log.info("removing the volumes of pod uid %s: it is not bound to node %s", uid, self.node)
            V.remove_pod_dir(self.state_dir, uid)

    def _remove_orphans(self, uid, containers):
        with self._lock:
            if uid in self.states:
                return
        # The list we know may come from a replica a little behind: ask for the pod
        # itself (a linearizable read) before removing anything.
        labels = containers[0].labels
        if labels.get(L.POD_NAME):
            try:
                pod = self.client.get("pods", labels[L.POD_NAME], namespace=labels.get(L.POD_NAMESPACE))
            except ApiError as err:
                if err.code != 404:
                    return
                pod = None
            except ClientError:
                return      # no replica answers: remove nothing now
            if pod is not None and (pod.get("metadata") or {}).get("uid") == uid \
                    and (pod.get("spec") or {}).get("nodeName") == self.node:
                self.observe(pod)
                return
        for c in containers:
            log.info("removing orphaned container %s (%s): pod uid %s is not bound to node %s",
                     c.name, c.id[:12], uid or "?", self.node)
            try:
                self.runtime.remove(c.id)
            except RuntimeFailure as exc:
                log.warning("cannot remove orphaned container %s: %s", c.id[:12], exc)
        if uid:
            V.remove_pod_dir(self.state_dir, uid)

    def _events_loop(self):
        try:
            for cid, action, labels in self.runtime.events({L.NODE: self.node}, self.stop):
                uid = labels.get(L.POD_UID)
                if uid and uid in self.states:
                    self.queue.add(uid)
        except Exception:  # noqa: BLE001 - housekeeping still notices changes
            log.exception("runtime event stream failed; relying on housekeeping")

    # ------------------------------------------------------------ workers

    def _worker(self):
        while not self.stop.is_set():
            uid = self.queue.get(timeout=0.5)
            if uid is None:
                continue
            try:
                self.sync(uid)
            except RuntimeFailure as exc:
                log.warning("sync of pod %s: runtime failure: %s; retrying", uid, exc)
                self.queue.add_after(uid, 1.0)
            except Exception:  # noqa: BLE001 - one bad pod must not stop the others
                log.exception("sync of pod %s failed; retrying", uid)
                self.queue.add_after(uid, 2.0)
            finally:
                self.queue.done(uid)

    def sync(self, uid):
        state = self.states.get(uid)
        if state is None:
            return
        pod = state.pod
        meta = pod.get("metadata") or {}
        if state.removed or meta.get("deletionTimestamp"):
            self._terminate(state)
            return
        if not self.synced.is_set():
            return      # adopt only once we know which pods are ours
        self._sync_running(state, pod)

    # ---- the containers of one pod ----

    def _pod_containers(self, uid):
        """ContainerInfo of every container of the pod (all instances, the sandbox too)."""
        out = []
        for c in self.runtime.list({L.NODE: self.node, L.POD_UID: uid}):
            info = self.runtime.inspect(c.id)
            if info is not None:
                out.append(info)
        return out

    def _sync_running(self, state, pod):
        spec = pod.get("spec") or {}
        policy = spec.get("restartPolicy") or "Always"
        containers = P.containers_of(pod)
        names = [c.get("name") for c in containers]
        infos = self._pod_containers(state.uid)
        now = time.monotonic()
        wake = []                  # seconds after which to sync again

        sandboxes = [i for i in infos if L.is_sandbox(i.labels)]
        instances = {}
        for info in infos:
            if L.is_sandbox(info.labels):
                continue
            cname = info.labels.get(L.CONTAINER_NAME)
            if cname not in names:
                log.info("pod %s: removing container %s of unknown container %r", state.key, info.id[:12], cname)
                self.runtime.remove(info.id)
                continue
            instances.setdefault(cname, []).append(info)

        # the network holder of a multi-container pod
        sandbox_id = None
        if P.needs_sandbox(pod) and not state.terminal:
            sandbox_id, delay = self._ensure_sandbox(state, pod, sandboxes, instances)
            if delay is not None:
                wake.append(delay)
        elif sandboxes and not P.needs_sandbox(pod):
            for sb in sandboxes:
                self.runtime.remove(sb.id)
        elif sandboxes:
            state.sandbox = max(sandboxes, key=lambda i: L.restart_count_of(i.labels))

        for c in containers:
            name = c.get("name")
            cs = state.containers.get(name)
            if cs is None:
                cs = state.containers[name] = ContainerState(name, self.backoff_base, self.backoff_cap)
            latest = self._latest(state, cs, instances.get(name) or [])
            delay = self._sync_container(state, pod, c, cs, latest, policy, sandbox_id, now)
            if delay is not None:
                wake.append(delay)

        # pod IP: the network owner's address
        if P.host_network(pod):
            state.pod_ip = self.address
        elif P.needs_sandbox(pod):
            if state.sandbox is not None and state.sandbox.running and state.sandbox.ip:
                state.pod_ip = state.sandbox.ip
        else:
            cs = state.containers.get(names[0]) if names else None
            if cs is not None and cs.instance is not None and cs.instance.running and cs.instance.ip:
                state.pod_ip = cs.instance.ip

        self._refresh_volumes(state, pod, now)
        self._report(state, pod, policy)
        if state.terminal and P.needs_sandbox(pod) and state.sandbox is not None and state.sandbox.running:
            self.runtime.remove(state.sandbox.id)
        if wake:
            self.queue.add_after(state.uid, max(0.05, min(wake)))

    def _refresh_volumes(self, state, pod, now):
        """Running pods see their ConfigMaps' changes in configMap volumes, at most
        every --configmap-refresh-interval (pods are synced every RESYNC_PERIOD)."""
        if (state.terminal or not self.state_dir or self.runtime.simulated or not self.api_reachable
                or now - state.volumes_refreshed < self.configmap_refresh_interval
                or not V.has_configmap_volumes(pod)):
            return
        state.volumes_refreshed = now
        try:
            V.refresh_configmap_volumes(pod, self.state_dir, self._get_configmap)
        except OSError as exc:
            log.warning("pod %s: refreshing configMap volumes: %s", state.key, exc)

    def _latest(self, state, cs, instances):
        """The newest instance; older ones are removed (a running duplicate is killed),
        except the newest exited one before it, kept for `logs --previous`."""
        if not instances:
            return None
        instances.sort(key=lambda i: (L.restart_count_of(i.labels), i.running, i.started_at or ""))
        latest = instances[-1]
        older = instances[:-1]
        kept_previous = False
        for info in reversed(older):
            if info.running:
                log.warning("pod %s: container %s has a second running instance %s; removing it",
                            state.key, cs.name, info.id[:12])
                self.runtime.remove(info.id)
            elif not kept_previous:
                kept_previous = True
            else:
                self.runtime.remove(info.id)
        return latest

    def _sync_container(self, state, pod, c, cs, latest, policy, sandbox_id, now):
        """Converge one container; returns seconds until it needs another look, or None."""
        name = c.get("name")
        if latest is not None and latest.state == "created" and not latest.ever_started:
            # created and never started: the agent died between create and start, or a
            # refused start; it is started again from scratch
            self.runtime.remove(latest.id)
            latest = None
            if cs.instance is not None and not cs.instance.ever_started:
                cs.instance = None

        if latest is None and cs.instance is not None and cs.instance.running and not state.terminal:
            # the running instance vanished (removed outside the agent): it counts as killed
            gone = cs.instance
            cs.gone = S.terminated(137, gone.started_at, S.rfc3339(), reason="ContainerMissing",
                                   message="the container was removed outside the agent",
                                   container_id="%s://%s" % (self.runtime.name, gone.id))["terminated"]
            cs.instance = None
            self._drop_probes(cs)
            if not B.should_restart(policy, 137):
                cs.final = True
                return None
            return self._start(state, pod, c, cs, cs.restart_count + 1, sandbox_id, cs.gone, now)

        if latest is not None:
            if cs.instance is None and cs.last_terminated is None:
                # adopted after an agent restart: its history is in its labels
                cs.last_terminated = L.last_state_of(latest.labels)
                cs.backoff.level = max(cs.backoff.level, L.restart_count_of(latest.labels))
            cs.restart_count = max(cs.restart_count, L.restart_count_of(latest.labels))
            cs.instance = latest
            cs.gone = None

        if latest is not None and latest.running:
            cs.waiting = None
            cs.final = None
            cs.retry_backoff.reset()
            self._ensure_probes(state, c, cs, latest)
            if cs.killing == latest.id:
                return None
            if latest.labels.get(L.SPEC_HASH) not in (None, L.spec_hash(c)):
                self._kill_async(state, cs, latest, "Killing",
                                 "Container %s definition changed, will be restarted" % name)
                return None
            if cs.liveness is not None and cs.probe_instance == latest.id and not cs.liveness.result:
                self._kill_async(state, cs, latest, "Error",
                                 "Container %s failed liveness probe, will be restarted: %s"
                                 % (name, cs.liveness.message))
                return None
            return None

        if latest is not None:          # exited (or dead)
            self._drop_probes(cs)
            if cs.killing == latest.id:
                cs.killing = None
            if state.terminal:
                return None
            exit_code = latest.exit_code if latest.exit_code is not None else 0
            if not B.should_restart(policy, exit_code):
                cs.final = True
                cs.waiting = None
                return None
            if cs.backoff_for != latest.id:
                started = S.parse_rfc3339(latest.started_at)
                finished = S.parse_rfc3339(latest.finished_at)
                ran_for = (finished - started) if started and finished else None
                cs.current_delay = cs.backoff.next_delay(ran_for)
                cs.retry_at = now + cs.current_delay
                cs.backoff_for = latest.id
                if cs.current_delay > 0 and not cs.retry_pending:
                    self.events.emit(pod, "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)"
                                     % (name, state.name, state.namespace, state.uid), "Warning", name)
            if now < cs.retry_at:
                if cs.retry_pending:
                    return cs.retry_at - now      # a refused restart keeps its own reason
                cs.waiting = ("CrashLoopBackOff", "back-off %s restarting failed container=%s pod=%s_%s(%s)"
                              % (B.human_seconds(cs.current_delay), name, state.name, state.namespace, state.uid))
                return cs.retry_at - now
            return self._start(state, pod, c, cs, cs.restart_count + 1, sandbox_id,
                               self._terminated_of(latest, cs), now)

        # no instance at all
        if state.terminal or cs.final:
            return None
        if cs.retry_at is not None and now < cs.retry_at:
            return cs.retry_at - now
        if cs.instance is not None and cs.instance.ever_started:
            # its last instance was removed outside the agent after it exited
            return self._start(state, pod, c, cs, cs.restart_count + 1, sandbox_id,
                               self._terminated_of(cs.instance, cs), now)
        return self._start(state, pod, c, cs, cs.restart_count, sandbox_id, cs.last_terminated, now)

    def _terminated_of(self, info, cs=None):
        message = reason = None
        if cs is not None and cs.kill_for == info.id:
            message, reason = cs.kill_message, cs.kill_reason
        term = S.terminated(info.exit_code, info.started_at, info.finished_at, reason=reason, message=message,
                            container_id="%s://%s" % (self.runtime.name, info.id), oom_killed=info.oom_killed)
        return term["terminated"]

    def _retry_later(self, cs, reason, message, now):
        cs.waiting = (reason, message)
        cs.retry_pending = True
        cs.retry_at = now + max(self.backoff_base / 10.0, cs.retry_backoff.next_delay())
        return cs.retry_at - now

    def _start(self, state, pod, c, cs, attempt, sandbox_id, last, now):
        """Pull if needed, create and start instance number `attempt`; returns the
        seconds until the next look (None when it started)."""
        name = c.get("name")
        image = c.get("image") or ""
        policy = c.get("imagePullPolicy") or "IfNotPresent"
        if P.needs_sandbox(pod) and not sandbox_id:
            cs.waiting = ("ContainerCreating", state.sandbox_error or "waiting for the pod's network")
            return None
        emit = self.events.emit
        try:
            present = self.runtime.image_present(image)
            if policy == "Never" and not present:
                message = 'Container image "%s" is not present with pull policy of Never' % image
                emit(pod, "ErrImageNeverPull", message, "Warning", name)
                return self._retry_later(cs, "ErrImageNeverPull", message, now)
            if policy == "Always" or not present:
                emit(pod, "Pulling", 'Pulling image "%s"' % image, "Normal", name)
                try:
                    self.runtime.pull_image(image)
                except ImagePullError as exc:
                    reason = "ErrImagePull" if cs.retry_backoff.level == 0 else "ImagePullBackOff"
                    message = ('Failed to pull image "%s": %s' % (image, exc)) if reason == "ErrImagePull" \
                        else 'Back-off pulling image "%s": %s' % (image, exc)
                    emit(pod, "Failed", 'Failed to pull image "%s": %s' % (image, exc), "Warning", name)
                    if reason == "ImagePullBackOff":
                        emit(pod, "BackOff", 'Back-off pulling image "%s"' % image, "Normal", name)
                    return self._retry_later(cs, reason, message, now)
                emit(pod, "Pulled", 'Successfully pulled image "%s"' % image, "Normal", name)
            else:
                emit(pod, "Pulled", 'Container image "%s" already present on machine' % image, "Normal", name)
            try:
                env = V.resolve_env(pod, c, self._get_configmap)
                mounts = V.prepare_mounts(pod, c, self.state_dir, self._get_configmap,
                                          write=not self.runtime.simulated)
            except (V.ConfigProblem, OSError) as exc:
                message = str(exc) if isinstance(exc, V.ConfigProblem) else \
                    "pod volumes under --state-dir %s: %s" % (self.state_dir, exc)
                emit(pod, getattr(exc, "event", "FailedMount"), "Error: %s" % message, "Warning", name)
                return self._retry_later(cs, "CreateContainerConfigError", message, now)
            config = P.container_config(pod, c, self.node, self.address, attempt, sandbox_id, last,
                                        env=env, mounts=mounts)
            try:
                cid = self.runtime.create(config)
            except CreateError as exc:
                if "Conflict" in str(exc) and "already in use" in str(exc):
                    self._remove_by_name(config.name)
                    cid = self.runtime.create(config)
                else:
                    raise
            emit(pod, "Created", "Created container %s" % name, "Normal", name)
            try:
                self.runtime.start(cid)
            except (CreateError, ContainerGone):
                self.runtime.remove(cid)
                raise
            emit(pod, "Started", "Started container %s" % name, "Normal", name)
        except CreateError as exc:
            emit(pod, "Failed", "Error: %s" % exc, "Warning", name)
            return self._retry_later(cs, "CreateContainerError", str(exc), now)
        log.info("pod %s: started container %s (%s, restart %d)", state.key, name, cid[:12], attempt)
        cs.restart_count = attempt
        cs.waiting = None
        cs.final = None
        cs.retry_at = None
        cs.retry_pending = False
        cs.retry_backoff.reset()
        cs.last_terminated = last
        cs.gone = None
        info = self.runtime.inspect(cid)
        cs.instance = info
        if info is not None and info.running:
            self._ensure_probes(state, c, cs, info)
        if info is not None and not info.running:
            return 0.05      # it exited at once: look again
        return None

    def _remove_by_name(self, name):
        for c in self._own_containers():
            if c.name == name:
                self.runtime.remove(c.id)

    # ---- sandbox ----

    def _ensure_sandbox(self, state, pod, sandboxes, instances):
        """The running sandbox's id (or None) and when to look again."""
        sandboxes.sort(key=lambda i: L.restart_count_of(i.labels))
        current = sandboxes[-1] if sandboxes else None
        for old in sandboxes[:-1]:
            self.runtime.remove(old.id)
        if current is not None and current.running:
            state.sandbox = current
            state.sandbox_error = None
            return current.id, None
        now = time.monotonic()
        if state.sandbox_retry_at is not None and now < state.sandbox_retry_at:
            return None, state.sandbox_retry_at - now
        # a new network: the containers in the old one must go
        for infos in instances.values():
            for info in infos:
                if info.running:
                    log.info("pod %s: the pod network is gone; stopping container %s", state.key, info.id[:12])
                    self.runtime.remove(info.id)
            infos[:] = [i for i in infos if not i.running]
        attempt = L.restart_count_of(current.labels) + 1 if current is not None else 0
        if current is not None:
            self.runtime.remove(current.id)
        if state.sandbox_backoff is None:
            state.sandbox_backoff = B.Backoff(self.backoff_base, self.backoff_cap)
        try:
            if not self.runtime.image_present(self.sandbox_image):
                raise CreateError('the sandbox image "%s" is not on this node (--sandbox-image; '
                                  'scripts/setup-docker.sh builds it)' % self.sandbox_image)
            config = P.sandbox_config(pod, self.node, self.address, self.sandbox_image, attempt)
            cid = self.runtime.create(config)
            try:
                self.runtime.start(cid)
            except (CreateError, ContainerGone):
                self.runtime.remove(cid)
                raise
        except CreateError as exc:
            state.sandbox_error = "pod network: %s" % exc
            self.events.emit(pod, "FailedCreatePodSandBox", "Failed to create the pod network: %s" % exc,
                             "Warning")
            state.sandbox_retry_at = now + max(0.1, state.sandbox_backoff.next_delay())
            for c in P.containers_of(pod):
                cs = state.containers.get(c.get("name"))
                if cs is not None:
                    cs.waiting = ("CreateContainerError", state.sandbox_error)
            return None, state.sandbox_retry_at - now
        state.sandbox = self.runtime.inspect(cid)
        state.sandbox_error = None
        state.sandbox_retry_at = None
        state.sandbox_backoff.reset()
        return cid, None

    # ---- probes ----

    def _ensure_probes(self, state, c, cs, info):
        if cs.probe_instance == info.id:
            return
        cs.probe_instance = info.id
        cs.readiness = cs.liveness = None
        if self.prober is None:
            return
        cs.readiness = self.prober.state_for(c.get("readinessProbe"), "readiness")
        cs.liveness = self.prober.state_for(c.get("livenessProbe"), "liveness")

    def _drop_probes(self, cs):
        cs.probe_instance = None
        cs.readiness = cs.liveness = None

    # ---- killing one container (liveness, spec change) ----

    def _kill_async(self, state, cs, info, reason, message):
        cs.killing = info.id
        cs.kill_for = info.id
        cs.kill_reason = reason
        cs.kill_message = message
        self.events.emit(state.pod, "Killing", message, "Normal", cs.name)
        grace = int((state.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30) or 0)
        deadline = time.monotonic() + grace
        log.info("pod %s: %s", state.key, message)

        def run():
            try:
                self._stop_containers([info.id], lambda: deadline)
            except RuntimeFailure as exc:
                log.warning("pod %s: stopping container %s: %s", state.key, info.id[:12], exc)
            finally:
                self.queue.add(state.uid)

        threading.Thread(target=run, name="kill-%s" % info.id[:12], daemon=True).start()

    def _stop_containers(self, ids, deadline_fn, poll=0.1):
        """SIGTERM the running ones, wait until they exit or deadline_fn() passes
        (asked again on every poll, so a shorter grace period applies at once),
        then SIGKILL. Returns once none runs (or KILL_WAIT after the SIGKILL)."""
        running = [cid for cid in ids if (self.runtime.inspect(cid) or _Gone).running]
        if not running:
            return
        if deadline_fn() > time.monotonic():
            for cid in running:
                self.runtime.signal(cid, signal.SIGTERM)
        while running and time.monotonic() < deadline_fn() and not self.stop.is_set():
            time.sleep(poll)
            running = [cid for cid in running if (self.runtime.inspect(cid) or _Gone).running]
        if self.stop.is_set() and running:
            return
        for cid in running:
            self.runtime.signal(cid, signal.SIGKILL)
        end = time.monotonic() + KILL_WAIT
        while running and time.monotonic() < end:
            time.sleep(poll / 2)
            running = [cid for cid in running if (self.runtime.inspect(cid) or _Gone).running]

    # ---- terminating a pod ----

    def _terminate(self, state):
        if state.terminator is not None and state.terminator.is_alive():
            return
        t = threading.Thread(target=self._terminator, args=(state,), name="terminate-%s" % state.name[:40],
                             daemon=True)
        state.terminator = t
        t.start()

    def _deadline_of(self, state, first_seen, first_seen_wall):
        """Monotonic deadline of the pod's grace period (0 when gone from the API):
        the grace period from when this agent first saw the deletion, less how long
        the delete had already waited then (an agent that was down meanwhile)."""
        if state.removed:
            return 0.0
        meta = state.pod.get("metadata") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (state.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        grace = max(0.0, float(grace or 0))
        requested = S.parse_rfc3339(meta.get("deletionTimestamp"))
        if requested is not None:
            # the timestamp has whole seconds (and clocks differ a little): a second of slack
            elapsed = min(grace, max(0.0, first_seen_wall - requested - 1.0))
            return first_seen - elapsed + grace
        return first_seen + grace

    def _terminator(self, state):
        first_seen, first_seen_wall = time.monotonic(), time.time()
        try:
            infos = self._pod_containers(state.uid)
            apps = [i.id for i in infos if not L.is_sandbox(i.labels)]
            sandboxes = [i.id for i in infos if L.is_sandbox(i.labels)]
            if state.removed:
                log.info("pod %s (uid %s) is gone from the API: removing its containers", state.key, state.uid)
            else:
                log.info("pod %s is being deleted: stopping its containers (grace %.0fs)", state.key,
                         max(0.0, self._deadline_of(state, first_seen, first_seen_wall) - time.monotonic()))
            if not state.removed:
                for info in infos:
                    if info.running and not L.is_sandbox(info.labels):
                        cname = info.labels.get(L.CONTAINER_NAME) or "?"
                        self.events.emit(state.pod, "Killing", "Stopping container %s" % cname, "Normal", cname)
            self._stop_containers(apps, lambda: self._deadline_of(state, first_seen, first_seen_wall))
            if self.stop.is_set():
                return
            for cid in apps + sandboxes:
                self.runtime.remove(cid)
            for info in self._pod_containers(state.uid):
                self.runtime.remove(info.id)
            V.remove_pod_dir(self.state_dir, state.uid)
            if not state.removed:
                self._delete_for_good(state)
            if self.stop.is_set():
                return
            with self._lock:
                if self.states.get(state.uid) is state:
                    del self.states[state.uid]
                self._tombstones[state.uid] = time.monotonic()
            self.writer.drop(state.uid)
            log.info("pod %s (uid %s) is stopped and removed", state.key, state.uid)
        except Exception:  # noqa: BLE001
            log.exception("terminating pod %s failed; trying again", state.key)
            self.queue.add_after(state.uid, 1.0)

    def _delete_for_good(self, state):
        path = self._pods_resource.object_path(state.name, state.namespace)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": state.uid}}
        delay = 0.5
        while not self.stop.is_set():
            try:
                self.client.request("DELETE", path, params={"gracePeriodSeconds": "0"}, body=body)
                return
            except ApiError as err:
                if err.code in (404, 409):
                    return       # gone already, or another pod of that name now
                log.warning("deleting pod %s for good: %s; retrying", state.key, err)
            except ClientError as exc:
                log.warning("deleting pod %s for good: %s; retrying", state.key, exc)
            self.stop.wait(delay)
            delay = min(5.0, delay * 2)

    # ---- status ----

    def container_statuses(self, state, pod):
        out = []
        for c in P.containers_of(pod):
            name = c.get("name")
            image = c.get("image") or ""
            cs = state.containers.get(name)
            if cs is None:
                out.append(S.container_status(name, image, S.waiting("ContainerCreating")))
                continue
            info = cs.instance
            cid = "%s://%s" % (self.runtime.name, info.id) if info is not None else ""
            image_id = ("%s://%s" % (self.runtime.name, info.image_id)) if info is not None and info.image_id else ""
            last = {"terminated": cs.last_terminated} if cs.last_terminated else {}
            if info is not None and info.running:
                ready = cs.killing != info.id and (cs.readiness is None or bool(cs.readiness.result))
                out.append(S.container_status(name, image, S.running(info.started_at), ready, cs.restart_count,
                                              last, image_id, cid, started=True))
            elif cs.waiting is not None and not (state.terminal or cs.final):
                reason, message = cs.waiting
                if info is not None and info.ever_started:
                    last = {"terminated": self._terminated_of(info, cs)}
                out.append(S.container_status(name, image, S.waiting(reason, message), False, cs.restart_count,
                                              last, image_id, cid))
            elif info is not None and info.ever_started:
                out.append(S.container_status(name, image, {"terminated": self._terminated_of(info, cs)}, False,
                                              cs.restart_count, last, image_id, cid))
            elif cs.gone:
                out.append(S.container_status(name, image, {"terminated": cs.gone}, False, cs.restart_count, last))
            else:
                out.append(S.container_status(name, image, S.waiting("ContainerCreating"), False,
                                              cs.restart_count, last))
        return out

    def _report(self, state, pod, policy):
        statuses = self.container_statuses(state, pod)
        current = pod.get("status") or {}
        phase = S.pod_phase(policy, statuses, state.terminal or current.get("phase"))
        if phase in TERMINAL and not state.terminal:
            state.terminal = phase
            log.info("pod %s %s", state.key, phase)
        if not state.start_time:
            state.start_time = current.get("startTime") or S.rfc3339()
        now = S.rfc3339()
        status = S.build_pod_status(pod, statuses, phase, state.pod_ip, self.address, state.start_time, now)
        state.last_status = status
        if S.differs(current, status):
            self.writer.submit(state.uid, status)
        else:
            self.writer.drop(state.uid)

    # ---- for the node status ----

    def running_containers(self):
        try:
            return sum(1 for c in self._own_containers() if c.state == "running" and not L.is_sandbox(c.labels))
        except RuntimeFailure:
            return None


class _GoneInfo:
    running = False


_Gone = _GoneInfo()
