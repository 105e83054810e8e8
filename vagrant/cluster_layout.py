"""The VM cluster's layout as vagrant/Vagrantfile defines it, for host-side tools.

The Vagrantfile (Ruby) is the source of truth; this mirrors its naming and
addressing rules (same environment variables, same defaults) so the drills target
and the sheepctl config writer need no running Vagrant to know them:
cpN runs replica rN at PRIVATE_NET.(10+N); wN is the Node wN at PRIVATE_NET.(50+N).

    python3 vagrant/cluster_layout.py sheepctl-config PATH   # write a sheepctl config
    python3 vagrant/cluster_layout.py show                   # print the layout
"""
import os
import re
import sys
from dataclasses import dataclass, field

RAFT_PORT = 7000
API_PORT = 8001
AGENT_PORT = 10250


class LayoutError(ValueError):
    pass


def _env_int(env, name, default, low, high):
    raw = env.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise LayoutError(f"{name}={raw!r} must be a whole number from {low} to {high}")
    return value


@dataclass
class ClusterLayout:
    cp_count: int = 3
    worker_count: int = 2
    net: str = "192.168.56"
    addresses: dict = field(default_factory=dict)

    def __post_init__(self):
        if not re.fullmatch(r"\d{1,3}\.\d{1,3}\.\d{1,3}", self.net):
            raise LayoutError(f"PRIVATE_NET={self.net!r} must be three octets, e.g. 192.168.56")
        for i in range(1, self.cp_count + 1):
            self.addresses[f"cp{i}"] = f"{self.net}.{10 + i}"
        for i in range(1, self.worker_count + 1):
            self.addresses[f"w{i}"] = f"{self.net}.{50 + i}"

    @classmethod
    def from_env(cls, env=None):
        env = os.environ if env is None else env
        return cls(cp_count=_env_int(env, "CP", 3, 1, 39),
                   worker_count=_env_int(env, "WORKERS", 2, 0, 49),
                   net=env.get("PRIVATE_NET", "192.168.56"))

    @property
    def control_planes(self):
        return [f"cp{i}" for i in range(1, self.cp_count + 1)]

    @property
    def workers(self):
        return [f"w{i}" for i in range(1, self.worker_count + 1)]

    @property
    def hosts(self):
        return self.control_planes + self.workers

    def address(self, host):
        try:
            return self.addresses[host]
        except KeyError:
            raise LayoutError(f"unknown VM {host!r}; the VMs are {', '.join(self.hosts)}") from None

    def replica_id(self, host):
        if host not in self.control_planes:
            raise LayoutError(f"{host!r} is not a control-plane VM ({', '.join(self.control_planes)})")
        return "r" + host[2:]

    def host_of_replica(self, replica_id):
        host = "cp" + str(replica_id)[1:]
        if not str(replica_id).startswith("r") or host not in self.control_planes:
            raise LayoutError(f"unknown replica {replica_id!r}; the replicas are "
                              + ", ".join(self.replica_id(h) for h in self.control_planes))
        return host

    def api_url(self, host):
        return f"http://{self.address(host)}:{API_PORT}"

    def api_urls(self):
        return [self.api_url(h) for h in self.control_planes]

    def sheepctl_config(self, token=None):
        lines = ["# Written by vagrant/cluster_layout.py: the VM cluster's replicas", "servers:"]
        lines += [f"- {url}" for url in self.api_urls()]
        lines.append("namespace: default")
        if token:
            lines.append(f"token: {token}")
        return "\n".join(lines) + "\n"


def admin_token(env=None):
    """The admin's API token prepare-artifacts.sh generated, or None before it ran."""
    env = os.environ if env is None else env
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(env.get("ARTIFACTS") or os.path.join(here, ".artifacts"), "secrets", "admin-token")
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip() or None
    except FileNotFoundError:
        return None


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        layout = ClusterLayout.from_env()
    except LayoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if argv[:1] == ["sheepctl-config"] and len(argv) == 2:
        os.makedirs(os.path.dirname(os.path.abspath(argv[1])), exist_ok=True)
        fd = os.open(argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)   # it holds the admin token
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(layout.sheepctl_config(admin_token()))
        print(f"sheepctl config written to {argv[1]}")
        return 0
    if argv == ["show"]:
        for host in layout.hosts:
            role = "control-plane " + layout.replica_id(host) if host in layout.control_planes else "worker"
            print(f"{host:5} {layout.address(host):16} {role}")
        return 0
    print("usage: cluster_layout.py sheepctl-config PATH | show", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
