"""Settings of `shepherd-agent`: command line > SHEPHERD_* environment > YAML file > default.

One table describes every option, so --help, the environment and the file agree;
the machinery is shepherd_ha/options.py, shared with `shepherd-ha server` (and
free of the server's heavy imports).
"""
import dataclasses
import ipaddress
import os
import socket
import urllib.parse

from shepherd_ha import options as options_module
from shepherd_ha.model import network
from shepherd_ha.model.cluster_domain import DEFAULT_CLUSTER_DOMAIN, cluster_domain_error
from shepherd_ha.model.node_lease import LEASE_INTERVAL
from shepherd_ha.model.names import is_dns1123_subdomain, label_key_error, label_value_error
from shepherd_ha.model.quantity import QuantityError, parse_cpu, parse_memory
from shepherd_ha.model.service_network import DEFAULT_SERVICE_CIDR, parse_service_cidr
from shepherd_ha.options import ConfigError, Option  # noqa: F401  (ConfigError: for callers)

CONFIG_ENV = "SHEPHERD_AGENT_CONFIG"
DEFAULT_STATE_ROOT = "/var/lib/shepherd-agent"


AGENT_OPTIONS = (
    Option("servers", str, None, "control-plane replica URLs, comma-separated, e.g. "
           "http://10.0.0.1:8001,http://10.0.0.2:8001 (the agent fails over between them); required"),
    Option("token_file", str, None, "file holding the bearer token for the API (replicas started with "
           "--token-file): the node's own, user system:node:NAME in group system:nodes "
           "(`shepherd-ha token create --node NAME`)"),
    Option("ca_file", str, None, "the cluster CA: https servers' certificates are verified against it (default: "
           "the system's CAs)"),
    Option("tls_cert_file", str, None, "PEM certificate of the agent's log server (SANs: the node name and its "
           "address; the API checks both against the cluster CA); with --tls-private-key-file"),
    Option("tls_private_key_file", str, None, "PEM private key of --tls-cert-file (keep it 0600); without the "
           "pair the log server speaks plain HTTP"),
    Option("cluster_id", str, None, "the cluster this agent belongs to (as in the replicas' --cluster-id; "
           "`shepherd-ha local up` writes it); the agent refuses to start against another cluster, and the "
           "API refuses its requests"),
    Option("node_name", str, None, "name of this node (a DNS subdomain, unique in the cluster and on its "
           "Docker engine); default: the host name"),
    Option("labels", str, "", "extra node labels, k=v,k2=v2 (hostname, os, arch and shepherd.io/runtime are "
           "always set)"),
    Option("runtime", str, "docker", "docker (real containers) or hollow (simulated pods for scale tests and "
           "benchmarks; the node is labelled shepherd.io/runtime=hollow)"),
    Option("lease_interval", float, LEASE_INTERVAL, "seconds between node lease renewals (the node lifecycle controller "
           "marks the node NotReady when the lease stops moving)"),
    Option("status_interval", float, 30.0, "seconds between node status posts with psutil usage (sooner when "
           "cpu or memory moves by 20 points)"),
    Option("address", str, None, "the node IP to advertise (InternalIP, pods' hostIP, hostPorts are published "
           "on it); default: this host's address toward the first server, 127.0.0.1 for loopback servers"),
    Option("port", int, 0, "port of the agent's HTTP server (container logs for the API); 0 picks a free one"),
    Option("bind", str, None, "address the agent's HTTP server listens on; default: --address"),
    Option("docker_url", str, None, "Docker engine URL, e.g. unix:///var/run/docker.sock; default: "
           "$DOCKER_HOST or the local socket"),
    Option("max_pods", int, 110, "pods this node takes at most (allocatable pods)"),
    Option("cpu", str, None, "cpu capacity to report, e.g. 4 or 3500m; default: cpu count x 1000m (psutil)"),
    Option("memory", str, None, "memory capacity to report, e.g. 8Gi; default: total memory (psutil)"),
    Option("reserved_cpu", str, "100m", "cpu kept back from allocatable for the system and the agent"),
    Option("reserved_memory", str, "256Mi", "memory kept back from allocatable for the system and the agent"),
    Option("backoff_base", float, 10.0, "first crash-loop restart delay in seconds; it doubles per restart "
           "(10s, 20s, 40s ...), as the kubelet's"),
    Option("backoff_max", float, 300.0, "longest crash-loop restart delay in seconds"),
    Option("housekeeping_interval", float, 2.0, "seconds between checks of this node's containers (a container "
           "killed outside the agent is noticed at the latest then; Docker events usually sooner)"),
    Option("sandbox_image", str, "shepherd/busybox:1", "image of the network holder of multi-container pods "
           "(runs `sleep`); must be on the node"),
    Option("workers", int, 4, "pods synced in parallel"),
    Option("state_dir", str, None, "directory of the pods' emptyDir and configMap volumes (one subdirectory "
           "per pod uid, removed with the pod); default: /var/lib/shepherd-agent/<node name>"),
    Option("configmap_refresh_interval", float, 60.0, "seconds between refreshes of running pods' configMap "
           "volumes from the API (a container start always reads the ConfigMaps)"),
    Option("event_qps", float, 50.0, "Events posted per second at most (bursts of 100; repeats are aggregated "
           "meanwhile); 0 posts none"),
    Option("cluster_domain", str, DEFAULT_CLUSTER_DOMAIN, "the cluster's DNS zone: Services answer as "
           "<service>.<namespace>.svc.<domain> (the same on every node)"),
    Option("dns_address", str, "auto", "where this node's cluster DNS listens, and the nameserver pods get: "
           "auto (the gateway of the pods' network: this node's pod bridge with --pod-network bridge, Docker's "
           "bridge with none; off with --runtime hollow), an IP, IP:port (tests; pods ask port 53), or off (pods "
           "keep Docker's default resolv.conf)"),
    Option("dns_resolv_conf", str, "/etc/resolv.conf", "the node's resolver configuration: names outside the "
           "cluster domain go to its nameservers"),
    Option("pod_network", str, "bridge", "bridge: pods on this node's block of --cluster-cidr (a Docker bridge "
           "network, routes to the other nodes' blocks, iptables chains; agent/network/); none: Docker's default "
           "bridge, pod IPs only reachable on this node"),
    Option("cluster_cidr", str, network.CLUSTER_CIDR, "the pod network of the whole cluster, as the servers' "
           "--cluster-cidr: traffic leaving it is masqueraded"),
    Option("proxy_mode", str, "none", "Services on this node: iptables (cluster IPs and node ports through "
           "SHEP-* chains, root) or none; on one machine with several agents, only one may program the rules"),
    Option("service_cidr", str, DEFAULT_SERVICE_CIDR, "the servers' --service-cidr (the route toward cluster IPs)"),
    Option("service_route_dev", str, "", "device of the service CIDR route; empty: this node's pod bridge with "
           "--pod-network bridge and --proxy-mode iptables, else no route"),
    Option("log_level", str, "INFO", "DEBUG, INFO, WARNING or ERROR"),
)

