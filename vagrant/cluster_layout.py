"""The VM cluster's layout as vagrant/Vagrantfile defines it, for host-side tools.

The Vagrantfile (Ruby) is the source of truth; this mirrors its naming and
addressing rules (same environment variables, same defaults) so the drills target
and the sheepctl config writer need no running Vagrant to know them:
cpN runs replica rN at PRIVATE_NET.(10+N); wN is the Node wN at PRIVATE_NET.(50+N).

    python3 vagrant/cluster_layout.py sheepctl-config PATH   # write a sheepctl config
    python3 vagrant/cluster_layout.py server-options PATH    # the VMs' server options (YAML)
    python3 vagrant/cluster_layout.py data-plane PATH        # the cluster's CIDRs and DNS domain (YAML)
    python3 vagrant/cluster_layout.py show                   # print the layout

It is also the one source of the server options the VMs run with where they differ
from `shepherd-ha server`'s defaults (VM_SERVER_OPTIONS): prepare-artifacts.sh writes
them to the artifacts, control-plane.sh appends them to each server.yaml, and the
drills read back what the VMs got.
"""
import os
import re
import sys
from dataclasses import dataclass, field

RAFT_PORT = 7000
API_PORT = 8001
AGENT_PORT = 10250


# An emulated VM on a busy host can stall for a second: Raft's timings are longer than
# the server's defaults, and the node grace period with them. Only what differs; the
# rest is the server's default. Each can be overridden from the environment.
VM_SERVER_OPTIONS = {
    "heartbeat": 0.2,
    "election_timeout_min": 1.5,
    "election_timeout_max": 3.0,
    "leader_fallback": 4.0,
    "node_grace_period": 20.0,
}
SERVER_OPTION_ENV = {     # option -> the host environment variable overriding it
    "heartbeat": "RAFT_HEARTBEAT",
    "election_timeout_min": "RAFT_ELECTION_MIN",
    "election_timeout_max": "RAFT_ELECTION_MAX",
    "leader_fallback": "RAFT_LEADER_FALLBACK",
    "node_grace_period": "NODE_GRACE_PERIOD",
    "pod_eviction_timeout": "POD_EVICTION_TIMEOUT",
}
SERVER_OPTIONS_FILE = "server-vm.yaml"     # in the artifacts directory, synced to the control planes

