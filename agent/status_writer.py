"""Writes pod statuses to the control plane, apart from the container work.

The pod workers compute a pod's status and hand it over here; this thread writes
it (merge patch of the status subresource, with the pod's resourceVersion as a
precondition) and never blocks a worker. While no replica is reachable the newest
status of each pod waits here and is written once one answers; an older pending
status of the same pod is simply replaced. A 409 (the pod changed meanwhile)
re-reads the pod and tries again if it is still the same pod (uid); a 404 drops
the write (the pod is gone).
"""
import logging
import threading
import time

from shepherd_ha.backoff import Backoff
from shepherd_ha.client import ApiError, ClientError

from . import status as S

log = logging.getLogger(__name__)

RETRY_MIN, RETRY_MAX = 0.5, 5.0


class StatusWriter:
    def __init__(self, client, pod_of, observe, stop):
        """pod_of(uid) -> the newest pod object the agent knows (or None: forget it);
        observe(pod): tells the agent about the pod a write returned."""
        self.client = client
        self.pod_of = pod_of
        self.observe = observe
        self.stop = stop
        self._pending = {}          # uid -> status
        self._order = []            # uids in arrival order
        self._cond = threading.Condition()
        self._thread = None
        self.writes = 0
        self.failures = 0

    def start(self):
        self._thread = threading.Thread(target=self._run, name="status-writer", daemon=True)
        self._thread.start()

    def join(self, timeout=None):
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)

    def submit(self, uid, status):
        with self._cond:
            if uid not in self._pending:
                self._order.append(uid)
            self._pending[uid] = status
            self._cond.notify()

    def drop(self, uid):
        with self._cond:
            self._pending.pop(uid, None)

    def pending(self):
        with self._cond:
            return len(self._pending)

    def _take(self):
        with self._cond:
            while not self._pending and not self.stop.is_set():
                self._cond.wait(0.5)
            if self.stop.is_set():
                return None, None
            while self._order:
                uid = self._order.pop(0)
                if uid in self._pending:
                    return uid, self._pending.pop(uid)
            return None, None

    def _run(self):
        retry = Backoff(RETRY_MIN, RETRY_MAX)
        while not self.stop.is_set():
            uid, status = self._take()
            if uid is None:
                continue
            try:
                self.write(uid, status)
                retry.reset()
            except ClientError as exc:
                self.failures += 1
                log.warning("cannot write the status of pod %s yet: %s; retrying in %.1fs", uid, exc, retry.peek())
                with self._cond:
                    if uid not in self._pending:      # a newer status would supersede this one
                        self._pending[uid] = status
                        self._order.append(uid)
                retry.wait(self.stop)
            except Exception:  # noqa: BLE001 - keep the writer alive
                log.exception("writing the status of pod %s failed", uid)
                self.stop.wait(1.0)

    def write(self, uid, status, attempts=5):
        """Write one status now (raises ClientError when no replica answers)."""
        for _ in range(attempts):
            pod = self.pod_of(uid)
            if pod is None:
                return False
            if not S.differs(pod.get("status"), status):
                return False
            meta = pod["metadata"]
            body = S.merge_patch_for(pod.get("status"), status)
            body["metadata"] = {"resourceVersion": meta.get("resourceVersion")}
            try:
                result = self.client.patch("pods", meta["name"], body, namespace=meta.get("namespace"),
                                           subresource="status")
            except ApiError as err:
                if err.code in (403, 404):       # 403: the name is now a pod of another node (NodeRestriction)
                    return False
                if err.code == 409:
                    try:
                        fresh = self.client.get("pods", meta["name"], namespace=meta.get("namespace"))
                    except ApiError as err2:
                        if err2.code in (403, 404):
                            return False
                        raise
                    if (fresh.get("metadata") or {}).get("uid") != uid:
                        return False
                    self.observe(fresh)
                    continue
                if err.code == 422:
                    log.error("the status of pod %s/%s was refused: %s %s", meta.get("namespace"), meta["name"],
                              err.message, err.causes)
                    return False
                raise
            self.writes += 1
            if isinstance(result, dict):
                self.observe(result)
            return True
        time.sleep(0.05)
        return False
