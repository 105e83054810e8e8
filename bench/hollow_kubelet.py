"""A kubelet simulator for the hollow nodes: one watch on all pods, and a status PATCH
to Running for every pod bound to a hollow node. With `node_watches`, each node watches
its own pods as an agent does (hollow_node_watch.py) and those watches drive the status
writes; the watch on all pods then only counts (the benchmark's own observer).

The watch (shepherd_ha/client Client.watch: list, then changes, resumed across
replicas; a 410 re-lists) runs on its own thread and keeps a small record of every
pod. A pod bound to one of our nodes, not Running, is handed to the asyncio loop,
where workers write its status as the agent's status writer does
(agent/status_writer.py): a merge patch of the status subresource built with
agent/status.py (containers running and ready, podIP, hostIP, startTime, the
conditions), the pod's resourceVersion as a precondition; a 409 re-reads the pod and
tries again, a 404 drops it. A terminating pod (deletionTimestamp) is deleted for good
at once, as an agent does once its containers are stopped (agent/pod_termination.py:
gracePeriodSeconds 0, the pod's uid as a precondition); a hollow pod has nothing to
stop. Like agents, each node has one status writer (its pods'
writes one after another, on its own connection to the node's replica), so the
fleet sends as many status writes at once as real agents would, not a pool's worth.
"""
import asyncio
import itertools
import json
import logging
import threading
import time
import uuid

from agent import status as S
from shepherd_ha.client import Client, ClientError, WatchExpired
from shepherd_ha.model.times import format_time

from async_http import MERGE_PATCH, AsyncConnection, HttpError
from hollow_node_watch import WatchStats, follow_node

log = logging.getLogger("hollow_kubelet")

MAX_ATTEMPTS = 20


class KubeletStats:
    def __init__(self):
        self.patches = 0
        self.conflicts = 0
        self.failures = 0
        self.throttled = 0           # 429s: written later, after the Retry-After asked for
        self.gone = 0
        self.gave_up = 0
        self.finalized = 0           # terminating pods deleted for good (DELETE, grace 0)
        self.deleted = 0             # pods of the count label deleted (in bench_scale: evictions)
        self.watch_events = 0
        self.relists = 0
        self.watch_errors = 0
        self.crashes = 0             # bugs: a write that raised (the pod is dropped)
        self.latencies = []          # seconds per acknowledged status write