AGENT_DEFAULTS = options_module.defaults(AGENT_OPTIONS)


def add_arguments(parser, options=AGENT_OPTIONS):
    options_module.add_arguments(parser, options, CONFIG_ENV)


def resolve(args, options=AGENT_OPTIONS, environ=None):
    return options_module.resolve(args, options, CONFIG_ENV, environ)


def parse_labels(text):
    """'k=v,k2=v2' -> dict; ConfigError with the reason for a bad one."""
    out = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        key, eq, value = part.partition("=")
        if not eq:
            raise ConfigError("--labels: %r is not key=value" % part)
        err = label_key_error(key) or label_value_error(value)
        if err:
            raise ConfigError("--labels: %s" % err)
        out[key] = value
    return out


def default_address(servers):
    """This host's address toward the first server (127.0.0.1 for a loopback server)."""
    first = servers[0]
    host = urllib.parse.urlsplit(first if "://" in first else "http://" + first).hostname or "127.0.0.1"
    try:
        if ipaddress.ip_address(host).is_loopback:
            return "127.0.0.1"
    except ValueError:
        if host == "localhost":
            return "127.0.0.1"
    try:
        port = urllib.parse.urlsplit(first if "://" in first else "http://" + first).port or 80
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((host, port))         # UDP: no packet is sent
            return sock.getsockname()[0]
    except OSError:
        return "127.0.0.1"