# The data plane (docs/networking.md): the servers allocate pod blocks from the cluster
# CIDR and ClusterIPs from the service CIDR (--cluster-cidr, --service-cidr); the agents
# serve DNS for the cluster domain (--cluster-domain). prepare-artifacts.sh writes them
# to DATA_PLANE_FILE; control-plane.sh and worker.sh append them to their YAML.
DATA_PLANE_DEFAULTS = {
    "cluster_cidr": "10.244.0.0/16",
    "service_cidr": "10.96.0.0/12",
    "cluster_domain": "cluster.local",
}
DATA_PLANE_ENV = {"cluster_cidr": "CLUSTER_CIDR", "service_cidr": "SERVICE_CIDR", "cluster_domain": "CLUSTER_DOMAIN"}
DATA_PLANE_FILE = "data-plane.yaml"
# What control-plane.sh and worker.sh append (a server or agent refuses a key it does not know).
SERVER_DATA_PLANE = ("cluster_cidr", "service_cidr")
AGENT_DATA_PLANE = ("cluster_cidr", "service_cidr", "cluster_domain")
_DOMAIN_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


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
    spare_count: int = 0          # spare control planes cp(CP+1).. (Vagrantfile CP_SPARE), off until a drill
    net: str = "192.168.56"
    addresses: dict = field(default_factory=dict)

    def __post_init__(self):
        if not re.fullmatch(r"\d{1,3}\.\d{1,3}\.\d{1,3}", self.net):
            raise LayoutError(f"PRIVATE_NET={self.net!r} must be three octets, e.g. 192.168.56")
        for i in range(1, self.cp_count + self.spare_count + 1):
            self.addresses[f"cp{i}"] = f"{self.net}.{10 + i}"
        for i in range(1, self.worker_count + 1):
            self.addresses[f"w{i}"] = f"{self.net}.{50 + i}"

    @classmethod
    def from_env(cls, env=None):
        env = os.environ if env is None else env
        cp_count = _env_int(env, "CP", 3, 1, 39)
        return cls(cp_count=cp_count, worker_count=_env_int(env, "WORKERS", 2, 0, 49),
                   spare_count=_env_int(env, "CP_SPARE", min(3, 39 - cp_count), 0, 39 - cp_count),
                   net=env.get("PRIVATE_NET", "192.168.56"))

    @property
    def control_planes(self):
        return [f"cp{i}" for i in range(1, self.cp_count + 1)]

    @property
    def spare_control_planes(self):
        return [f"cp{i}" for i in range(self.cp_count + 1, self.cp_count + self.spare_count + 1)]

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
        if host not in self.control_planes + self.spare_control_planes:
            raise LayoutError(f"{host!r} is not a control-plane VM ({', '.join(self.control_planes)})")
        return "r" + host[2:]

    def host_of_replica(self, replica_id):
        host = "cp" + str(replica_id)[1:]
        if not str(replica_id).startswith("r") or host not in self.control_planes + self.spare_control_planes:
            raise LayoutError(f"unknown replica {replica_id!r}; the replicas are "
                              + ", ".join(self.replica_id(h) for h in self.control_planes))
        return host

    def api_url(self, host):
        return f"https://{self.address(host)}:{API_PORT}"

    def api_urls(self, hosts=None):
        return [self.api_url(h) for h in (self.control_planes if hosts is None else hosts)]

    def sheepctl_config(self, token=None, ca_file=None):
        lines = ["# Written by vagrant/cluster_layout.py: the VM cluster's replicas", "servers:"]
        lines += [f"- {url}" for url in self.api_urls()]
        lines.append("namespace: default")
        if token:
            lines.append(f"token: {token}")
        if ca_file:
            lines.append(f"certificate-authority: {ca_file}")
        return "\n".join(lines) + "\n"

    def certificate_names(self, host):
        """Every name and address a VM is reached by: its certificate's SANs (a worker's
        host name is also its node name, which the API's log proxy checks)."""
        names = [host, self.address(host), "localhost", "127.0.0.1"]
        if host in self.control_planes + self.spare_control_planes:
            names.append(self.replica_id(host))
        return names

    def make_certificates(self, directory):
        """The cluster CA (made once) and a certificate per VM in DIRECTORY (HOST.crt,
        HOST.key 0600); returns the CA certificate's path."""
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from shepherd_ha.tls import pki
        ca = pki.ensure_ca(directory)
        for host in self.hosts + self.spare_control_planes:     # spares too: a drill may add them
            if host in self.control_planes + self.spare_control_planes:
                pki.issue_files(ca, directory, host, self.replica_id(host), self.certificate_names(host),
                                server=True, client=True)
            else:
                pki.issue_files(ca, directory, host, "system:node:" + host, self.certificate_names(host),
                                server=True, client=True, organization="system:nodes")
        return ca.cert_path


def vm_server_options(env=None):
    """VM_SERVER_OPTIONS with the environment's overrides, as {option: float}."""
    env = os.environ if env is None else env
    out = dict(VM_SERVER_OPTIONS)
    for option, name in SERVER_OPTION_ENV.items():
        raw = env.get(name)
        if raw in (None, ""):
            continue
        try:
            value = float(raw)
        except ValueError:
            value = None
        if value is None or not value >= 0:
            raise LayoutError(f"{name}={raw!r} must be a number of seconds (the server's {option})")
        out[option] = value
    return out


def server_options_yaml(options):
    lines = ["# Written by vagrant/cluster_layout.py: server options of the VMs that differ from the defaults"]
    return "\n".join(lines + [f"{key}: {value}" for key, value in options.items()]) + "\n"


