"""Terminating a pod. A pod with deletionTimestamp gets SIGTERM, then SIGKILL once
its grace period (deletionGracePeriodSeconds from deletionTimestamp) is over; its
containers are removed and the pod is deleted for good (gracePeriodSeconds=0, uid
precondition). A pod that disappears outright (forced delete, eviction) has its
containers killed and removed at once. Each pod is terminated by a thread of its
own, so a grace period never holds a worker.

A mixin of PodManager (agent/pods.py), whose attributes it uses.
"""
import logging
import threading
import time

from shepherd_ha.client import ApiError, ClientError

from . import labels as L
from . import status as S
from . import volumes as V

log = logging.getLogger(__name__)


class PodTerminationMixin:
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
                if err.code in (403, 404, 409):
                    # gone already, or another pod of that name now (bound to another node,
                    # NodeRestriction answers 403 after a linearizable read)
                    return
                log.warning("deleting pod %s for good: %s; retrying", state.key, err)
            except ClientError as exc:
                log.warning("deleting pod %s for good: %s; retrying", state.key, exc)
            self.stop.wait(delay)
            delay = min(5.0, delay * 2)
