"""Hollow nodes: N simulated Nodes sending what a real agent sends, on one asyncio loop.

Per node, as agent/node.py does it:
- registration: POST /api/v1/nodes (labels, capacity, allocatable, addresses, nodeInfo,
  a Ready condition), then a status PATCH; its Lease in kube-node-lease created;
- every `lease_interval` (the agent's 5 s): a merge PATCH of the Lease's spec
  (holderIdentity, leaseDurationSeconds, renewTime with microseconds);
- every `status_interval` (the agent's 30 s): a GET of its Node at resourceVersion=0
  (the agent's check that it was not deleted, and what the control plane set), then a
  merge PATCH of the status subresource (conditions with Ready True and
  lastHeartbeatTime, capacity, usage).
Each node holds its own keep-alive connection to its home replica (node i talks to
replica i mod R), like an agent; a failed or 503 write moves to the next replica with
the same Idempotency-Key, as shepherd_ha/client does. Node loops start at random
offsets within their interval, so renewals spread evenly.

What is measured here: every renewal's latency (first send to acknowledgement, across
retries), failures, rounds that overran the interval, when each node's lease was last
acknowledged (what the NotReady tracker compares against), and each stretch of over 1.5
intervals between a node's two acknowledged renewals (how close it came to NotReady).
"""
import asyncio
import collections
import random
import time
import uuid

from agent.node import AGENT_VERSION, LEASE_NAMESPACE
from shepherd_ha.model.node_lease import LEASE_INTERVAL
from shepherd_ha.model.times import format_micro_time, format_time

from async_http import MERGE_PATCH, AsyncConnection, HttpError

LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % LEASE_NAMESPACE
NODES = "/api/v1/nodes"
GiB = 1 << 30


class NodeStats:
    """Counters and samples of the whole fleet's node traffic (one loop thread writes them)."""

    def __init__(self):
        self.renewals = []           # (monotonic time acknowledged, seconds it took)
        self.renew_failures = 0
        self.renew_failure_times = []  # wall-clock times of failed renewals (set against dumps)
        self.overruns = 0            # rounds whose renewal took longer than the interval
        self.ack_gaps = []           # seconds between a node's two acknowledged renewals, when over 1.5 intervals
        self.status_posts = 0
        self.status_failures = 0
        self.status_latencies = []   # seconds
        self.node_gets = 0
        self.registered = 0
        self.register_failures = 0
        self.errors = {}             # failure text -> count (connection errors, 503s, ...)
        self.crashes = 0             # unexpected exceptions in a node's loop (the loop goes on)
        self.loop_lag_max = 0.0      # seconds the loop woke up late (the fleet's own overload)
        self.loop_lags = []          # (monotonic time, lag) of wake-ups more than 0.1 s late