def data_plane(env=None):
    """DATA_PLANE_DEFAULTS with the environment's overrides, checked."""
    import ipaddress
    env = os.environ if env is None else env
    out = {key: env.get(name) or DATA_PLANE_DEFAULTS[key] for key, name in DATA_PLANE_ENV.items()}
    nets = {}
    for key in ("cluster_cidr", "service_cidr"):
        try:
            nets[key] = ipaddress.ip_network(out[key], strict=True)
        except ValueError as exc:
            raise LayoutError(f"{DATA_PLANE_ENV[key]}={out[key]!r} is not a network such as "
                              f"{DATA_PLANE_DEFAULTS[key]}: {exc}") from None
    if nets["cluster_cidr"].prefixlen > 23:
        raise LayoutError(f"CLUSTER_CIDR={out['cluster_cidr']!r} is too small: every node gets a /24 of it")
    if nets["cluster_cidr"].overlaps(nets["service_cidr"]):
        raise LayoutError(f"CLUSTER_CIDR={out['cluster_cidr']} and SERVICE_CIDR={out['service_cidr']} overlap: "
                          "pod and service addresses must differ")
    domain = out["cluster_domain"]
    if not all(_DOMAIN_LABEL.fullmatch(label) for label in domain.split(".")):
        raise LayoutError(f"CLUSTER_DOMAIN={domain!r} is not a DNS name such as cluster.local")
    return out


def data_plane_yaml(values):
    lines = ["# Written by vagrant/cluster_layout.py: the data plane of the VM cluster (docs/networking.md)"]
    return "\n".join(lines + [f"{key}: {value}" for key, value in values.items()]) + "\n"


def provisioned_data_plane(env=None):
    """What the VMs were provisioned with (the artifacts' file), or what it would be now."""
    path = os.path.join(artifacts_dir(env), DATA_PLANE_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return data_plane(env)
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not key.startswith("#"):
            out[key.strip()] = value.strip()
    return out


def artifacts_dir(env=None):
    env = os.environ if env is None else env
    return env.get("ARTIFACTS") or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".artifacts")


def provisioned_server_options(env=None):
    """The options the control planes were provisioned with (the artifacts' file), or,
    before prepare-artifacts.sh ran, what it would write now."""
    path = os.path.join(artifacts_dir(env), SERVER_OPTIONS_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        return vm_server_options(env)
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and not key.startswith("#"):
            out[key.strip()] = float(value)
    return out


def pki_dir(env=None):
    return os.path.join(artifacts_dir(env), "secrets", "pki")


def admin_token(env=None):
    """The admin's API token prepare-artifacts.sh generated, or None before it ran."""
    path = os.path.join(artifacts_dir(env), "secrets", "admin-token")
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
        ca = os.path.join(pki_dir(), "ca.crt")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(layout.sheepctl_config(admin_token(), ca if os.path.exists(ca) else None))
        print(f"sheepctl config written to {argv[1]}")
        return 0
    if argv[:1] == ["certificates"] and len(argv) == 2:
        ca = layout.make_certificates(argv[1])
        print(f"cluster CA {ca}; a certificate per VM in {argv[1]}")
        return 0
    if argv[:1] == ["kubeconfig"] and len(argv) == 2:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from shepherd_ha.tls import kubeconfig
        with open(os.path.join(pki_dir(), "ca.crt"), "rb") as fh:
            kubeconfig.write(argv[1], kubeconfig.build(layout.api_urls(), fh.read(), token=admin_token()))
        print(f"kubeconfig written to {argv[1]}")
        return 0
    if argv[:1] == ["server-options"] and len(argv) == 2:
        try:
            text = server_options_yaml(vm_server_options())
        except LayoutError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        with open(argv[1], "w", encoding="utf-8") as out:
            out.write(text)
        print(f"server options for the VMs written to {argv[1]}")
        return 0
    if argv[:1] == ["data-plane"] and len(argv) == 2:
        try:
            text = data_plane_yaml(data_plane())
        except LayoutError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        with open(argv[1], "w", encoding="utf-8") as out:
            out.write(text)
        print(f"data plane of the VMs written to {argv[1]}")
        return 0
    if argv == ["workers"]:
        print("\n".join(layout.workers))      # prepare-artifacts.sh gives each its own node token
        return 0
    if argv == ["show"]:
        for host in layout.hosts:
            role = "control-plane " + layout.replica_id(host) if host in layout.control_planes else "worker"
            print(f"{host:5} {layout.address(host):16} {role}")
        return 0
    print("usage: cluster_layout.py sheepctl-config PATH | kubeconfig PATH | certificates DIR | server-options PATH "
          "| data-plane PATH | workers | show", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