@dataclasses.dataclass
class AgentSettings:
    servers: list
    node_name: str
    labels: dict
    runtime: str
    address: str
    bind: str
    port: int
    lease_interval: float
    status_interval: float
    docker_url: str
    max_pods: int
    cpu_millicores: int
    memory_bytes: int
    reserved_cpu: int
    reserved_memory: int
    backoff_base: float
    backoff_max: float
    housekeeping_interval: float
    sandbox_image: str
    workers: int
    log_level: str
    state_dir: str = ""
    configmap_refresh_interval: float = 60.0
    event_qps: float = 50.0
    token: str = None
    ca_file: str = None
    tls: object = None        # shepherd_ha.tls.contexts.TlsFiles of the log server, or None: plain HTTP
    cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
    dns_address: str = "off"                 # "auto", "off" or an IP (agent/dns/node_dns.py)
    dns_port: int = 53
    dns_resolv_conf: str = "/etc/resolv.conf"
    pod_network: str = "none"            # built by hand (tests, benchmarks): Docker's bridge; the option's is bridge
    cluster_cidr: str = network.CLUSTER_CIDR
    cluster_id: str = None
    proxy_mode: str = "none"
    service_cidr: str = DEFAULT_SERVICE_CIDR
    service_route_dev: str = ""


def dns_settings(values, runtime):
    """(cluster_domain, dns_address, dns_port) checked; ConfigError says what is wrong."""
    from agent.dns.node_dns import parse_address
    domain = (values.get("cluster_domain") or DEFAULT_CLUSTER_DOMAIN).strip().rstrip(".").lower()
    err = cluster_domain_error(domain)
    if err:
        raise ConfigError("--cluster-domain: %s" % err)
    try:
        address, port = parse_address(values.get("dns_address"))
    except ValueError as exc:
        raise ConfigError("--dns-address %r: %s (use auto, off, an IP or IP:port)" % (values.get("dns_address"), exc))
    if address == "auto" and runtime == "hollow":
        address = "off"             # simulated pods resolve nothing
    return domain, address, port


