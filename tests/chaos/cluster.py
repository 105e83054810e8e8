"""The cluster under test: a LocalCluster on loopback, or a NetnsCluster (each replica and
agent in its own network namespace) when we are root, so a leader can really be cut off."""
import os
import shutil
import signal
import tempfile
import time

import requests

from shepherd_ha.cli.local_cluster import LocalCluster

from . import credentials

# Below the kernel's ephemeral port range (see tests/integration/helpers.py).
PORT_LOW, PORT_HIGH = 20000, 32500
STATUS_TIMEOUT = 0.5


class ChaosSetupError(Exception):
    """The harness cannot run as asked (e.g. a network cut without root)."""


def have_root():
    return os.geteuid() == 0


class ReplicaView:
    """What the harness reads of any cluster under test, over HTTP: each replica's own status,
    the leader, metrics. A subclass gives ids(), url(id), verify and where(id)."""

    def urls(self):
        """{replica id: API URL}."""
        return {ident: self.url(ident) for ident in self.ids()}

    def state(self, ident, digest=False, timeout=STATUS_TIMEOUT):
        try:
            reply = requests.get(self.url(ident) + "/shepherd/v1/replica", verify=self.verify,
                                 params={"digest": "1"} if digest else None, timeout=timeout,
                                 headers=credentials.HEADERS)
            return reply.json() if reply.status_code == 200 else None
        except (requests.RequestException, ValueError):
            return None

    def states(self, digest=False, timeout=STATUS_TIMEOUT):
        return {ident: self.state(ident, digest, timeout) for ident in self.ids()}

    @staticmethod
    def leader_of(states):
        leaders = [s for s in states.values() if s and s.get("role") == "leader"]
        return max(leaders, key=lambda s: s["term"]) if leaders else None

    def leader(self, timeout=10.0):
        """The leader's status (highest term), waiting up to `timeout` s for one."""
        deadline = time.monotonic() + timeout
        while True:
            lead = self.leader_of(self.states())
            if lead is not None or time.monotonic() >= deadline:
                return lead
            time.sleep(0.05)

    def max_term(self):
        return max((s["term"] for s in self.states().values() if s), default=None)

    def brief_states(self):
        """{id: "<where> role R term T commit C applied A"} for failure messages."""
        out = {}
        for ident, s in self.states(timeout=2.0).items():
            said = "no answer" if not s else "%s term %s commit %s applied %s revision %s peers %s" % (
                s["role"], s["term"], s["commitIndex"], s["appliedIndex"], s["revision"], s.get("connectedPeers"))
            out[ident] = "%s, %s" % (self.where(ident), said)
        return out

    def metric(self, ident, name, timeout=2.0):
        """The value of an unlabelled metric from a replica's /metrics, or None."""
        try:
            text = requests.get(self.url(ident) + "/metrics", timeout=timeout, verify=self.verify,
                                headers=credentials.HEADERS).text
        except requests.RequestException:
            return None
        for line in text.splitlines():
            if line.startswith(name + " ") or line.startswith(name + "_total "):
                try:
                    return float(line.split()[-1])
                except ValueError:
                    return None
        return None


