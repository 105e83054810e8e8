"""A whole cluster on this machine: replica processes on 127.0.0.1, state under one dir.

Layout of DIR:
  cluster.yaml          replicas (id, Raft and API addresses), Raft password and salt, base port, tls,
                        cluster id
  config                client config for `sheepctl --config DIR/config` (https URLs, the CA)
  kubeconfig            the same for kubectl and client-go (`kubectl --kubeconfig DIR/kubeconfig`)
  ca.crt, ca.key        the cluster CA; <id>/tls.*, agents/<name>/tls.*: certificates
                        (cli/cluster_tls.py); a cluster made with tls=False has none
  <id>/server.yaml      that replica's `shepherd-ha server --config`
  <id>/data/            its Raft journal and snapshots
  <id>/server.log       its output
  <id>/pid              its PID while it runs
  agents/<name>/agent.yaml   a node agent's `shepherd-agent --config` (agents are listed in cluster.yaml)
  agents/<name>/agent.log    its output
  agents/<name>/pid          its PID while it runs

Used by `shepherd-ha local`, the tests and the benchmarks. Processes are only ever
signalled by the PID we recorded, after checking it still runs our command line.
The agents' half: cli/local_agents.py; certificates: cli/cluster_tls.py.
"""
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

import requests
import yaml

from shepherd_ha import cluster_identity
from . import node_tokens
from shepherd_ha.store import raft_secrets

from . import cluster_files, cluster_tls
from .local_agents import LocalAgents
from .local_errors import LocalClusterError
from .cluster_files import write_private  # noqa: F401  (netns_cluster, tests)

API_OFFSET, RAFT_OFFSET = 0, 100


class PortsInUse(LocalClusterError):
    """A port the new cluster would listen on is taken."""


def port_free(port, host="127.0.0.1"):
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return True
        except OSError:
            return False


def find_base_port(replicas, low=20000, high=32000, attempts=200):
    """A base port where every API and Raft port of `replicas` replicas is free. The range
    stays below the kernel's ephemeral ports (32768+), which outgoing connections take."""
    rng = secrets.SystemRandom()
    for _ in range(attempts):
        base = rng.randrange(low, high - 200)
        if all(port_free(base + off + i) for i in range(1, replicas + 1) for off in (API_OFFSET, RAFT_OFFSET)):
            return base
    raise LocalClusterError("no free port range found between %d and %d" % (low, high))