def settings(values):
    """AgentSettings from resolved values, checked."""
    from shepherd_ha.client import normalize_servers
    if not values.get("servers"):
        raise ConfigError("--servers is required (or SHEPHERD_SERVERS): the URLs of the control-plane replicas")
    try:
        servers = normalize_servers(values["servers"])
    except ValueError as exc:
        raise ConfigError("--servers: %s" % exc)
    name = values.get("node_name") or socket.gethostname().lower()
    if not is_dns1123_subdomain(name):
        raise ConfigError("--node-name %r is not a valid node name: lowercase letters, digits, '-' and '.', "
                          "starting and ending with a letter or digit" % name)
    runtime = (values.get("runtime") or "docker").lower()
    if runtime not in ("docker", "hollow"):
        raise ConfigError("--runtime %r: use docker or hollow" % values.get("runtime"))
    labels = parse_labels(values.get("labels"))
    for key in ("lease_interval", "status_interval", "backoff_base", "backoff_max", "housekeeping_interval",
                "configmap_refresh_interval"):
        if values[key] <= 0:
            raise ConfigError("--%s must be positive" % key.replace("_", "-"))
    if values["backoff_max"] < values["backoff_base"]:
        raise ConfigError("--backoff-max must be at least --backoff-base")
    if not 0 <= values["port"] <= 65535:
        raise ConfigError("--port must be 0 (any free port) to 65535")
    if values["max_pods"] < 1:
        raise ConfigError("--max-pods must be at least 1")
    if values["event_qps"] < 0:
        raise ConfigError("--event-qps must be 0 (no events) or more")
    if values["workers"] < 1:
        raise ConfigError("--workers must be at least 1")
    quantities = {}
    for key, parse in (("cpu", parse_cpu), ("memory", parse_memory), ("reserved_cpu", parse_cpu),
                       ("reserved_memory", parse_memory)):
        try:
            quantities[key] = parse(values[key]) if values.get(key) not in (None, "") else None
        except QuantityError as exc:
            raise ConfigError("--%s: %s" % (key.replace("_", "-"), exc))
    address = values.get("address") or default_address(servers)
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise ConfigError("--address %r is not an IP address" % address)
    state_dir = values.get("state_dir") or os.path.join(DEFAULT_STATE_ROOT, name)
    if not os.path.isabs(state_dir):
        state_dir = os.path.abspath(state_dir)     # Docker bind mounts need absolute paths
    token = None
    if values.get("token_file"):
        token = options_module.read_secret_file(values["token_file"], "--token-file")
        if not token:
            raise ConfigError("--token-file %s is empty: put the node's bearer token in it" % values["token_file"])
        if len(token) < 16 or any(c.isspace() for c in token):
            raise ConfigError("--token-file %s must hold one token (16 or more characters, no spaces or line "
                              "breaks), not a token table" % values["token_file"])
    from shepherd_ha.tls.contexts import check_ca_file, tls_files
    tls = tls_files(values)
    ca_file = check_ca_file(values.get("ca_file"), "--ca-file")
    domain, dns_address, dns_port = dns_settings(values, runtime)
    pod_network = (values.get("pod_network") or "none").lower()
    if pod_network not in ("bridge", "none"):
        raise ConfigError("--pod-network %r: use bridge or none" % values.get("pod_network"))
    cluster_cidr = values.get("cluster_cidr") or network.CLUSTER_CIDR
    try:
        network.parse_plan(cluster_cidr)
    except network.NetworkError as exc:
        raise ConfigError("--cluster-cidr: %s" % exc)
    cluster_id = values.get("cluster_id") or None
    if cluster_id is not None:
        from shepherd_ha.cluster_identity import IdentityError, check_format
        try:
            check_format(cluster_id, "--cluster-id")
        except IdentityError as exc:
            raise ConfigError(str(exc))
    proxy = _proxy_settings(values)
    if proxy["proxy_mode"] == "iptables" and not proxy["service_route_dev"] and pod_network == "bridge" \
            and runtime == "docker":
        # the node's own connections to cluster IPs leave through its pod bridge (docs/networking.md)
        from .network.bridge import bridge_name
        proxy["service_route_dev"] = bridge_name(name)
    level = (values.get("log_level") or "INFO").upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise ConfigError("--log-level %r: use DEBUG, INFO, WARNING or ERROR" % values.get("log_level"))
    return AgentSettings(
        servers=servers, node_name=name, labels=labels, runtime=runtime, address=address,
        bind=values.get("bind") or address, port=values["port"], lease_interval=values["lease_interval"],
        status_interval=values["status_interval"], docker_url=values.get("docker_url"),
        max_pods=values["max_pods"], cpu_millicores=quantities["cpu"], memory_bytes=quantities["memory"],
        reserved_cpu=quantities["reserved_cpu"] or 0, reserved_memory=quantities["reserved_memory"] or 0,
        backoff_base=values["backoff_base"], backoff_max=values["backoff_max"],
        housekeeping_interval=values["housekeeping_interval"], sandbox_image=values["sandbox_image"],
        workers=values["workers"], log_level=level, state_dir=state_dir,
        configmap_refresh_interval=values["configmap_refresh_interval"], event_qps=values["event_qps"],
        token=token, ca_file=ca_file, tls=tls, cluster_domain=domain, dns_address=dns_address, dns_port=dns_port,
        dns_resolv_conf=values.get("dns_resolv_conf") or "/etc/resolv.conf",
        pod_network=pod_network if runtime == "docker" else "none", cluster_cidr=cluster_cidr,
        cluster_id=cluster_id, **proxy)


def _proxy_settings(values):
    mode = (values.get("proxy_mode") or "none").lower()
    if mode not in ("none", "iptables"):
        raise ConfigError("--proxy-mode %r: use iptables or none" % values.get("proxy_mode"))
    out = {"proxy_mode": mode, "service_route_dev": values.get("service_route_dev") or ""}
    try:
        out["service_cidr"] = str(parse_service_cidr(values.get("service_cidr") or DEFAULT_SERVICE_CIDR))
    except ValueError as exc:
        raise ConfigError("--service-cidr: %s" % exc)
    return out
