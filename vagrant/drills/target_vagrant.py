"""VagrantTarget: the drills' target made of the VMs of vagrant/Vagrantfile.

Hosts are the Vagrant machine names (cp1.., w1..); addresses, replica ids and node
names follow vagrant/cluster_layout.py. Faults are real: power_off is `virsh
destroy` (the VM's power cable), power_on is `virsh start` and waits for ssh and
the host's systemd unit, isolate/heal are iptables rules inside the VM reached
over ssh with the configuration `vagrant ssh-config` prints.
"""
import dataclasses
import os
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VAGRANT_DIR = os.path.dirname(HERE)
for path in (HERE, VAGRANT_DIR):
    if path not in sys.path:
        sys.path.insert(0, path)

from cluster_layout import (RAFT_PORT, ClusterLayout, LayoutError, admin_token, pki_dir,  # noqa: E402
                            provisioned_server_options)
from shepherd_ha.controllers.settings import ControllerSettings  # noqa: E402

try:  # the drills helper's interface; the class works without it too
    from target import Target  # noqa: E402
except ImportError:  # pragma: no cover - only while target.py does not exist
    Target = object

DRILL_CHAIN = "SHEPHERD-DRILL"   # our iptables chain, so heal removes exactly what isolate added
LIBVIRT_URI = "qemu:///system"



# The management network of the Vagrantfile (lv.management_network_address), over
# which Vagrant and the drills reach the VMs by ssh.
MANAGEMENT_PREFIX = "192.168.124."
SSH_ENTRY = """Host {host}
  HostName {address}
  User vagrant
  Port 22
  UserKnownHostsFile /dev/null
  StrictHostKeyChecking no
  PasswordAuthentication no
  IdentityFile {key}
  IdentitiesOnly yes
  LogLevel FATAL

"""

class VagrantError(RuntimeError):
    pass


def _run(argv, timeout, cwd=None, env=None, check=True):
    """Run a command with a bound on its time; the error names the command and its output."""
    try:
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise VagrantError(f"`{shlex.join(argv)}` did not finish within {timeout:.0f} s") from None
    if check and proc.returncode != 0:
        raise VagrantError(f"`{shlex.join(argv)}` failed ({proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()[-500:]}")
    return proc


