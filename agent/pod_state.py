"""What the agent remembers of each pod bound to its node and of each of its
containers, and the table of those pods (PodTable)."""
import logging
import threading
import time

from shepherd_ha.workqueue import WorkQueue

from . import backoff as B
from .status import TERMINAL

log = logging.getLogger(__name__)


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
    """One pod bound to this node: its latest object from the API and its containers."""

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


def resource_version(obj):
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


class PodTable:
    """The pods bound to this node by uid, and the queue of the ones to sync.

    The watch (pod_watch.py) feeds it, the workers (pods.py) sync what it queues,
    every other part reads it. `synced` is set once the pods were listed;
    `api_reachable` is the watch's latest word on the control plane."""

    def __init__(self, node, queue=None):
        self.node = node
        self.states = {}              # uid -> PodState
        self.lock = threading.RLock()
        self._tombstones = {}         # uid -> monotonic time of the final delete
        self.queue = queue if queue is not None else WorkQueue()
        self.synced = threading.Event()     # the pods were listed at least once
        self.api_reachable = False
        self._forget_listeners = []

    def on_forget(self, callback):
        """callback(uid) when a pod is gone from this node (the status writer drops its write)."""
        self._forget_listeners.append(callback)

    def get(self, uid):
        return self.states.get(uid)

    def knows(self, uid):
        with self.lock:
            return uid in self.states

    def pod_of(self, uid):
        state = self.states.get(uid)
        if state is None or state.removed:
            return None
        return state.pod

    def snapshot(self):
        with self.lock:
            return list(self.states.values())

    def by_uid(self):
        with self.lock:
            return dict(self.states)

    def observe(self, pod):
        """A pod object from a list, a watch event or a write's answer."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid or not meta.get("name"):
            return
        if (pod.get("spec") or {}).get("nodeName") != self.node:
            self.forget(pod)
            return
        with self.lock:
            if uid in self._tombstones:
                return
            state = self.states.get(uid)
            if state is None:
                state = self.states[uid] = PodState(pod)
                log.info("pod %s/%s (uid %s) is bound to this node", state.namespace, state.name, uid)
            elif resource_version(pod) < resource_version(state.pod):
                return            # older than what we know
            elif resource_version(pod) == resource_version(state.pod) and not state.removed:
                return
            state.pod = pod
            state.removed = False
        self.queue.add(uid)

    def forget(self, pod):
        """The pod is gone from this node (deleted, or no longer bound here)."""
        uid = (pod.get("metadata") or {}).get("uid")
        with self.lock:
            state = self.states.get(uid)
            if state is None:
                return
            state.removed = True
        for callback in self._forget_listeners:
            callback(uid)
        self.queue.add(uid)

    def remove(self, state):
        """The pod is stopped and deleted for good: a late event naming it is ignored."""
        with self.lock:
            if self.states.get(state.uid) is state:
                del self.states[state.uid]
            self._tombstones[state.uid] = time.monotonic()

    def expire_tombstones(self, max_age, now=None):
        now = time.monotonic() if now is None else now
        with self.lock:
            for uid, t in list(self._tombstones.items()):
                if now - t > max_age:
                    del self._tombstones[uid]
