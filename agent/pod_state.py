"""What the agent remembers of each pod bound to its node and of each of its containers."""
import time

from . import backoff as B
from .status import TERMINAL


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
