"""A LocalCluster whose replicas and agents each run in their own network namespace.

Every host (replica or agent) is a namespace `shepherd<N>-<name>` with one address on
10.213.N.0/24 (replicas .11, .12, ...; agents .51, .52, ...), wired by a veth pair to the
bridge `shbr<N>` in the root namespace, which holds .1 so clients on this machine reach
every API. Nothing is routed or NATed anywhere else. N is reserved under /run so two
clusters on one machine never collide. Faults: isolate()/heal() add and remove iptables
DROP rules inside a host (the root namespace still reaches it), disconnect()/reconnect()
take its link down and up. Root only.

cluster.yaml adds to the LocalCluster layout:
  network: {index: N, prefix: 10.213.N, bridge: shbrN}
  replicas[i] and agents[i]: netns, address, veth
"""
import os
import subprocess
import sys
import time

import yaml

from shepherd_ha import cluster_identity
from shepherd_ha.store import raft_secrets

from . import cluster_tls, netns
from .local_cluster import LocalCluster, LocalClusterError, write_private

API_PORT, RAFT_PORT = 8001, 7001         # the same on every host: each has its own address
REPLICA_HOST_BASE, AGENT_HOST_BASE = 10, 50
RESERVATIONS = "/run/shepherd-netns"     # tmpfs: gone at reboot, like the namespaces
FORWARD_TAG = "shepherd-netns"
MAX_INDEX = 250
STALE_CLAIM = 60.0                       # seconds a claim may exist without its cluster.yaml


class NetnsClusterError(LocalClusterError):
    pass


def is_netns_cluster(directory):
    """True when DIR holds a cluster made by NetnsCluster."""
    path = os.path.join(os.path.abspath(directory), "cluster.yaml")
    try:
        with open(path) as fh:
            return bool((yaml.safe_load(fh) or {}).get("network"))
    except OSError:
        return False


def open_cluster(directory):
    """The right LocalCluster class for DIR (NetnsCluster when it was made with --netns)."""
    return NetnsCluster(directory) if is_netns_cluster(directory) else LocalCluster(directory)


def _parse_subnet(subnet):
    """None, N (meaning 10.213.N.0/24) or 'A.B.C.0/24' -> (index or None, prefix or None)."""
    if subnet is None:
        return None, None
    if isinstance(subnet, int) or str(subnet).isdigit():
        index = int(subnet)
        if not 1 <= index <= MAX_INDEX:
            raise NetnsClusterError("subnet index %d out of range: pick 1..%d" % (index, MAX_INDEX))
        return index, "10.213.%d" % index
    text = str(subnet)
    if not text.endswith(".0/24") or len(text.split(".")) != 4:
        raise NetnsClusterError("subnet %r is not A.B.C.0/24 (or an index 1..%d for 10.213.N.0/24)"
                                % (text, MAX_INDEX))
    prefix = text[:-len(".0/24")]
    if not all(p.isdigit() and int(p) < 256 for p in prefix.split(".")):
        raise NetnsClusterError("subnet %r is not A.B.C.0/24" % text)
    third = int(prefix.split(".")[2])
    return (third if 1 <= third <= MAX_INDEX else None), prefix