class VagrantTarget(Target):
    name = "vagrant"
    real_workers = True              # Docker on every worker, with the agent's data plane
    # Software-emulated VMs: a boot takes 1-5 minutes here, a Python process starts in seconds.
    boot_timeout = 600.0
    ready_timeout = 180.0
    node_not_ready_timeout = 120.0
    pod_move_timeout = 300.0
    fault_hold = 5.0

    def __init__(self, vagrant_dir=VAGRANT_DIR, env=None, log=print):
        self.vagrant_dir = vagrant_dir
        self.env = dict(os.environ if env is None else env)
        self.env["VAGRANT_CHECKPOINT_DISABLE"] = "1"
        self.layout = ClusterLayout.from_env(self.env)
        self.control_planes = self.layout.control_planes
        self._joining = []             # spare VMs started for a membership drill, not members yet
        self.workers = self.layout.workers
        self.log = log
        self.state_dir = self.env.get("STATE_DIR", os.path.join(vagrant_dir, ".state"))
        self.ssh_config_path = os.path.join(self.state_dir, "ssh-config")
        for tool, package in (("vagrant", "vagrant"), ("virsh", "libvirt-clients"), ("ssh", "openssh-client")):
            if shutil.which(tool) is None:
                raise VagrantError(f"{tool} is missing; apt-get install -y {package}")
        # What the control planes were provisioned with; the rest is the server's default.
        options = {**dataclasses.asdict(ControllerSettings()), **provisioned_server_options(self.env)}
        self.node_grace_period = float(options["node_grace_period"])
        self.pod_eviction_timeout = float(options["pod_eviction_timeout"])
        self.node_not_ready_timeout = self.node_grace_period + 100.0
        # Five emulated VMs booting at once on a busy 2-core host take minutes.
        self.boot_timeout = float(self.env.get("BOOT_TIMEOUT", "600"))

    def setup(self):
        """Check that every VM of `make vagrant-up` runs and its service is active."""
        self.control_planes = self.live_members() or self.control_planes
        stopped = [h for h in self.control_planes + self.workers if not self.is_running(h)]
        if stopped:
            raise VagrantError(f"VMs not running: {', '.join(stopped)}; run make vagrant-up")
        self.refresh_ssh_config()
        deadline = time.monotonic() + self.ready_timeout
        for host in self.control_planes + self.workers:
            self.wait_service(host, deadline)
        self.log(f"  [vagrant] {self.describe()}: every VM runs its service")

    def live_members(self):
        """The control planes the cluster has now (GET /shepherd/v1/members of the first VM
        that answers), so drills run after a membership drill replaced or added replicas;
        None when no VM answers (then the layout's cp1..cpN)."""
        import requests
        for host in self.layout.control_planes + self.layout.spare_control_planes:
            try:
                reply = requests.get(self.layout.api_url(host) + "/shepherd/v1/members", headers=self.headers(),
                                     timeout=5, verify=self.verify())
                members = reply.json()["members"] if reply.status_code == 200 else None
                if members:
                    return [self.layout.host_of_replica(m["id"]) for m in members]
            except (requests.RequestException, ValueError, KeyError, TypeError, LayoutError):
                continue        # not answering, or members this layout does not know (CP_SPARE too small)
        return None

    def close(self):
        """The VMs outlive the drills (make vagrant-down removes them); only undo partitions."""
        for host in self.control_planes + self.workers:
            try:
                if self.is_running(host):
                    self.ssh(host, f"iptables -F {DRILL_CHAIN} 2>/dev/null || true", timeout=30, check=False)
            except VagrantError as exc:
                self.log(f"  [vagrant] close: {host}: {exc}")

    # -- names and addresses ------------------------------------------------
    def api_urls(self):
        return self.layout.api_urls(self.control_planes)

    def token(self):
        return admin_token(self.env)

    def ca_file(self):
        """The cluster CA prepare-artifacts.sh made (the VMs serve HTTPS from it)."""
        path = os.path.join(pki_dir(self.env), "ca.crt")
        return path if os.path.exists(path) else None

    def replica_id(self, host):
        return self.layout.replica_id(host)

    def host_of_replica(self, replica_id):
        return self.layout.host_of_replica(replica_id)

    def node_name(self, worker):
        if worker not in self.workers:
            raise VagrantError(f"{worker!r} is not a worker VM ({', '.join(self.workers)})")
        return worker

    def address(self, host):
        return self.layout.address(host)

    def service(self, host):
        # A spare control plane (membership drills) runs the server before it is a member.
        planes = self.layout.control_planes + self.layout.spare_control_planes
        return "shepherd-server" if host in planes else "shepherd-agent"

    def describe(self):
        return (f"vagrant: {len(self.control_planes)} control-plane VMs ({', '.join(self.control_planes)}) and "
                f"{len(self.workers)} worker VMs ({', '.join(self.workers)}) on {self.layout.net}.0/24, "
                f"libvirt/{self.env.get('VM_DRIVER', 'qemu')}")

    # -- VM power -----------------------------------------------------------
    def domain(self, host):
        """The libvirt domain of a machine: the id vagrant-libvirt stores is its UUID."""
        id_file = os.path.join(self.vagrant_dir, ".vagrant", "machines", host, "libvirt", "id")
        try:
            with open(id_file, encoding="utf-8") as f:
                return f.read().strip()
        except FileNotFoundError:
            raise VagrantError(f"VM {host} was never created ({id_file} missing); run make vagrant-up") from None

    def virsh(self, *args, timeout=60, check=True):
        return _run(["virsh", "-c", LIBVIRT_URI, *args], timeout=timeout, check=check)

    def is_running(self, host):
        """Running, or suspended by pause() (the Target contract): neither needs a start."""
        return self.virsh("domstate", self.domain(host)).stdout.strip() in ("running", "paused")

    def pause(self, host):
        self.log(f"  [vagrant] virsh suspend {host}")
        self.virsh("suspend", self.domain(host))

    def resume(self, host):
        self.log(f"  [vagrant] virsh resume {host}")
        self.virsh("resume", self.domain(host))

    def power_off(self, host):
        self.layout.address(host)  # names an unknown host clearly
        self.log(f"  [vagrant] virsh destroy {host} (hard power-off)")
        if self.is_running(host):
            self.virsh("destroy", self.domain(host))

    def power_on(self, host):
        self.layout.address(host)
        start = time.monotonic()
        if not self.is_running(host):
            self.log(f"  [vagrant] virsh start {host}")
            self.virsh("start", self.domain(host))
        self.wait_ssh(host, deadline=start + self.boot_timeout)
        self.wait_service(host, deadline=start + self.boot_timeout)
        self.log(f"  [vagrant] {host} up, {self.service(host)} active, {time.monotonic() - start:.0f} s after start")

    def power_on_many(self, hosts):
        """Start several VMs at once (they boot in parallel), then wait for each."""
        start = time.monotonic()
        for host in hosts:
            if not self.is_running(host):
                self.log(f"  [vagrant] virsh start {host}")
                self.virsh("start", self.domain(host))
        for host in hosts:
            self.wait_ssh(host, deadline=start + self.boot_timeout)
            self.wait_service(host, deadline=start + self.boot_timeout)
        self.log(f"  [vagrant] {', '.join(hosts)} up {time.monotonic() - start:.0f} s after start")

    def restart(self, host):
        """systemctl restart of the host's unit (SIGTERM, then start), waiting until it is active."""
        self.layout.address(host)
        start = time.monotonic()
        self.log(f"  [vagrant] systemctl restart {self.service(host)} on {host}")
        self.ssh(host, f"systemctl restart {self.service(host)}", timeout=120)
        self.wait_service(host, deadline=start + self.boot_timeout)

    # -- ssh ----------------------------------------------------------------
    def refresh_ssh_config(self):
        """Write an ssh config for every created VM that has a management address.

        Built from libvirt's DHCP leases, not `vagrant ssh-config`: that command stops at
        the first machine that is not up (a spare control plane never created, a VM
        powered off by a drill) and leaves the rest out, and each call costs 40-50 s of
        Vagrant start-up on a busy host. A VM without a lease is left out; ssh to it then
        fails until the next refresh (wait_ssh refreshes)."""
        os.makedirs(self.state_dir, exist_ok=True)
        entries = []
        for host in self.layout.control_planes + self.layout.spare_control_planes + self.workers:
            try:
                uuid = self.domain(host)
            except VagrantError:
                continue                     # never created (a spare not needed yet)
            address = self.management_address(uuid)
            if address is None:
                continue
            key = os.path.join(self.vagrant_dir, ".vagrant", "machines", host, "libvirt", "private_key")
            entries.append(SSH_ENTRY.format(host=host, address=address, key=key))
        if not entries:
            raise VagrantError("no VM has a management address (virsh domifaddr --source lease); run make vagrant-up")
        with open(self.ssh_config_path, "w", encoding="utf-8") as f:
            f.write("".join(entries))

    def management_address(self, uuid):
        """The VM's address on the management network, from libvirt's DHCP lease."""
        proc = self.virsh("domifaddr", uuid, "--source", "lease", check=False)
        for line in proc.stdout.splitlines():
            fields = line.split()
            if len(fields) == 4 and fields[2] == "ipv4" and fields[3].startswith(MANAGEMENT_PREFIX):
                return fields[3].split("/")[0]
        return None

    def ssh(self, host, command, timeout=60, check=True):
        """Run a shell command in a VM as root; returns the CompletedProcess."""
        if not os.path.exists(self.ssh_config_path):
            self.refresh_ssh_config()
        argv = ["ssh", "-F", self.ssh_config_path, "-o", "ConnectTimeout=30", "-o", "BatchMode=yes",
                "-o", "LogLevel=ERROR", host, "sudo sh -c " + shlex.quote(command)]
        return _run(argv, timeout=timeout, check=check)

    def wait_ssh(self, host, deadline):
        last_refresh = time.monotonic()
        while True:
            try:
                if self.ssh(host, "true", timeout=45, check=False).returncode == 0:
                    return
            except VagrantError:
                pass
            now = time.monotonic()
            if now > deadline:
                raise VagrantError(f"{host}: no ssh within {self.boot_timeout:.0f} s of power-on")
            if now - last_refresh > 45:   # a management address may have changed at boot
                self.refresh_ssh_config()
                last_refresh = now
            time.sleep(3)

    def wait_service(self, host, deadline):
        unit = self.service(host)
        state = "no answer"
        while True:
            try:  # a VM that just booted may take longer than one ssh timeout to answer
                state = self.ssh(host, f"systemctl is-active {unit}", timeout=60, check=False).stdout.strip()
            except VagrantError as exc:
                state = str(exc)
            if state == "active":
                return
            if time.monotonic() > deadline:
                raise VagrantError(f"{host}: {unit} not active ({state}) within {self.boot_timeout:.0f} s")
            time.sleep(2)

    # -- membership drills: spare VMs (Vagrantfile CP_SPARE) join with --join -------
    def start_control_plane(self):
        used = set(self.control_planes) | set(self._joining)
        spare = next((h for h in self.layout.spare_control_planes if h not in used and self._usable_spare(h)), None)
        if spare is None:
            raise VagrantError("no spare control-plane VM left (CP_SPARE=%d): raise CP_SPARE and `vagrant up`"
                               % len(self.layout.spare_control_planes))
        start = time.monotonic()
        self.log(f"  [vagrant] vagrant up {spare} (a spare control plane: provisioned with --join)")
        _run(["vagrant", "up", spare], timeout=self.boot_timeout * 2, cwd=self.vagrant_dir, env=self.env)
        self.refresh_ssh_config()
        self.wait_service(spare, deadline=start + self.boot_timeout * 2)
        self._joining.append(spare)
        return spare

    def _usable_spare(self, host):
        """A spare never created, or running (started ahead and waiting to be added); not one
        created and powered off: an earlier drill retired it, its data is a removed member's."""
        try:
            uuid = self.domain(host)
        except VagrantError:
            return True
        return self.virsh("domstate", uuid, check=False).stdout.strip() == "running"

    def member_entry(self, host):
        return {"id": self.layout.replica_id(host), "raft": f"{self.layout.address(host)}:{RAFT_PORT}",
                "api": self.layout.api_url(host)}

    def admitted(self, host):
        self._joining = [h for h in self._joining if h != host]
        super().admitted(host)

    def retire(self, host):
        """Removed from the membership: stop its service for good and power it off (`make
        vagrant-down` removes the VM)."""
        self.log(f"  [vagrant] retire {host}: stop and disable shepherd-server, power off")
        try:
            self.ssh(host, "systemctl disable --now shepherd-server", timeout=60, check=False)
        except VagrantError as exc:
            self.log(f"  [vagrant] {host}: {exc}")
        self.power_off(host)
        self._joining = [h for h in self._joining if h != host]
        self.control_planes = [h for h in self.control_planes if h != host]

    # -- network faults -----------------------------------------------------
    def isolate(self, host, peers):
        """Drop every packet between host and each peer, in both directions, inside host."""
        rules = [f"iptables -N {DRILL_CHAIN} 2>/dev/null || true"]
        for hook in ("INPUT", "OUTPUT"):
            rules.append(f"iptables -C {hook} -j {DRILL_CHAIN} 2>/dev/null || iptables -I {hook} 1 -j {DRILL_CHAIN}")
        for peer in peers:
            ip = self.layout.address(peer)
            rules.append(f"iptables -A {DRILL_CHAIN} -s {ip} -j DROP")
            rules.append(f"iptables -A {DRILL_CHAIN} -d {ip} -j DROP")
        self.log(f"  [vagrant] isolate {host} from {', '.join(peers)} (iptables in {host})")
        self.ssh(host, " && ".join(rules), timeout=60)

    def heal(self, host):
        self.log(f"  [vagrant] heal {host} (flush {DRILL_CHAIN})")
        self.ssh(host, f"iptables -F {DRILL_CHAIN} 2>/dev/null || true", timeout=60)

    # -- measurements for vagrant/README.md ----------------------------------
    def memory_report(self):
        """host -> (MiB used inside the VM, RSS MiB of its QEMU process on this machine)."""
        report = {}
        for host in self.control_planes + self.workers:
            used = self.ssh(host, "free -m | awk '/^Mem:/{print $3}'", check=False).stdout.strip()
            uuid = self.domain(host)
            rss = _run(["sh", "-c", f"ps -eo rss,args | grep -F 'uuid {uuid}' | grep -v grep | awk '{{print $1}}'"],
                       timeout=10, check=False).stdout.split()
            report[host] = (int(used) if used.isdigit() else None, int(rss[0]) // 1024 if rss else None)
        return report


def main():
    """`python3 vagrant/drills/target_vagrant.py memory|describe` for the README figures."""
    target = VagrantTarget()
    if sys.argv[1:] == ["memory"]:
        print(f"{'VM':5} {'used in VM (MiB)':>17} {'QEMU RSS on host (MiB)':>23}")
        for host, (used, rss) in target.memory_report().items():
            print(f"{host:5} {used!s:>17} {rss!s:>23}")
        return 0
    print(target.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
