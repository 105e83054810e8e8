"""The hosts a drill runs against, behind one interface (see vagrant/drills/README.md).

Two implementations: NetnsTarget (target_netns.py: every replica and agent in its own
network namespace on this machine, used by CI) and VagrantTarget (target_vagrant.py:
the VMs of vagrant/Vagrantfile). Drills use only this interface and the HTTP API, so
the same drill code runs against both.

A target module exposes one Target subclass; run_drills.py builds it with no arguments,
calls setup() before the first drill and close() after the last one.
"""
import importlib
import os
import sys

from shepherd_ha.client import Client

TARGETS = {"netns": ("target_netns", "NetnsTarget"), "vagrant": ("target_vagrant", "VagrantTarget")}


class TargetError(Exception):
    pass


class Target:
    name = "?"                       # "netns" or "vagrant"
    control_planes = []              # host names, e.g. ["cp1", "cp2", "cp3"]
    workers = []                     # e.g. ["w1", "w2"]
    real_workers = False             # workers run real containers on the pod network (service-traffic)

    # Timing knobs (seconds): VMs boot and elect much more slowly than namespaces.
    boot_timeout = 30.0              # power_on -> the host's process runs and its API answers
    ready_timeout = 30.0             # a new leader and ready replicas after a fault
    node_not_ready_timeout = 30.0    # power-off of a worker -> its Node is not Ready
    pod_move_timeout = 120.0         # power-off of a worker -> its pods Running on another worker
    fault_hold = 2.0                 # a fault lasts at least this long before it is undone

    # The Deployment the worker-loss drill moves between workers (its image must be on the workers).
    workload_image = "shepherd/busybox:1"
    workload_command = ["sleep", "3600"]

    def setup(self):
        """Bring the hosts up (or check they are up) before the first drill."""

    def close(self):
        """Release what setup() made (nothing for targets that outlive the drills)."""

    def api_urls(self):
        """One API URL per control-plane host, reachable from this machine."""
        raise NotImplementedError

    def replica_id(self, host):
        """The Raft/replica id `host` runs (as in /shepherd/v1/cluster)."""
        raise NotImplementedError

    def host_of_replica(self, replica_id):
        for host in self.control_planes:
            if self.replica_id(host) == replica_id:
                return host
        raise TargetError("no control-plane host runs replica %r (hosts: %s)"
                          % (replica_id, ", ".join(self.control_planes)))

    def node_name(self, worker):
        """The Node name `worker`'s agent registers."""
        raise NotImplementedError

    def power_off(self, host):
        """Hard stop: SIGKILL every process of the host / `virsh destroy`."""
        raise NotImplementedError

    def power_on(self, host):
        """Start the host and its service again; returns once its process/VM runs."""
        raise NotImplementedError

    def power_on_many(self, hosts):
        """Start several hosts at once (a full restart); returns once all run."""
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(max(1, len(hosts))) as pool:
            list(pool.map(self.power_on, hosts))

    def pause(self, host):
        """Freeze the host as a hung machine would be: its processes stop running, its sockets
        stay open (SIGSTOP / `virsh suspend`). Used by the chaos harness (tests/chaos)."""
        raise NotImplementedError

    def resume(self, host):
        """Undo pause()."""
        raise NotImplementedError

    def is_running(self, host):
        """True when the host's process / VM runs (it may be paused)."""
        raise NotImplementedError

    def restart(self, host):
        """Restart the host's service cleanly (SIGTERM / systemctl restart), for the rolling
        restart; returns once its process runs again. Default: power_off then power_on."""
        self.power_off(host)
        self.power_on(host)

    def isolate(self, host, peers):
        """Drop all traffic between `host` and each host in `peers` (iptables inside `host`)."""
        raise NotImplementedError

    def heal(self, host):
        """Undo isolate() on `host`."""
        raise NotImplementedError

    # ---- membership drills (replace-replica, grow-shrink); the change itself goes through the API ----

    def start_control_plane(self):
        """Start a new control-plane host whose replica joins with `--join` (not a member until
        the drill adds it through the API); returns its host name (e.g. "cp4")."""
        raise NotImplementedError

    def member_entry(self, host):
        """{"id", "raft", "api"} of the replica on `host`: the body of POST /shepherd/v1/members."""
        raise NotImplementedError

    def admitted(self, host):
        """The drill added `host`'s replica to the membership: count it among control_planes."""
        if host not in self.control_planes:
            self.control_planes = list(self.control_planes) + [host]

    def retire(self, host):
        """`host`'s replica was removed from the membership (or was never added): stop it for good
        and forget the host."""
        raise NotImplementedError

    def describe(self):
        """One line for reports."""
        return "%s: control planes %s, workers %s" % (self.name, ", ".join(self.control_planes),
                                                      ", ".join(self.workers) or "none")

    # ---- shared helpers (built on the methods above) ----

    def hosts(self):
        return list(self.control_planes) + list(self.workers)

    def api_url(self, host):
        """The API URL of control-plane `host` (api_urls() is in control_planes order)."""
        return dict(zip(self.control_planes, self.api_urls()))[host]

    def token(self):
        """The bearer token the drills use (None: the API wants none)."""
        return None

    def ca_file(self):
        """The cluster CA the drills verify the replicas with (None: plain HTTP or the system's CAs)."""
        return None

    def verify(self):
        """`requests`' verify= for this target's replicas."""
        return self.ca_file() or True

    def headers(self):
        token = self.token()
        return {"Authorization": "Bearer " + token} if token else {}

    def client(self, timeout=3.0, retry_deadline=15.0):
        return Client(self.api_urls(), timeout=timeout, retry_deadline=retry_deadline, token=self.token(),
                      ca_file=self.ca_file())

    def fresh_cluster_from(self, snapshot_path, directory, replicas=3):
        """A new cluster restored from a snapshot (`shepherd-ha restore`), started: on this
        machine, on loopback, whatever the target (the drill compares objects over HTTP).
        Returns its LocalCluster; the caller stops it (stop_all)."""
        from shepherd_ha.cli import restore
        from shepherd_ha.cli.local_cluster import find_base_port
        cluster, _ = restore.restore(snapshot_path, directory, replicas=replicas,
                                     base_port=find_base_port(replicas, high=32000))
        cluster.start_all()
        try:
            cluster.wait_ready(self.ready_timeout + self.boot_timeout)
        except BaseException:
            cluster.stop_all(timeout=5.0)
            raise
        return cluster


def load_target(name):
    """Build the target called `name` ("netns" or "vagrant") from its module next to this one."""
    if name not in TARGETS:
        raise TargetError("unknown target %r: pick one of %s" % (name, ", ".join(sorted(TARGETS))))
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    module_name, class_name = TARGETS[name]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetError("target %r: cannot import %s.py (%s)" % (name, module_name, exc)) from exc
    return getattr(module, class_name)()