class ChaosCluster(ReplicaView):
    """Owns the cluster's directory and processes; a context manager."""

    def __init__(self, replicas=3, netns=None, server_options=None, keep=False, say=print, logs_to=None):
        self.replicas = replicas
        self.netns = have_root() if netns is None else netns
        if self.netns and not have_root():
            raise ChaosSetupError("network namespaces need root (run as root, or pass --no-netns and no cut faults)")
        self.server_options = server_options
        self.keep = keep
        self.say = say
        self.logs_to = logs_to          # copy the logs there before the directory goes
        self.dir = None
        self.lc = None
        self.agent_names = []

    # ---- lifecycle ----

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="shepherd-chaos-")
        try:
            if self.netns:
                from shepherd_ha.cli.netns_cluster import NetnsCluster
                self.lc = NetnsCluster(self.dir)
                self.lc.create(self.replicas, server_options=self.server_options, auth=True)
                self.lc.setup_network()
            else:
                self.lc = LocalCluster(self.dir)
                self.lc.create_on_free_ports(self.replicas, low=PORT_LOW, high=PORT_HIGH,
                                             server_options=self.server_options, auth=True)
            credentials.set_token(self.lc.token())
            self.lc.start_all()
            leader = self.lc.wait_ready(60)
        except BaseException:
            self._teardown()
            raise
        self.say("cluster of %d replicas %s in %s, leader %s, %s" % (
            self.replicas, "in network namespaces" if self.netns else "on loopback", self.dir, leader,
            "HTTPS verified against %s" % self.lc.ca_file if self.lc.tls else "plain HTTP"))
        return self

    def __exit__(self, *exc):
        self._teardown()
        return False

    def _teardown(self):
        if self.lc is None or not self.lc.exists:
            return
        try:
            self.lc.stop_agents(5)
            self.lc.stop_all(5)
            if self.logs_to:
                self.say("replica and agent logs saved in %s" % self.save_logs(self.logs_to))
            if self.netns:
                self.lc.teardown_network()
        finally:
            if self.keep:
                self.say("cluster files kept in %s" % self.dir)
            else:
                shutil.rmtree(self.dir, ignore_errors=True)

    # ---- TLS: the chaos runs over HTTPS, every client verifying the cluster CA ----

    @property
    def ca_file(self):
        return self.lc.ca_file

    @property
    def verify(self):
        return self.lc.verify

    # ---- replica processes ----

    @staticmethod
    def gone(pid):
        """True when process `pid` has exited (no such process, or a zombie)."""
        try:
            with open("/proc/%d/stat" % pid) as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
        except (OSError, IndexError):
            return True

    @classmethod
    def wait_gone(cls, pid, timeout=30.0):
        """Until process `pid` has fully exited (reaped, or a zombie). A SIGKILLed replica
        busy in the kernel (fsync on a loaded disk) can hold its ports for seconds after
        its command line is already empty; a restart in that window cannot bind."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if cls.gone(pid):
                return True
            time.sleep(0.02)
        return False

    def kill(self, ident):
        """SIGKILL a replica's process (only that process, as the OOM killer or `kill -9`
        would: a child it forked lives on, which is part of what is tested) and wait
        until it is really gone. Returns True if it ran."""
        pid = self.lc.pid(ident)
        if pid is None:
            return False
        self.lc.kill(ident)
        if not self.wait_gone(pid):
            self.say("  replica %s (pid %d) still exiting 30 s after SIGKILL" % (ident, pid))
        return True

    def kill_all(self):
        """SIGKILL every replica at once (none shuts down cleanly) and wait until all are gone;
        returns the ids that ran."""
        pids = {ident: self.lc.pid(ident) for ident in self.ids()}
        for pid in pids.values():
            if pid:
                os.kill(pid, signal.SIGKILL)
        for pid in pids.values():
            if pid:
                self.lc._reap(pid, 5)
                self.wait_gone(pid)
        return [ident for ident, pid in pids.items() if pid]

    def pause(self, ident):
        """SIGSTOP a replica's process (a hung machine: its sockets stay open); True if it ran."""
        return self.lc.signal(ident, signal.SIGSTOP)

    def resume(self, ident):
        self.lc.signal(ident, signal.SIGCONT)

    @property
    def can_cut(self):
        """Whether isolate() works: only replicas in network namespaces can be cut off."""
        return self.netns

    def isolate(self, ident):
        """Drop the Raft traffic between a replica and the others (clients still reach it)."""
        self.lc.isolate(ident)

    def heal(self, ident):
        """Undo isolate(); how many rules were removed."""
        return self.lc.heal(ident)

    def restart(self, ident, attempts=5, timeout=30.0):
        """Start a replica and wait until its API answers; start it again if its process
        exits first (e.g. its API port not free yet), saying why."""
        url = self.lc.replica(ident)["api"] + "/healthz"
        for attempt in range(1, attempts + 1):
            pid = self.lc.start(ident)
            deadline = time.monotonic() + timeout
            # by PID, not lc.pid(): while `ip netns exec` execs, the command line is briefly empty
            while time.monotonic() < deadline and not self.gone(pid):
                try:
                    if requests.get(url, timeout=0.5, verify=self.verify).status_code == 200:
                        return pid
                except requests.RequestException:
                    pass
                time.sleep(0.1)
            if not self.gone(pid):
                return pid            # running but slow to answer: wait_ready judges it
            self.say("  replica %s (pid %s) exited right after start, attempt %d of %d: %s; %s"
                     % (ident, pid, attempt, attempts, self._last_log_line(ident), self._port_holders(ident)))
            time.sleep(1.0)
        return None

    def _last_log_line(self, ident):
        try:
            with open(os.path.join(self.dir, ident, "server.log"), "rb") as fh:
                fh.seek(max(0, os.path.getsize(fh.name) - 300))
                return fh.read().decode(errors="replace").strip().splitlines()[-1][:200]
        except (OSError, IndexError):
            return "no log"

    def _port_holders(self, ident):
        """What holds the replica's API port (for the message of a failed start)."""
        import subprocess
        port = self.lc.replica(ident)["api"].rsplit(":", 1)[1]
        prefix = ["ip", "netns", "exec", self.lc.netns(ident)] if self.netns else []
        try:
            out = subprocess.run(prefix + ["ss", "-tanp", "sport", "= :%s" % port], capture_output=True, text=True,
                                 timeout=10).stdout.strip().splitlines()
        except (OSError, subprocess.SubprocessError) as exc:
            return "ss failed: %s" % exc
        return "sockets on port %s: %s" % (port, " | ".join(line.split(None, 5)[-1][:120] for line in out[1:6])
                                          or "none")

    def ensure_running(self):
        """Start every replica that is not running; returns the ids started."""
        started = [ident for ident in self.ids() if not self.lc.pid(ident)]
        for ident in started:
            self.restart(ident)
        return started

    def save_logs(self, dest):
        """Copy every replica's and agent's log to `dest` (evidence kept
        after the cluster directory is removed)."""
        os.makedirs(dest, exist_ok=True)
        for rel in ["%s/server.log" % i for i in self.ids()] + \
                ["agents/%s/agent.log" % a for a in self.agent_names]:
            src = os.path.join(self.dir, rel)
            if os.path.exists(src):
                shutil.copy(src, os.path.join(dest, rel.replace("/", "-")))
        return dest

    # ---- agents ----

    def add_hollow_agents(self, count):
        for i in range(1, count + 1):
            name = "chaos-node-%d" % i
            self.lc.add_agent(name, runtime="hollow")
            self.lc.start_agent(name)
            self.agent_names.append(name)

    def stop_agents(self):
        self.lc.stop_agents(10)

    # ---- addresses and state ----

    def ids(self):
        return self.lc.ids()

    def url(self, ident):
        return self.lc.replica(ident)["api"]

    def pid(self, ident):
        return self.lc.pid(ident)

    def where(self, ident):
        return "pid %s" % self.lc.pid(ident)

    def wait_ready(self, timeout=60.0):
        """Every replica running and ready, and a leader. Raises LocalClusterError."""
        return self.lc.wait_ready(timeout, ids=self.ids())
