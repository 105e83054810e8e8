"""A kubemark-like hollow fleet: hollow nodes, a kubelet simulator and the NotReady
tracker, in one process, for bench/bench_scale.py and tests/integration/test_hollow_fleet.py.

    fleet = HollowFleet(urls, nodes=200, count_label=("fleet-run", tag)).start()
    ... create Deployments whose pods carry that label ...
    fleet.stats()  -> plain dict: registrations, renewals, pods Running, NotReady, CPU
    fleet.stop()

One asyncio loop thread carries every node's connection and the status writers
(hollow_nodes.py, hollow_kubelet.py); the pod watch and the node watch have a thread
each. `roles` picks the parts one process runs: "nodes" (registration, leases,
status, the NotReady tracker) and "kubelet" (the pod watch and status writes).

FleetProcess runs them in two child processes, so that the fleet's CPU is its own
(psutil on the children), the benchmark's probes do not share its GIL, and a burst
of pod status writes never delays a lease renewal behind the same GIL: on a starved
machine, a single-process fleet fell behind on renewals (the lag monitor in
hollow_nodes.py shows how far), which looked like the control plane's fault.
"""
import asyncio
import multiprocessing
import os
import sys
import threading
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (HERE, os.path.dirname(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from fleet_checks import ReadinessTracker  # noqa: E402
from shepherd_ha.cli.open_files import raise_open_file_limit  # noqa: E402
from hollow_kubelet import HollowKubelet  # noqa: E402
from hollow_nodes import NodeFleet  # noqa: E402


def window(samples, since=None, until=None):
    """The latencies of (time, latency) samples taken between since and until."""
    return [lat for t, lat in samples if (since is None or t >= since) and (until is None or t <= until)]


async def _cancel_all():
    """Cancel every task of the running loop but this one (the kubelet's workers)."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class HollowFleet:
    def __init__(self, urls, nodes, prefix="hollow", lease_interval=5.0, status_interval=30.0,
                 count_label=None, grace=15.0, check_node=True, register_timeout=300.0,
                 roles=("nodes", "kubelet"), node_watches=False):
        raise_open_file_limit()
        self.urls = list(urls)
        self.roles = tuple(roles)
        self.register_timeout = register_timeout
        self.loop = asyncio.new_event_loop()
        self.nodes = NodeFleet(self.urls, nodes, prefix, lease_interval, status_interval, check_node)
        self.kubelet = HollowKubelet(self.urls, self.nodes, self.loop, count_label, node_watches=node_watches)
        self.readiness = ReadinessTracker(self.urls, self.nodes, grace)
        self._stop = None
        self._thread = None
        self._run_future = None
        self.native_ids = []
        self.registered_in = None

    def start(self):
        """Register every node (returns once done), then run leases, status and the kubelet."""
        ready = threading.Event()

        def run_loop():
            self.native_ids.append(threading.get_native_id())
            asyncio.set_event_loop(self.loop)
            self._stop = asyncio.Event()
            ready.set()
            self.loop.run_forever()
        self._thread = threading.Thread(target=run_loop, name="hollow-fleet-loop", daemon=True)
        self._thread.start()
        ready.wait(10)
        if "nodes" in self.roles:
            t0 = time.monotonic()
            asyncio.run_coroutine_threadsafe(self.nodes.register_all(), self.loop).result(self.register_timeout)
            self.registered_in = time.monotonic() - t0
            self.readiness.start()
            self._run_future = asyncio.run_coroutine_threadsafe(self.nodes.run(self._stop), self.loop)
        if "kubelet" in self.roles:
            self.kubelet.start()
        return self

    def stop(self):
        self.kubelet.stop.set()
        self.readiness.stop()
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            try:
                if self._run_future is not None:
                    self._run_future.result(15)
            except Exception:  # noqa: BLE001 - stopping anyway
                pass
            try:
                asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(10)
            except Exception:  # noqa: BLE001 - stopping anyway
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        if self.kubelet._thread is not None:
            self.kubelet._thread.join(10)

    def cpu_seconds(self):
        """CPU time of the fleet's own threads (loop, pod watch, node watch)."""
        ids = set(self.native_ids) | {self.kubelet.native_id, self.readiness.native_id}
        try:
            return sum(t.user_time + t.system_time for t in psutil.Process().threads() if t.id in ids)
        except psutil.Error:
            return None

    def stats(self, since=None, until=None):
        """A plain dict (picklable): counts, and latencies of renewals acknowledged in [since, until]
        (monotonic times of this process)."""
        out = {"cpu_seconds": self.cpu_seconds(), "now": time.monotonic()}
        if "nodes" in self.roles:
            ns = self.nodes.stats
            out.update({
                "nodes": len(self.nodes.nodes), "registered": ns.registered, "register_failures": ns.register_failures,
                "registered_in": self.registered_in,
                "renewals": len(ns.renewals), "renew_failures": ns.renew_failures, "renew_overruns": ns.overruns,
                "renew_failure_times": list(ns.renew_failure_times), "renew_gaps": list(ns.ack_gaps),
                "renew_latencies": window(ns.renewals, since, until),
                "status_posts": ns.status_posts, "status_failures": ns.status_failures, "node_gets": ns.node_gets,
                "never_renewed": sum(1 for n in self.nodes.nodes if n.renewals == 0),
                "errors": dict(ns.errors), "crashes": ns.crashes, "loop_lag_max": ns.loop_lag_max,
                # (list(): the loop thread adds connections while this thread reads them)
                "stale_retries": sum(c.stale_retries for n in self.nodes.nodes for c in list(n.conns.values())),
                "loop_lags_over_1s": sum(1 for _, lag in ns.loop_lags if lag > 1),
                "readiness": self.readiness.result()})
        if "kubelet" in self.roles:
            ks = self.kubelet.stats
            out.update({
                "pods": self.kubelet.count(), "pod_patches": ks.patches, "pod_conflicts": ks.conflicts,
                "pod_failures": ks.failures, "pod_throttled": ks.throttled, "pod_gave_up": ks.gave_up,
                "pod_gone": ks.gone, "pods_deleted": ks.deleted, "pods_finalized": ks.finalized,
                "kubelet_crashes": ks.crashes,
                "pod_latencies": list(ks.latencies), "watch_events": ks.watch_events, "relists": ks.relists,
                "watch_errors": ks.watch_errors})
            if self.kubelet.node_watches:
                ws = self.kubelet.node_watch_stats
                out["node_watches"] = {"opened": ws.opened, "events": ws.events, "relists": ws.relists,
                                       "throttled": ws.throttled, "errors": ws.errors, "crashes": ws.crashes}
        return out


# ---- the same fleet in a child process ----

def _child(conn, kwargs):
    fleet = None
    try:
        fleet = HollowFleet(**kwargs).start()
        conn.send(("started", fleet.stats()))
        deadline = time.monotonic() + 24 * 3600
        while time.monotonic() < deadline:
            if not conn.poll(1.0):
                continue
            what, args = conn.recv()
            if what == "stop":
                break
            conn.send(("stats", fleet.stats(*args)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", "%s: %s" % (type(exc).__name__, exc)))
    finally:
        if fleet is not None:
            fleet.stop()
        conn.send(("stopped", None))


class FleetProcess:
    """HollowFleet in two child processes (nodes; kubelet): start(), stats(since, until),
    cpu_seconds(), rss_mb(), stop(). Times passed to stats are the parent's
    time.monotonic() (CLOCK_MONOTONIC is shared by every process on the machine)."""

    ROLES = (("nodes",), ("kubelet",))

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.procs = []           # (process, connection)
        self._lock = threading.Lock()

    def start(self, timeout=600.0):
        ctx = multiprocessing.get_context("spawn")
        for roles in self.ROLES:
            conn, child = ctx.Pipe()
            proc = ctx.Process(target=_child, args=(child, dict(self.kwargs, roles=roles)),
                               name="hollow-fleet-" + "-".join(roles), daemon=True)
            proc.start()
            self.procs.append((proc, conn))
            if not conn.poll(timeout):
                self.stop()
                raise RuntimeError("the hollow fleet (%s) did not start within %.0fs" % (roles, timeout))
            what, payload = conn.recv()
            if what != "started":
                self.stop()
                raise RuntimeError("the hollow fleet (%s) failed to start: %s" % (roles, payload))
        return self

    @property
    def pids(self):
        return [p.pid for p, _ in self.procs]

    def stats(self, since=None, until=None, timeout=60.0):
        out = {}
        with self._lock:
            for proc, conn in self.procs:
                conn.send(("stats", (since, until)))
                if not conn.poll(timeout):
                    raise RuntimeError("the hollow fleet did not answer within %.0fs" % timeout)
                what, payload = conn.recv()
                if what != "stats":
                    raise RuntimeError("the hollow fleet failed: %s" % payload)
                out.update(payload)
        out["cpu_seconds"] = self.cpu_seconds()     # whole processes, not only the fleet's threads
        return out

    def _each(self, read):
        total = 0.0
        for proc, _ in self.procs:
            try:
                total += read(psutil.Process(proc.pid))
            except psutil.Error:
                return None
        return total

    def cpu_seconds(self):
        return self._each(lambda p: sum(p.cpu_times()[:2]))

    def rss_mb(self):
        return self._each(lambda p: p.memory_info().rss / 1e6)

    def stop(self, timeout=30.0):
        for proc, conn in self.procs:
            try:
                with self._lock:
                    conn.send(("stop", None))
            except (OSError, ValueError):
                pass
        for proc, _ in self.procs:
            proc.join(timeout)
            if proc.is_alive():
                proc.kill()      # our own child, by its handle
                proc.join(5)
        self.procs = []
