"""The cluster under test behind the drills' Target interface (vagrant/drills/target.py):
the network-namespace target on this machine, or the Vagrant VMs, so the same chaos run
and checker work on real machines. The nemesis's faults become the target's: a kill is a
power-off (SIGKILL / `virsh destroy`), a pause SIGSTOP / `virsh suspend`, a cut iptables
inside the host. The target's own workers are the agents (none are added)."""
import concurrent.futures
import os
import sys
import time

import requests

from . import credentials
from .cluster import ReplicaView

DRILLS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                      "vagrant", "drills")


def load_target(name):
    """The drills' target called `name` ("netns" or "vagrant"), not set up yet."""
    if DRILLS not in sys.path:
        sys.path.insert(0, DRILLS)
    import target       # noqa: E402 - vagrant/drills/target.py, importable once its folder is on the path
    return target.load_target(name)


class TargetCluster(ReplicaView):
    """A context manager: sets the target up (or checks it is up) and closes it after."""

    def __init__(self, target, say=print):
        self.target = target
        self.say = say
        self._ids = None           # {replica id: host}, read once the target is up

    # ---- lifecycle ----

    def __enter__(self):
        self.target.setup()
        self._ids = {self.target.replica_id(h): h for h in self.target.control_planes}
        credentials.set_token(self.target.token())
        leader = self.leader(self.target.ready_timeout)
        self.say("cluster: %s; leader %s; %s" % (
            self.target.describe(), leader["id"] if leader else "none yet",
            "HTTPS verified against %s" % self.ca_file if self.ca_file else "plain HTTP"))
        return self

    def __exit__(self, *exc):
        try:
            for worker in self.target.workers:      # stop_agents() powered them off for quiescence
                if not self.target.is_running(worker):
                    self.target.power_on(worker)
        finally:
            self.target.close()
        return False

    # ---- what ReplicaView and the harness read ----

    @property
    def ca_file(self):
        return self.target.ca_file()

    @property
    def verify(self):
        return self.target.verify()

    @property
    def netns(self):
        return self.target.name == "netns"

    def ids(self):
        return list(self._ids)

    def url(self, ident):
        return self.target.api_url(self._ids[ident])

    def where(self, ident):
        return "host %s" % self._ids[ident]

    def wait_ready(self, timeout=60.0):
        """Every replica answering /readyz and a leader, within `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            ready = {ident: self._ready(ident) for ident in self.ids()}
            if all(ready.values()) and self.leader(0) is not None:
                return self.leader(0)["id"]
            if time.monotonic() >= deadline:
                raise RuntimeError("not ready within %.0f s: %s" % (
                    timeout, ", ".join("%s %s" % (i, "ready" if r else "not ready") for i, r in sorted(ready.items()))))
            time.sleep(0.2)

    def _ready(self, ident):
        try:
            return requests.get(self.url(ident) + "/readyz", timeout=1.0, verify=self.verify).status_code == 200
        except requests.RequestException:
            return False

    # ---- faults ----

    can_cut = True

    def kill(self, ident):
        host = self._ids[ident]
        ran = self.target.is_running(host)
        self.target.power_off(host)
        return ran

    def kill_all(self):
        """Power every control-plane host off at once (a whole-cluster outage: one after
        another, the last ones could still elect and commit meanwhile)."""
        ran = [ident for ident, host in self._ids.items() if self.target.is_running(host)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=len(self._ids)) as pool:
            for done in [pool.submit(self.target.power_off, host) for host in self._ids.values()]:
                done.result()       # a power-off that failed fails the fault
        return ran

    def restart(self, ident):
        self.target.power_on(self._ids[ident])

    def ensure_running(self):
        started = [ident for ident, host in self._ids.items() if not self.target.is_running(host)]
        for ident in started:
            self.restart(ident)
        return started

    def pause(self, ident):
        host = self._ids[ident]
        if not self.target.is_running(host):
            return False
        self.target.pause(host)
        return True

    def resume(self, ident):
        self.target.resume(self._ids[ident])

    def isolate(self, ident):
        host = self._ids[ident]
        self.target.isolate(host, [h for h in self.target.control_planes if h != host])

    def heal(self, ident):
        self.target.heal(self._ids[ident])
        return None             # the target does not count the rules it removes

    # ---- agents ----

    def add_hollow_agents(self, count):
        """The target's workers are the agents: nothing is added."""
        self.say("agents: the target's workers (%s); --agents is not used" % ", ".join(self.target.workers))

    def stop_agents(self):
        """Power the workers off, so their renewals do not move the revision at quiescence."""
        for worker in self.target.workers:
            self.target.power_off(worker)

    def save_logs(self, dest):
        return None