class LocalCluster(LocalAgents, cluster_tls.TlsLayout):
    def __init__(self, directory):
        self.dir = os.path.abspath(directory)
        self.spec_path = os.path.join(self.dir, "cluster.yaml")

    # ---- layout ----

    @property
    def exists(self):
        return os.path.exists(self.spec_path)

    def spec(self):
        if not self.exists:
            raise LocalClusterError("no cluster in %s: create one with `shepherd-ha local up --dir %s`"
                                    % (self.dir, self.dir))
        with open(self.spec_path) as fh:
            return yaml.safe_load(fh)

    def ids(self):
        return [r["id"] for r in self.spec()["replicas"]]

    def replica(self, ident):
        for r in self.spec()["replicas"]:
            if r["id"] == ident:
                return r
        raise LocalClusterError("no replica %r in %s (replicas: %s)" % (ident, self.dir, ", ".join(self.ids())))

    def api_urls(self):
        return [r["api"] for r in self.spec()["replicas"]]

    def cluster_id(self):
        """This cluster's id; a cluster made before ids has the one its replicas derive."""
        spec = self.spec()
        return spec.get("cluster_id") or cluster_identity.derived_cluster_id(spec["raft_password"])

    def create(self, replicas=3, base_port=8000, server_options=None, auth=False, tls=True, cluster_id=None,
               networks=None):
        """Write the layout for a new cluster (processes are started separately). With
        `auth`, the API requires bearer tokens: an admin token for the client config is
        generated (DIR/tokens.csv), and each agent gets its own node token when added
        (DIR/agents/NAME/token: user system:node:NAME, group system:nodes). With `tls`
        (the default) a cluster CA and every certificate are made and the API serves
        HTTPS; tls=False serves plain HTTP (--insecure-http: tests, benchmarks). `networks`:
        {"cluster_cidr", "service_cidr"} other than the defaults, for the replicas and the
        agents alike (a second cluster on one Docker engine needs a pod network of its own)."""
        if replicas < 1:
            raise LocalClusterError("--replicas must be at least 1 (3 or 5 survive failures)")
        busy = [p for i in range(1, replicas + 1) for p in (base_port + API_OFFSET + i, base_port + RAFT_OFFSET + i)
                if not port_free(p)]
        if busy:
            raise PortsInUse("port(s) %s in use: pick another --base-port" % ", ".join(map(str, busy)))
        os.makedirs(self.dir, exist_ok=True)
        scheme = "https" if tls else "http"
        members = [{"id": "r%d" % i, "raft": "127.0.0.1:%d" % (base_port + RAFT_OFFSET + i),
                    "api": "%s://127.0.0.1:%d" % (scheme, base_port + API_OFFSET + i)} for i in range(1, replicas + 1)]
        spec = {"replicas": members, "raft_password": raft_secrets.new_password(),
                "raft_salt": raft_secrets.new_salt(), "base_port": base_port, "tls": tls,
                "cluster_id": cluster_id or cluster_identity.new_cluster_id(), "networks": dict(networks or {})}
        if auth:
            spec.update(self._new_tokens())
        if tls:
            cluster_tls.ensure_ca(self.dir)
        for member in members:
            rdir = os.path.join(self.dir, member["id"])
            os.makedirs(os.path.join(rdir, "data"), mode=0o700, exist_ok=True)
            others = ",".join("%s@%s/%s" % (m["id"], m["raft"], m["api"]) for m in members if m is not member)
            server = {"id": member["id"], "raft_address": member["raft"], "peers": others,
                      "api_bind": member["api"].split("://", 1)[1], "data_dir": os.path.join(rdir, "data"),
                      "raft_password_file": os.path.join(self.dir, "raft-password"), "raft_salt": spec["raft_salt"],
                      "cluster_id": spec["cluster_id"]}
            if auth:
                server["token_file"] = self.token_file
            server.update(self._tls_server_options(tls, member, "127.0.0.1"))
            server.update(spec["networks"])
            server.update(server_options or {})
            with open(os.path.join(rdir, "server.yaml"), "w") as fh:
                yaml.safe_dump(server, fh, sort_keys=False)
        write_private(os.path.join(self.dir, "raft-password"), spec["raft_password"] + "\n")
        self._write_spec(spec)
        self.write_client_config()

    def create_on_free_ports(self, replicas=3, low=20000, high=32000, attempts=5, **options):
        """create() (same options) at a base port find_base_port found free, again at another
        one when a port was taken between the search and create()'s own check (tests,
        benchmarks and other programs bind ports meanwhile). Returns the base port."""
        last = None
        for _ in range(attempts):
            base = find_base_port(replicas, low=low, high=high)
            try:
                self.create(replicas, base, **options)
                return base
            except PortsInUse as exc:
                last = exc
        raise last

    def add_raft_salt(self):
        """A cluster made before --raft-salt existed gets one (the spec and every replica's
        server.yaml), while none of its replicas runs; True when it did."""
        spec = self.spec()
        if spec.get("raft_salt") or any(self.pid(ident) for ident in self.ids()):
            return False
        salt = raft_secrets.new_salt()
        for ident in self.ids():
            path = self._paths(ident)[0]
            with open(path) as fh:
                server = yaml.safe_load(fh) or {}
            server["raft_salt"] = salt
            with open(path, "w") as fh:
                yaml.safe_dump(server, fh, sort_keys=False)
        spec["raft_salt"] = salt
        self._write_spec(spec)
        return True

    def write_client_config(self):
        """DIR/config for sheepctl, and DIR/kubeconfig for kubectl when the cluster has TLS."""
        return cluster_files.write_client_files(self)

    # ---- tokens (clusters created with auth) ----

    @property
    def token_file(self):
        return os.path.join(self.dir, "tokens.csv")

    def node_token_file(self, node):
        """The file holding node `node`'s own token (made by node_token)."""
        return os.path.join(self.dir, "agents", node, "token")

    def node_token(self, node):
        """Node `node`'s own token (user system:node:NODE), made and added to the replicas'
        token file the first time; they re-read it, so it works at once."""
        path = self.node_token_file(node)
        if os.path.exists(path):
            return open(path).read().strip()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        token = node_tokens.add_node_token(self.token_file, node, rotate=True)
        write_private(path, token + "\n")
        return token

    def _new_tokens(self):
        """Generate the admin token and write the replicas' token file; returns it for the spec.
        Nodes get theirs one by one (node_token)."""
        tokens = {"admin_token": secrets.token_hex(16)}
        write_private(self.token_file, '%s,admin,admin,"system:masters"\n' % tokens["admin_token"])
        return tokens

    def token(self):
        """The admin's bearer token, or None when the API needs none."""
        return self.spec().get("admin_token")

    def auth_headers(self):
        token = self.token()
        return {"Authorization": "Bearer " + token} if token else {}

    # ---- processes ----

    def _paths(self, ident):
        rdir = os.path.join(self.dir, ident)
        return (os.path.join(rdir, "server.yaml"), os.path.join(rdir, "pid"), os.path.join(rdir, "server.log"))

    def pid(self, ident):
        """The PID of our running replica process, or None."""
        config_path, pid_path, _ = self._paths(ident)
        return self._our_pid(pid_path, config_path)

    @staticmethod
    def _our_pid(pid_path, config_path):
        """The PID in pid_path if that process runs with config_path on its command line."""
        try:
            with open(pid_path) as fh:
                pid = int(fh.read().strip())
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                cmdline = fh.read().decode(errors="replace")
            with open("/proc/%d/stat" % pid) as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, ValueError):
            return None
        if config_path not in cmdline or state == "Z":
            return None   # the PID was reused by something that is not ours, or is a zombie
        return pid

    def start(self, ident):
        self.replica(ident)
        if self.pid(ident):
            return self.pid(ident)
        config_path, pid_path, log_path = self._paths(ident)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "shepherd_ha.cli.main", "server", "--config", config_path]
                                    + self._legacy_flags(),
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, close_fds=True)
        with open(pid_path, "w") as fh:
            fh.write(str(proc.pid))
        # Until the child has exec'd, its command line is ours and pid() would not
        # recognise it: a kill or stop in that window would miss it.
        deadline = time.monotonic() + 5
        while self.pid(ident) != proc.pid and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return proc.pid

    def _legacy_flags(self):
        """A cluster made before TLS (no `tls` in its spec) keeps serving plain HTTP."""
        return [] if "tls" in self.spec() else ["--insecure-http"]

    def start_all(self):
        return {ident: self.start(ident) for ident in self.ids()}

    def signal(self, ident, sig):
        """Send `sig` to a replica; SIGSTOP and SIGCONT freeze and thaw all its processes
        (its supervisor, store process and API workers: the process group it leads)."""
        pid = self.pid(ident)
        if pid is None:
            return False
        if sig in (signal.SIGSTOP, signal.SIGCONT) and os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
        return True

    def kill(self, ident):
        """SIGKILL, for drills: no clean shutdown at all."""
        return self._kill(self.pid(ident))

    def stop(self, ident, timeout=10.0):
        """SIGTERM, then SIGKILL if it has not exited within `timeout`."""
        return self._terminate(self.pid(ident), timeout)

    def _kill(self, pid):
        if pid is None:
            return False
        os.kill(pid, signal.SIGKILL)
        self._reap(pid, 5)
        return True

    def _terminate(self, pid, timeout):
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        if not self._reap(pid, timeout):
            os.kill(pid, signal.SIGKILL)
            self._reap(pid, 5)
        return True

    def stop_all(self, timeout=10.0):
        for ident in self.ids():
            pid = self.pid(ident)
            if pid:
                os.kill(pid, signal.SIGTERM)
        for ident in self.ids():
            self.stop(ident, timeout)

    @staticmethod
    def _reap(pid, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)   # our child: reap it
                if done:
                    return True
            except ChildProcessError:
                try:
                    with open("/proc/%d/stat" % pid) as fh:
                        if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                            return True
                except OSError:
                    return True
            time.sleep(0.02)
        return False

    # ---- node agents ----

    def _write_spec(self, spec):
        # The spec holds the Raft password: readable by its owner only, from the first byte.
        tmp = self.spec_path + ".tmp"
        write_private(tmp, yaml.safe_dump(spec, sort_keys=False))
        os.replace(tmp, self.spec_path)

    # ---- state ----

    def replica_status(self, ident, timeout=0.5):
        member = self.replica(ident)
        try:
            reply = requests.get(member["api"] + "/shepherd/v1/replica", headers=self.auth_headers(),
                                 timeout=timeout, verify=self.verify)
            return reply.json()
        except (requests.RequestException, ValueError):
            return None

    def status(self):
        rows = []
        for member in self.spec()["replicas"]:
            state = self.replica_status(member["id"])
            rows.append({"id": member["id"], "pid": self.pid(member["id"]), "api": member["api"],
                         "raft": member["raft"], "role": state["role"] if state else "down",
                         "term": state["term"] if state else None,
                         "revision": state["revision"] if state else None})
        return rows

    def leader(self):
        """Id of the replica that leads with the highest term, among those answering."""
        best = None
        for ident in self.ids():
            state = self.replica_status(ident)
            if state and state["role"] == "leader" and (best is None or state["term"] > best["term"]):
                best = state
        return best["id"] if best else None

    def wait_ready(self, timeout=30.0, progress=None, ids=None):
        """Wait until there is a leader and the given (default: running) replicas are ready."""
        deadline = time.monotonic() + timeout
        shown = None
        while time.monotonic() < deadline:
            waiting = []
            for ident in ids or [i for i in self.ids() if self.pid(i)]:
                try:
                    ok = requests.get(self.replica(ident)["api"] + "/readyz", timeout=0.5, verify=self.verify)
                    if ok.status_code != 200:
                        waiting.append("%s: %s" % (ident, ok.text.strip()))
                except requests.RequestException:
                    waiting.append("%s: not answering yet" % ident)
            leader = self.leader()
            if not waiting and leader:
                return leader
            line = "; ".join(waiting) or "waiting for a leader"
            if progress and line != shown:
                progress(line)
                shown = line
            time.sleep(0.1)
        raise LocalClusterError("cluster in %s not ready within %.0fs: %s (see %s/*/server.log)"
                                % (self.dir, timeout, shown or "no leader", self.dir))
