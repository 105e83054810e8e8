"""NetnsTarget: the drills' hosts as network namespaces on this machine (root; used by CI).

cp1..cp3 run replicas r1..r3, w1 and w2 run node agents with the hollow runtime (simulated
pods, reported Running), each host in its own namespace with its own address (see
shepherd_ha/cli/netns_cluster.py). The node lifecycle is short (lease 1 s, NotReady after
3 s, pods evicted 2 s later) so the worker-loss drill takes seconds, not minutes.
"""
import os
import shutil
import signal
import tempfile
import time

import requests

from shepherd_ha.cli import local_members
from shepherd_ha.cli.netns_cluster import NetnsCluster
from target import Target, TargetError

LEASE_INTERVAL = 1.0
SERVER_OPTIONS = {"node_grace_period": 3.0, "pod_eviction_timeout": 2.0, "node_lease_interval": LEASE_INTERVAL}
CONTROL_PLANES = 3
WORKERS = 2


class NetnsTarget(Target):
    name = "netns"
    real_workers = False             # hollow agents: no containers, so no service-traffic drill
    boot_timeout = 20.0
    ready_timeout = 30.0
    node_not_ready_timeout = 30.0
    pod_move_timeout = 60.0

    def __init__(self, directory=None):
        self.control_planes = ["cp%d" % i for i in range(1, CONTROL_PLANES + 1)]
        self.workers = ["w%d" % i for i in range(1, WORKERS + 1)]
        self._own_dir = directory is None
        self.dir = directory
        self.cluster = None
        self.subnet = None
        self._joining = set()              # hosts started with --join, not members yet

    # ---- lifecycle ----

    def setup(self, progress=print):
        if self.dir is None:
            self.dir = tempfile.mkdtemp(prefix="shepherd-drills-")
        self.cluster = NetnsCluster(self.dir)
        progress("netns target: creating %d replicas and %d workers in %s" % (
            len(self.control_planes), len(self.workers), self.dir))
        # With tokens and TLS, as `local up` and the VM cluster run: the drills must pass them and verify the CA.
        self.cluster.create(len(self.control_planes), server_options=SERVER_OPTIONS, auth=True)
        self.subnet = self.cluster.network()["prefix"] + ".0/24"
        for worker in self.workers:
            self.cluster.add_agent(worker, "hollow", ["--lease-interval", str(LEASE_INTERVAL)])
        self.cluster.setup_network()
        self.cluster.start_all()
        self.cluster.wait_ready(self.ready_timeout)
        self.cluster.start_agents()
        self._wait_nodes_ready()
        progress("netns target: up (%s)" % self.describe())

    def _wait_nodes_ready(self):
        deadline = time.monotonic() + self.ready_timeout
        rows = []
        while time.monotonic() < deadline:
            rows = self.cluster.agent_status(timeout=1.0)
            if all(r["node"] == "Ready" for r in rows):
                return
            time.sleep(0.3)
        raise TargetError("netns target: worker nodes not Ready within %.0fs: %s (logs in %s/agents)"
                          % (self.ready_timeout, ", ".join("%s %s" % (r["name"], r["node"]) for r in rows), self.dir))

    def close(self):
        if self.cluster is None:
            return
        try:
            self.cluster.destroy()
        finally:
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)
            self.cluster = None

    # ---- the interface ----

    def _need_cluster(self):
        if self.cluster is None:
            raise TargetError("netns target: call setup() first")
        return self.cluster

    def token(self):
        return self._need_cluster().token()

    def api_urls(self):
        cluster = self._need_cluster()
        return [cluster.replica(self.replica_id(h))["api"] for h in self.control_planes]

    def ca_file(self):
        return self._need_cluster().ca_file

    def replica_id(self, host):
        """cpN runs rN, also after membership changes (cp4 joins as r4)."""
        if host not in self.control_planes and host not in self._joining:
            raise TargetError("%r is not a control-plane host (%s)" % (host, ", ".join(self.control_planes)))
        return "r" + host[2:]

    # ---- membership drills ----

    def start_control_plane(self):
        member = local_members.start_new_replica(self._need_cluster(), progress=lambda line: None)
        host = "cp" + member["id"][1:]
        self._joining.add(host)
        return host

    def member_entry(self, host):
        entry = self._need_cluster().replica(self.replica_id(host))
        return {"id": entry["id"], "raft": entry["raft"], "api": entry["api"]}

    def admitted(self, host):
        self._joining.discard(host)
        super().admitted(host)

    def retire(self, host):
        cluster, ident = self._need_cluster(), self.replica_id(host)
        if host in self._joining:
            local_members.forget_new_replica(cluster, ident)
        else:
            local_members.retire_replica(cluster, ident)
        self._joining.discard(host)
        self.control_planes = [h for h in self.control_planes if h != host]

    def node_name(self, worker):
        if worker not in self.workers:
            raise TargetError("%r is not a worker (%s)" % (worker, ", ".join(self.workers)))
        return worker

    def _ident(self, host):
        """The NetnsCluster name of a host: replica id or agent name."""
        return self.replica_id(host) if host in self.control_planes else self.node_name(host)

    def power_off(self, host):
        cluster = self._need_cluster()
        if host in self.control_planes:
            cluster.kill(self.replica_id(host))
        else:
            cluster.kill_agent(self.node_name(host))

    def power_on(self, host):
        cluster = self._need_cluster()
        if host in self.workers:
            cluster.start_agent(self.node_name(host))
            return
        cluster.start(self.replica_id(host))
        url = self.api_url(host) + "/healthz"
        deadline = time.monotonic() + self.boot_timeout
        while time.monotonic() < deadline:
            try:
                if requests.get(url, timeout=1.0, verify=self.verify()).ok:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise TargetError("%s: API %s not answering %.0fs after start (log %s/%s/server.log)"
                          % (host, url, self.boot_timeout, self.dir, self.replica_id(host)))

    def pause(self, host):
        self._signal(host, signal.SIGSTOP)

    def resume(self, host):
        self._signal(host, signal.SIGCONT)

    def _signal(self, host, sig):
        cluster = self._need_cluster()
        if host in self.control_planes:
            cluster.signal(self.replica_id(host), sig)
        else:
            pid = cluster.agent_pid(self.node_name(host))
            if pid:
                os.kill(pid, sig)

    def is_running(self, host):
        cluster = self._need_cluster()
        if host in self.control_planes:
            return cluster.pid(self.replica_id(host)) is not None
        return cluster.agent_pid(self.node_name(host)) is not None

    def restart(self, host):
        if host in self.control_planes:
            self._need_cluster().stop(self.replica_id(host))     # SIGTERM, as systemd would
        else:
            self._need_cluster().stop_agent(self.node_name(host))
        self.power_on(host)

    def isolate(self, host, peers):
        self._need_cluster().isolate(self._ident(host), [self._ident(p) for p in peers])

    def heal(self, host):
        self._need_cluster().heal(self._ident(host))

    def describe(self):
        where = self.subnet or "(not set up)"
        return "netns: %d replicas + %d hollow workers, each in its own namespace on %s" % (
            len(self.control_planes), len(self.workers), where)