class HollowKubelet:
    def __init__(self, urls, fleet, loop, count_label=None, timeout=10.0, node_watches=False):
        """fleet: a hollow_nodes.NodeFleet (its by_name and home replicas); count_label:
        (key, value) of the pods that count() reports on."""
        self.node_watches = node_watches
        self.node_watch_stats = WatchStats()
        self.urls = list(urls)
        self.fleet = fleet
        self.loop = loop
        self.count_label = count_label
        self.timeout = timeout
        self.stats = KubeletStats()
        self.stop = threading.Event()
        self._lock = threading.Lock()
        self._pods = {}                      # uid -> (phase, node, counted, terminating)
        self._pending = set()                # uids queued or being written (loop thread only)
        self._latest = {}                    # uid -> newest pod seen while pending (loop thread only)
        self._queues = {}                    # node name -> its writer's queue (loop thread only)
        self._ips = itertools.count(1)
        self._thread = None
        self._node_tasks = None              # the node watches' future (node_watches)
        self.native_id = None

    # ---- the watch (its own thread) ----

    def start(self):
        self._thread = threading.Thread(target=self._watch, name="hollow-kubelet-watch", daemon=True)
        self._thread.start()
        if self.node_watches:
            self._node_tasks = asyncio.run_coroutine_threadsafe(self._follow_nodes(), self.loop)

    async def _follow_nodes(self):
        """One watch per node until stop (their tasks kept: follow_node logs its own failures)."""
        stop = asyncio.Event()
        tasks = []
        for name, node in self.fleet.by_name.items():
            tasks.append(asyncio.ensure_future(follow_node(self.urls, name, node.home, self._offer_if_ours, stop,
                                                           self.node_watch_stats, self.timeout)))
            await asyncio.sleep(0.005)        # 1,000 watches open over ~5 s, as agents start
        while not self.stop.is_set():
            await asyncio.sleep(0.5)
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _watch(self):
        self.native_id = threading.get_native_id()
        client = Client(self.urls, timeout=self.timeout, retry_deadline=30.0)
        rv = None
        deadline = time.monotonic() + 24 * 3600      # bounded even if nobody stops us
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                for event in client.watch("pods", resource_version=rv, stop=self.stop, read_timeout=30):
                    obj = event.get("object") or {}
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if event.get("type") != "BOOKMARK":
                        self.stats.watch_events += 1
                        self._observe(event["type"], obj)
            except WatchExpired:
                self.stats.relists += 1
                rv = None
            except ClientError as exc:
                self.stats.watch_errors += 1
                log.warning("pod watch: %s; retrying", exc)
                self.stop.wait(1.0)
        client.close()

    def _observe(self, etype, pod):
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        if etype == "DELETED":
            with self._lock:
                gone = self._pods.pop(uid, None)
            if gone is not None and gone[2]:
                self.stats.deleted += 1
            return
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        labels = meta.get("labels") or {}
        counted = self.count_label is None or labels.get(self.count_label[0]) == self.count_label[1]
        with self._lock:
            self._pods[uid] = (phase, node, counted, bool(meta.get("deletionTimestamp")))
        if not self.node_watches:
            self.loop.call_soon_threadsafe(self._offer_if_ours, etype, pod)

    def _offer_if_ours(self, etype, pod):
        """(The loop thread.) A pod of ours to be written Running, or deleted for good
        once terminating, if it needs it."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase") or "Pending"
        if uid and etype != "DELETED" and node in self.fleet.by_name and \
                (meta.get("deletionTimestamp") or phase not in ("Running",) + S.TERMINAL):
            self._offer(uid, pod)

    def count(self):
        """Pods with count_label, not terminating: total, bound to any node, Running; and
        those terminating (deleted, not yet gone), and all pods seen."""
        with self._lock:
            rows = list(self._pods.values())
        mine = [r for r in rows if r[2] and not r[3]]
        return {"total": len(mine), "bound": sum(1 for r in mine if r[1]),
                "running": sum(1 for r in mine if r[0] == "Running"),
                "terminating": sum(1 for r in rows if r[2] and r[3]), "all_pods": len(rows)}

    # ---- status writes (the loop) ----

    def _offer(self, uid, pod):
        if uid in self._pending:
            self._latest[uid] = pod      # written with the newest resourceVersion: fewer 409s
            return
        self._pending.add(uid)
        name = pod["spec"]["nodeName"]
        queue = self._queues.get(name)
        if queue is None:      # the node's status writer starts with its first pod
            queue = self._queues[name] = asyncio.Queue()
            asyncio.ensure_future(self._worker(self.fleet.by_name[name].home, queue))
        queue.put_nowait((uid, pod, 0))

    def status_for(self, pod):
        node = self.fleet.by_name[pod["spec"]["nodeName"]]
        now = format_time()
        uid = pod["metadata"]["uid"]
        statuses = [S.container_status(c.get("name"), c.get("image") or "", S.running(now), ready=True,
                                       image_id="hollow://sha256:" + uuid.uuid5(uuid.NAMESPACE_URL,
                                                                                 c.get("image") or "").hex,
                                       container_id="hollow://%s-%s" % (uid[:12], c.get("name")), started=True)
                    for c in (pod.get("spec") or {}).get("containers") or []]
        n = next(self._ips)
        pod_ip = "10.%d.%d.%d" % (64 + n // 65536 % 64, n // 256 % 256, n % 256)
        status = S.build_pod_status(pod, statuses, "Running", pod_ip, node.address, now, now)
        body = S.merge_patch_for(pod.get("status"), status)
        body["metadata"] = {"resourceVersion": pod["metadata"].get("resourceVersion")}
        return body

    async def _worker(self, home, queue):
        conns = {}
        while True:
            uid, pod, attempt = await queue.get()
            pod = self._latest.pop(uid, pod)
            try:
                done = await self._write(home, queue, conns, uid, pod, attempt)
            except Exception:  # noqa: BLE001 - one bad pod must not stop the worker
                self.stats.crashes += 1
                if self.stats.crashes <= 3:
                    log.exception("status write of %s failed", uid)
                done = True
            if done:
                self._pending.discard(uid)
                self._latest.pop(uid, None)

    async def _write(self, home, queue, conns, uid, pod, attempt):
        """True when this pod is finished with (written, deleted, gone, or given up)."""
        meta = pod["metadata"]
        pod_path = "/api/v1/namespaces/%s/pods/%s" % (meta.get("namespace") or "default", meta["name"])
        path = pod_path + "/status"
        url = self.urls[(home + attempt) % len(self.urls)]
        conn = conns.get(url) or conns.setdefault(url, AsyncConnection(url, self.timeout))
        started = time.monotonic()
        headers = {"Idempotency-Key": uuid.uuid4().hex}
        finalizing = bool(meta.get("deletionTimestamp"))
        if finalizing:
            request = ("DELETE", pod_path + "?gracePeriodSeconds=0",
                       json.dumps({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                                   "preconditions": {"uid": uid}}).encode(), "application/json")
        else:
            request = ("PATCH", path, json.dumps(self.status_for(pod)).encode(), MERGE_PATCH)
        try:
            code, body = await conn.request(*request, headers)
        except HttpError:
            code, body = None, None
        if finalizing and code in (200, 202):
            self.stats.finalized += 1
            return True
        if code == 200:
            self.stats.patches += 1
            self.stats.latencies.append(time.monotonic() - started)
            return True
        if code == 404 or (finalizing and code in (403, 409)):     # (a namesake with another uid)
            self.stats.gone += 1
            return True
        if code == 409:
            self.stats.conflicts += 1
            gcode = None
            try:
                gcode, fresh = await conn.request("GET", path.rsplit("/", 1)[0])
                fresh = json.loads(fresh) if gcode == 200 else None
            except (HttpError, ValueError):
                fresh = None
            if gcode == 404:
                self.stats.gone += 1
                return True
            if fresh is not None:
                if (fresh.get("metadata") or {}).get("uid") != uid or \
                        ((fresh.get("status") or {}).get("phase") == "Running" and
                         not (fresh.get("metadata") or {}).get("deletionTimestamp")):
                    return True
                pod = fresh          # (terminating: the retry deletes it for good)
        elif code == 429:
            # Overload, not failure: written again after the Retry-After the server asked
            # for (as agents wait, client/failover.py); it does not count against the pod.
            self.stats.throttled += 1
            try:
                asked = float(((json.loads(body) or {}).get("details") or {}).get("retryAfterSeconds", 1))
            except (TypeError, ValueError, AttributeError):
                asked = 1.0
            asyncio.get_running_loop().call_later(min(10.0, asked), queue.put_nowait, (uid, pod, attempt))
            return False
        else:
            self.stats.failures += 1
        if attempt + 1 >= MAX_ATTEMPTS:
            self.stats.gave_up += 1
            return True
        # Back off without holding this worker: the pod comes back to the queue later.
        asyncio.get_running_loop().call_later(min(2.0, 0.1 * (attempt + 1)), queue.put_nowait,
                                              (uid, pod, attempt + 1))
        return False