class NetnsCluster(LocalCluster):
    # ---- layout ----

    def network(self):
        net = self.spec().get("network")
        if not net:
            raise NetnsClusterError("the cluster in %s was not made with network namespaces (no `network` in "
                                    "cluster.yaml): use LocalCluster or a new --dir" % self.dir)
        return net

    def _host(self, ident):
        """The replica or agent entry named `ident` (both carry netns, address, veth)."""
        spec = self.spec()
        for entry in list(spec["replicas"]) + list(spec.get("agents") or []):
            if entry.get("id", entry.get("name")) == ident:
                return entry
        names = [r["id"] for r in spec["replicas"]] + [a["name"] for a in spec.get("agents") or []]
        raise NetnsClusterError("no replica or agent %r in %s (hosts: %s)" % (ident, self.dir, ", ".join(names)))

    def netns(self, ident):
        return self._host(ident)["netns"]

    def address(self, ident):
        return self._host(ident)["address"]

    def hosts(self):
        spec = self.spec()
        return list(spec["replicas"]) + [a for a in spec.get("agents") or [] if a.get("netns")]

    def create(self, replicas=3, server_options=None, subnet=None, auth=False, tls=True):
        """Write the layout (network and processes are made by setup_network / start);
        `auth` and `tls` as in LocalCluster.create."""
        netns.require_root()
        if replicas < 1:
            raise NetnsClusterError("--replicas must be at least 1 (3 or 5 survive failures)")
        if replicas > AGENT_HOST_BASE - REPLICA_HOST_BASE - 1:
            raise NetnsClusterError("at most %d replicas" % (AGENT_HOST_BASE - REPLICA_HOST_BASE - 1))
        if self.exists:
            raise NetnsClusterError("%s already holds a cluster: use it, or `shepherd-ha local down` and "
                                    "remove the directory" % self.dir)
        os.makedirs(self.dir, exist_ok=True)
        index, prefix = self._reserve(subnet)
        net = {"index": index, "prefix": prefix, "bridge": "shbr%d" % index}
        members = []
        for i in range(1, replicas + 1):
            ident = "r%d" % i
            address = "%s.%d" % (prefix, REPLICA_HOST_BASE + i)
            members.append({"id": ident, "raft": "%s:%d" % (address, RAFT_PORT),
                            "api": "%s://%s:%d" % ("https" if tls else "http", address, API_PORT),
                            "netns": "shepherd%d-%s" % (index, ident), "address": address,
                            "veth": "shv%d-%d" % (index, REPLICA_HOST_BASE + i)})
        password = self._write_password()
        salt = raft_secrets.new_salt()
        tokens = self._new_tokens() if auth else {}
        cluster_id = cluster_identity.new_cluster_id()
        if tls:
            cluster_tls.ensure_ca(self.dir)
        for member in members:
            rdir = os.path.join(self.dir, member["id"])
            os.makedirs(os.path.join(rdir, "data"), mode=0o700, exist_ok=True)
            others = ",".join("%s@%s/%s" % (m["id"], m["raft"], m["api"]) for m in members if m is not member)
            server = {"id": member["id"], "raft_address": member["raft"], "peers": others,
                      "api_bind": "%s:%d" % (member["address"], API_PORT), "data_dir": os.path.join(rdir, "data"),
                      "raft_password_file": os.path.join(self.dir, "raft-password"), "raft_salt": salt,
                      "cluster_id": cluster_id}
            if auth:
                server["token_file"] = self.token_file
            server.update(self._tls_server_options(tls, member, member["address"]))
            server.update(server_options or {})
            with open(os.path.join(rdir, "server.yaml"), "w") as fh:
                yaml.safe_dump(server, fh, sort_keys=False)
        self._write_spec(dict({"replicas": members, "raft_password": password, "raft_salt": salt, "base_port": None,
                               "network": net, "tls": tls, "cluster_id": cluster_id}, **tokens))
        self.write_client_config()

    def _write_password(self):
        password = raft_secrets.new_password()
        write_private(os.path.join(self.dir, "raft-password"), password + "\n")
        return password

    # ---- subnet reservation ----

    def _reserve(self, subnet):
        """Pick (or check) the subnet index and record it in RESERVATIONS/<N> with O_EXCL,
        so a concurrent create never takes the same one."""
        os.makedirs(RESERVATIONS, exist_ok=True)
        wanted, prefix = _parse_subnet(subnet)
        candidates = [wanted] if subnet is not None else list(range(1, MAX_INDEX + 1))
        used = {a.rsplit(".", 1)[0] for a in netns.root_addresses()}
        for index in candidates:
            if index is None:
                raise NetnsClusterError("subnet %s: the third number must be 1..%d (it names the bridge)"
                                        % (subnet, MAX_INDEX))
            this_prefix = prefix or "10.213.%d" % index
            if this_prefix in used or netns.link_exists("shbr%d" % index):
                continue
            if self._claim(index):
                return index, this_prefix
        if subnet is not None:
            raise NetnsClusterError("subnet %s is in use (by another cluster or an interface): pick another"
                                    % subnet)
        raise NetnsClusterError("no free 10.213.N.0/24 subnet (N 1..%d): tear down old clusters" % MAX_INDEX)

    def _claim(self, index):
        path = os.path.join(RESERVATIONS, str(index))
        for _ in range(2):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                if not self._stale(path, index):
                    return False
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(self.dir + "\n")
            return True
        return False

    @staticmethod
    def _stale(path, index):
        """A reservation whose cluster directory no longer records that index."""
        try:
            with open(path) as fh:
                owner = fh.read().strip()
        except OSError:
            return False
        if not owner:
            return False   # being written right now
        try:
            with open(os.path.join(owner, "cluster.yaml")) as fh:
                net = (yaml.safe_load(fh) or {}).get("network") or {}
        except OSError:
            # No layout (yet): a create() between its claim and writing cluster.yaml owns it
            # for a moment; after a minute it is a leftover of an interrupted create.
            try:
                return time.time() - os.stat(path).st_mtime > STALE_CLAIM
            except OSError:
                return False
        except yaml.YAMLError:
            return False
        return net.get("index") != index

    def _reclaim(self, index):
        """Hold our reservation again (teardown released it) unless another cluster took it."""
        os.makedirs(RESERVATIONS, exist_ok=True)
        try:
            with open(os.path.join(RESERVATIONS, str(index))) as fh:
                owner = fh.read().strip()
        except FileNotFoundError:
            owner = None
        if owner == self.dir:
            return
        if owner is not None and not self._stale(os.path.join(RESERVATIONS, str(index)), index) \
                or not self._claim(index):
            raise NetnsClusterError("subnet %s.0/24 of %s is now used by the cluster in %s: remove one of them"
                                    % (self.network()["prefix"], self.dir, owner or "another directory"))

    def _release(self):
        path = os.path.join(RESERVATIONS, str(self.network()["index"]))
        try:
            with open(path) as fh:
                if fh.read().strip() == self.dir:
                    os.unlink(path)
        except OSError:
            pass

    # ---- network ----

    def setup_network(self):
        """Bridge, one namespace + veth per host, the FORWARD accept for our bridge. Idempotent."""
        netns.require_root()
        net = self.network()
        self._reclaim(net["index"])
        netns.add_bridge(net["bridge"], "%s.1/24" % net["prefix"])
        netns.allow_bridge_forwarding(net["bridge"], FORWARD_TAG)
        for host in self.hosts():
            netns.add_host(host["netns"], host["veth"], net["bridge"], "%s/24" % host["address"])

    def teardown_network(self):
        """Remove every namespace, veth, bridge and iptables rule of this cluster. Idempotent.
        Processes still running keep their (now unreachable) namespace until they exit."""
        if not self.exists:
            return
        netns.require_root()
        net = self.network()
        steps = []
        for host in self.hosts():
            steps += [(netns.delete_link, host["veth"]), (netns.delete_namespace, host["netns"])]
        steps += [(lambda bridge: netns.remove_bridge_forwarding(bridge, FORWARD_TAG), net["bridge"]),
                  (netns.delete_link, net["bridge"])]
        errors = []
        for step, name in steps:   # every step is tried: one failure must not leave the rest behind
            try:
                step(name)
            except netns.NetnsError as exc:
                errors.append(str(exc))
        if errors:
            raise NetnsClusterError("teardown of %s left things behind: %s" % (self.dir, "; ".join(errors)))
        self._release()

    def _ensure_host(self, ident):
        host = self._host(ident)
        if (not netns.link_exists(self.network()["bridge"]) or host["netns"] not in netns.namespaces()
                or not netns.link_exists(host["veth"])):
            self.setup_network()

    # ---- faults ----

    def isolate(self, ident, peers=None):
        """Drop every packet between `ident` and each of `peers` (default: every other replica),
        with rules inside ident's namespace; the root namespace still reaches it."""
        if peers is None:
            peers = [i for i in self.ids() if i != ident]
        ns = self.netns(ident)
        for peer in peers:
            if peer == ident:
                continue
            netns.drop_between(ns, self.address(peer))

    def heal(self, ident):
        """Remove the isolate() rules of `ident`; returns how many were removed."""
        return netns.clear_tagged_rules(self.netns(ident))

    def disconnect(self, ident):
        """Cut `ident` off from everything, the root namespace included (link down)."""
        netns.set_link(self._host(ident)["veth"], False)

    def reconnect(self, ident):
        netns.set_link(self._host(ident)["veth"], True)

    # ---- processes (each inside its host's namespace) ----

    def _spawn(self, ident, argv, log_path, pid_path):
        """Start argv inside ident's namespace. `ip netns exec` execs the command, so the
        PID recorded is the process itself."""
        self._ensure_host(ident)
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(["ip", "netns", "exec", self.netns(ident)] + argv,
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, close_fds=True)
        with open(pid_path, "w") as fh:
            fh.write(str(proc.pid))
        # Until the command has exec'd, a kill would hit `ip` (or, before that, the forked copy
        # of this process, whose command line is ours: pid() would call it gone). Wait (bounded)
        # for the command's own command line.
        want = b"\0".join(a.encode() for a in argv)
        deadline = time.monotonic() + 5
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                with open("/proc/%d/cmdline" % proc.pid, "rb") as fh:
                    if fh.read().startswith(want):
                        break
            except OSError:
                break
            time.sleep(0.01)
        return proc.pid

    def start(self, ident):
        self.replica(ident)
        pid = self.pid(ident)
        if pid:
            return pid
        config_path, pid_path, log_path = self._paths(ident)
        return self._spawn(ident, [sys.executable, "-m", "shepherd_ha.cli.main", "server", "--config", config_path]
                           + self._legacy_flags(), log_path, pid_path)

    def add_agent(self, name, runtime="docker", extra_args=()):
        """As LocalCluster.add_agent, plus the agent's own namespace and address."""
        spec = self.spec()
        net = self.network()
        previous = next((a for a in spec.get("agents") or [] if a["name"] == name), None)
        config_path = super().add_agent(name, runtime, extra_args)
        spec = self.spec()
        taken = {a.get("address") for a in spec.get("agents") or []}
        if previous and previous.get("address"):
            address, veth = previous["address"], previous["veth"]
        else:
            slot = next(i for i in range(1, 255 - AGENT_HOST_BASE)
                        if "%s.%d" % (net["prefix"], AGENT_HOST_BASE + i) not in taken)
            address = "%s.%d" % (net["prefix"], AGENT_HOST_BASE + slot)
            veth = "shv%d-%d" % (net["index"], AGENT_HOST_BASE + slot)
        for agent in spec["agents"]:
            if agent["name"] == name:
                agent.update({"netns": "shepherd%d-%s" % (net["index"], name), "address": address, "veth": veth})
        self._write_spec(spec)
        with open(config_path) as fh:
            config = yaml.safe_load(fh)
        config["address"] = address
        if spec.get("tls"):
            config.update(cluster_tls.agent_options(self.dir, name, address))   # valid for its own address
        with open(config_path, "w") as fh:
            yaml.safe_dump(config, fh, sort_keys=False)
        return config_path

    def _spawn_agent(self, name, argv, log_path, pid_path):
        return self._spawn(name, argv, log_path, pid_path)      # inside the node's namespace

    def kill_host(self, ident):
        """SIGKILL the replica or agent process of host `ident` (power-off drills)."""
        if any(a["name"] == ident for a in self.agents()):
            return self.kill_agent(ident)
        return self.kill(ident)

    def destroy(self, timeout=10.0):
        """Stop every process, then tear the network down (the directory stays)."""
        if not self.exists:
            return
        self.stop_agents(timeout)
        self.stop_all(timeout)
        self.teardown_network()
