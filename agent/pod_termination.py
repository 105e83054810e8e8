"""Terminating a pod. A pod with deletionTimestamp gets SIGTERM, then SIGKILL once
its grace period is over (at its deletionTimestamp, the deadline the server set); its
containers are removed and the pod is deleted for good (gracePeriodSeconds=0, uid
precondition). A pod that disappears outright (forced delete, eviction) has its
containers killed and removed at once. Each pod is terminated by a thread of its
own, so a grace period never holds a worker.

Terminator touches the API client (the final delete), the runtime and this node's
containers, the stopper (container_stop.py), the Event sink, the pods' volume
directories, the pod table (removing the pod, requeueing a failed attempt) and
drop_status(uid) (the status writer).
"""
import logging
import threading
import time

from shepherd_ha.backoff import Backoff
from shepherd_ha.client import ApiError, ClientError, resolve_resource
from shepherd_ha.model.times import parse_seconds

from . import labels as L
from . import volumes as V

log = logging.getLogger(__name__)


class Terminator:
    def __init__(self, client, runtime, containers, stopper, events, table, drop_status, stop, state_dir=None):
        self.client = client
        self.runtime = runtime
        self.containers = containers          # NodeContainers (node_containers.py)
        self.stopper = stopper                # ContainerStopper
        self.events = events
        self.table = table                    # PodTable
        self.drop_status = drop_status
        self.stop = stop
        self.state_dir = state_dir
        self._pods_resource = resolve_resource("pods")

    def terminate(self, state):
        if state.terminator is not None and state.terminator.is_alive():
            return
        t = threading.Thread(target=self._terminator, args=(state,), name="terminate-%s" % state.name[:40],
                             daemon=True)
        state.terminator = t
        t.start()

    def _deadline_of(self, state, first_seen, first_seen_wall):
        """Monotonic deadline of the pod's grace period (0 when gone from the API): the
        pod's deletionTimestamp, which the API server sets to when the grace period ends
        (as Kubernetes does), never more than the grace period from when this agent
        first saw the deletion (clocks differ), less for an agent that was down meanwhile
        (or whose clock is ahead of the servers'). One second of slack covers the
        timestamp's whole seconds."""
        if state.removed:
            return 0.0
        meta = state.pod.get("metadata") or {}
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = (state.pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        grace = max(0.0, float(grace or 0))
        due = parse_seconds(meta.get("deletionTimestamp"))
        if due is None:
            return first_seen + grace
        return first_seen + min(grace, max(0.0, due + 1.0 - first_seen_wall))

    def _terminator(self, state):
        first_seen, first_seen_wall = time.monotonic(), time.time()
        try:
            infos = self.containers.of_pod(state.uid)
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
            self.stopper.stop_containers(apps, lambda: self._deadline_of(state, first_seen, first_seen_wall))
            if self.stop.is_set():
                return
            for cid in apps + sandboxes:
                self.runtime.remove(cid)
            for info in self.containers.of_pod(state.uid):
                self.runtime.remove(info.id)
            V.remove_pod_dir(self.state_dir, state.uid)
            if not state.removed:
                self._delete_for_good(state)
            if self.stop.is_set():
                return
            self.table.remove(state)
            self.drop_status(state.uid)
            log.info("pod %s (uid %s) is stopped and removed", state.key, state.uid)
        except Exception:  # noqa: BLE001
            log.exception("terminating pod %s failed; trying again", state.key)
            self.table.queue.add_after(state.uid, 1.0)

    def _delete_for_good(self, state):
        path = self._pods_resource.object_path(state.name, state.namespace)
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                "preconditions": {"uid": state.uid}}
        retry = Backoff(0.5, 5.0)
        while not self.stop.is_set():
            try:
                self.client.request("DELETE", path, params={"gracePeriodSeconds": "0"}, body=body)
                return
            except ApiError as err:
                if err.code in (403, 404, 409):
                    # gone already, or another pod of that name now (bound to another node,
                    # NodeRestriction answers 403 after a linearizable read)
                    return
                log.warning("deleting pod %s for good: %s; retrying", state.key, err)
            except ClientError as exc:
                log.warning("deleting pod %s for good: %s; retrying", state.key, exc)
            retry.wait(self.stop)