class HollowNode:
    __slots__ = ("name", "index", "home", "conns", "last_ack", "acks", "sends", "renewals", "ready_since",
                 "address")

    def __init__(self, name, index, home):
        self.name = name
        self.index = index
        self.home = home                  # index of its replica URL
        self.conns = {}                   # url -> AsyncConnection, opened on first use
        self.last_ack = None              # monotonic time of the last acknowledged renewal
        self.acks = collections.deque(maxlen=16)   # wall times of the last acknowledged renewals
        self.sends = collections.deque(maxlen=16)  # wall times the last renewals were sent
        self.ready_since = format_time()
        self.renewals = 0
        self.address = "10.%d.%d.%d" % (200 + index // 65536 % 50, index // 256 % 256, index % 256)


class NodeFleet:
    def __init__(self, urls, count, prefix="hollow", lease_interval=LEASE_INTERVAL, status_interval=30.0,
                 check_node=True, cpu="4", memory_gib=16, max_pods=110, timeout=10.0):
        self.urls = list(urls)
        self.lease_interval = float(lease_interval)
        self.status_interval = float(status_interval)
        self.check_node = check_node
        self.cpu, self.memory_gib, self.max_pods = cpu, memory_gib, max_pods
        self.timeout = timeout
        self.nodes = [HollowNode("%s-%04d" % (prefix, i), i, i % len(self.urls)) for i in range(count)]
        self.by_name = {n.name: n for n in self.nodes}
        self.stats = NodeStats()
        self.lease_duration = max(1, int(round(self.lease_interval * 8)))

    # ---- objects, as agent/node.py builds them ----

    def labels(self, node):
        return {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "shepherd.io/runtime": "hollow", "shepherd.io/hollow": "true"}

    def status(self, node):
        now = format_time()
        mem = self.memory_gib * GiB
        return {"capacity": {"cpu": self.cpu, "memory": "%dKi" % (mem // 1024), "pods": str(self.max_pods)},
                "allocatable": {"cpu": "%dm" % (int(self.cpu) * 1000 - 100),
                                "memory": "%dKi" % ((mem - (256 << 20)) // 1024), "pods": str(self.max_pods)},
                "addresses": [{"type": "InternalIP", "address": node.address},
                              {"type": "Hostname", "address": node.name}],
                "nodeInfo": {"containerRuntimeVersion": "hollow://1", "kubeletVersion": AGENT_VERSION,
                             "operatingSystem": "linux", "architecture": "amd64"},
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 0}},
                "conditions": [{"type": "Ready", "status": "True", "reason": "AgentReady",
                                "message": "shepherd-agent is posting ready status", "lastHeartbeatTime": now,
                                "lastTransitionTime": node.ready_since}],
                "usage": {"cpuPercent": round(random.uniform(1, 20), 1), "memoryUsedBytes": mem // 4,
                          "memoryAvailableBytes": mem - mem // 4, "memoryPercent": 25.0,
                          "diskUsedBytes": 10 * GiB, "diskTotalBytes": 100 * GiB,
                          "load1": 0.1, "load5": 0.1, "load15": 0.1, "timestamp": now}}

    def lease_spec(self, node):
        return {"holderIdentity": node.name, "leaseDurationSeconds": self.lease_duration,
                "renewTime": format_micro_time()}

    # ---- requests with failover ----

    def _conn(self, node, url):
        conn = node.conns.get(url)
        if conn is None:
            conn = node.conns[url] = AsyncConnection(url, self.timeout)
        return conn

    async def call(self, node, method, path, obj=None, content_type="application/json", deadline=None):
        """(status, body) from the first replica that answers other than 503, starting at the
        node's home; (None, reason) if none did before `deadline` (monotonic)."""
        deadline = deadline or time.monotonic() + self.timeout
        headers = {"Idempotency-Key": uuid.uuid4().hex} if method != "GET" else None
        last = "no attempt"
        throttled = 0
        for attempt in range(3 * len(self.urls)):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            url = self.urls[(node.home + attempt) % len(self.urls)]
            try:
                status, body = await self._conn(node, url).json(method, path, obj, content_type, headers,
                                                                timeout=remaining)
            except HttpError as exc:
                last = str(exc)
                self._count_error(last.split(": ", 1)[-1])
                await asyncio.sleep(0.05)
                continue
            if status == 429:
                # As the agents' client does (client/failover.py): another replica first; once
                # every replica refused, wait what they asked for.
                throttled += 1
                self._count_error("429 %s" % ((body or {}).get("message", "") if isinstance(body, dict) else ""))
                if throttled % len(self.urls) == 0:
                    asked = ((body or {}).get("details") or {}).get("retryAfterSeconds", 1) \
                        if isinstance(body, dict) else 1
                    await asyncio.sleep(max(0.0, min(float(asked), deadline - time.monotonic())))
                last = "429 Too Many Requests"
                continue
            if status != 503:
                if status >= 300:
                    self._count_error("%s: HTTP %d %s" % (method, status, (body or {}).get("message", "")
                                                          if isinstance(body, dict) else ""))
                return status, body
            last = "503 %s" % ((body or {}).get("message") if isinstance(body, dict) else "")
            self._count_error(last)
            await asyncio.sleep(0.05)
        return None, last

    def _count_error(self, text):
        text = text[:100]
        if text in self.stats.errors or len(self.stats.errors) < 50:
            self.stats.errors[text] = self.stats.errors.get(text, 0) + 1

    # ---- registration ----

    async def register_all(self, concurrency=32):
        sem = asyncio.Semaphore(concurrency)

        async def one(node):
            async with sem:
                ok = await self.register(node)
                if ok:
                    self.stats.registered += 1
                else:
                    self.stats.register_failures += 1
        await asyncio.gather(*(one(n) for n in self.nodes))

    async def register(self, node):
        obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node.name, "labels": self.labels(node)},
               "spec": {"unschedulable": False}, "status": self.status(node)}
        deadline = time.monotonic() + 60
        code, _ = await self.call(node, "POST", NODES, obj, deadline=deadline)
        if code not in (201, 409):
            return False
        code, _ = await self.call(node, "PATCH", "%s/%s/status" % (NODES, node.name), {"status": self.status(node)},
                                  MERGE_PATCH, deadline=deadline)
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": node.name, "namespace": LEASE_NAMESPACE}, "spec": self.lease_spec(node)}
        lcode, _ = await self.call(node, "POST", LEASES, lease, deadline=deadline)
        if lcode in (201, 409):
            node.last_ack = time.monotonic()
            node.acks.append(time.time())
        return code == 200 and lcode in (201, 409)

    # ---- loops ----

    async def run(self, stop):
        """Every node's lease and status loops until `stop` (an asyncio.Event) is set."""
        tasks = [asyncio.ensure_future(self._lag_monitor())]
        tasks += [asyncio.ensure_future(self._lease_loop(n, stop)) for n in self.nodes]
        tasks += [asyncio.ensure_future(self._status_loop(n, stop)) for n in self.nodes]
        await stop.wait()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for n in self.nodes:
            for conn in n.conns.values():
                conn.close()

    async def _lag_monitor(self, period=0.25):
        """How late the loop wakes up: a late renewal here is the simulator's fault, not the server's."""
        while True:
            before = time.monotonic()
            await asyncio.sleep(period)
            lag = time.monotonic() - before - period
            self.stats.loop_lag_max = max(self.stats.loop_lag_max, lag)
            if lag > 0.1:
                self.stats.loop_lags.append((time.monotonic(), lag))

    @staticmethod
    async def _sleep(stop, seconds):
        await asyncio.sleep(max(0.0, seconds))     # run() cancels the loops when stop is set

    async def _lease_loop(self, node, stop):
        await self._sleep(stop, random.uniform(0, self.lease_interval))
        path = "%s/%s" % (LEASES, node.name)
        while not stop.is_set():
            try:
                await self._renew(node, path, stop)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a node never stops renewing over one bad answer
                self.stats.crashes += 1
                self._count_error("crash: %s: %s" % (type(exc).__name__, exc))
                await asyncio.sleep(0.5)

    async def _renew(self, node, path, stop):
        started = time.monotonic()
        node.sends.append(time.time())
        code, _ = await self.call(node, "PATCH", path, {"spec": self.lease_spec(node)}, MERGE_PATCH,
                                  deadline=started + self.lease_interval)
        done = time.monotonic()
        if code == 200:
            if node.last_ack is not None and done - node.last_ack > 1.5 * self.lease_interval:
                self.stats.ack_gaps.append(done - node.last_ack)     # a round or more failed (or ran late)
            node.last_ack = done
            node.acks.append(time.time())
            node.renewals += 1
            self.stats.renewals.append((done, done - started))
        else:
            self.stats.renew_failures += 1
            self.stats.renew_failure_times.append(time.time())
        if done - started > self.lease_interval:
            self.stats.overruns += 1
        await self._sleep(stop, self.lease_interval - (time.monotonic() - started))

    async def _status_loop(self, node, stop):
        await self._sleep(stop, random.uniform(0, self.status_interval))
        path = "%s/%s/status" % (NODES, node.name)
        while not stop.is_set():
            started = time.monotonic()
            if self.check_node:
                await self.call(node, "GET", "%s/%s?resourceVersion=0" % (NODES, node.name),
                                deadline=started + self.status_interval)
                self.stats.node_gets += 1
            code, _ = await self.call(node, "PATCH", path, {"status": self.status(node)}, MERGE_PATCH,
                                      deadline=started + self.status_interval)
            if code == 200:
                self.stats.status_posts += 1
                self.stats.status_latencies.append(time.monotonic() - started)
            else:
                self.stats.status_failures += 1
            await self._sleep(stop, self.status_interval - (time.monotonic() - started))
