"""The node's cluster DNS as one part of the agent: the zone, its watch, the server and
the forwarder wired together, plus the address pods are told to use.

--dns-address: `auto` (the default with the docker runtime) listens on the gateway of
the pods' network, an address of this node every pod reaches: with `--pod-network
bridge` the gateway of this node's own bridge (known once the node has its block, so
the server starts then; pods cannot attach before either), else that of Docker's
default bridge. `IP` or `IP:port` listens there (pods can only be told an IP: they ask
port 53); `off` serves nothing and pods keep Docker's default resolv.conf. The server
binds at once when it can, else in the background, retrying every BIND_RETRY s while
the address is missing or the port taken (two agents sharing Docker's default bridge:
the first serves both nodes' pods, with the same answers, since both watch the same
Services; on their own pod bridges each serves its own). With auto, an agent not
allowed port 53 (not root) serves nothing and leaves pods Docker's default, rather
than telling them a nameserver nobody answers on."""
import errno
import ipaddress
import logging
import socket
import threading

from ..runtime.base import NotReadyYet
from .forwarder import RESOLV_CONF, Forwarder, ResolvConfUpstreams
from .pod_dns import ClusterDNS
from .records import Zone
from .server import DNSServer
from .watch import ZoneWatch

log = logging.getLogger(__name__)

BIND_RETRY = 5.0
DNS_PORT = 53


def parse_address(text):
    """'auto' | 'off' | 'IP' | 'IP:port' | '[v6]:port' -> ('auto'|'off'|IP, port); ValueError."""
    text = (text or "auto").strip()
    if text in ("auto", "off"):
        return text, DNS_PORT
    host, port = text, DNS_PORT
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest:
            port = int(rest.lstrip(":"))
    elif text.count(":") == 1:
        host, port = text.split(":")
        port = int(port)
    if not 0 <= port <= 65535:
        raise ValueError("port %d is not 0-65535" % port)
    return str(ipaddress.ip_address(host)), port


def docker_network_gateway(runtime, network="bridge"):
    """The gateway IP of a Docker network (the node's address on that bridge), or None."""
    api = getattr(runtime, "api", None)
    if api is None:
        return None
    try:
        for config in (api.inspect_network(network).get("IPAM") or {}).get("Config") or []:
            gateway = (config or {}).get("Gateway")
            if gateway and ":" not in gateway:
                return gateway
    except Exception as exc:  # noqa: BLE001 - the Docker SDK raises many kinds
        log.warning("DNS: cannot read the gateway of Docker network %s: %s", network, exc)
    return None


class NodeDNS:
    """host None: the address comes later, through listen_on (the pod bridge's gateway);
    until then cluster_dns is None and pod_cluster_dns() refuses to give pods a resolver."""

    def __init__(self, client, host, port, stop, domain, resolv_conf=RESOLV_CONF):
        self.port = int(port)
        self.stop = stop
        self.resolv_conf = resolv_conf
        self.zone = Zone(domain, synced=False)     # SERVFAIL for its names until the first lists
        self.watch = ZoneWatch(client, self.zone, stop)
        self.host = self.server = self.cluster_dns = None
        self.serving = threading.Event()
        self.start_server = lambda server: server.start()    # tests: in another network namespace
        self._lock = threading.Lock()
        self._started = False
        self._binder = None
        self.waiting_for = None       # () -> why the pod network has no gateway yet (its own words)
        if self.port != DNS_PORT:
            log.warning("DNS: listening on port %d: pods ask port 53, so only clients told the port use it",
                        self.port)
        if host is not None:
            self._use(host)

    def _use(self, host):
        upstreams = ResolvConfUpstreams(self.resolv_conf, own=[(host, self.port)])
        self.server = DNSServer(self.zone, host, self.port, Forwarder(upstreams))
        self.host = host
        self.cluster_dns = ClusterDNS(nameserver=host, domain=self.zone.domain)

    def pod_cluster_dns(self):
        """What pods are told (agent/dns/pod_dns.ClusterDNS); NotReadyYet while the address
        is not known yet, so no pod starts with Docker's resolver meanwhile."""
        cluster = self.cluster_dns
        if cluster is None:
            why = self.waiting_for() if self.waiting_for is not None else None
            raise NotReadyYet("the node's cluster DNS waits for the pod network (its bridge's gateway)%s"
                              % (": %s" % why if why else ""))
        return cluster

    def listen_on(self, host):
        """Serve on `host` from now on: the pod bridge's gateway once the node has its block
        (again when the block changes). Pods started later are told the new address."""
        with self._lock:
            if host == self.host:
                return
            old, was_serving = self.server, self.serving.is_set()
            self.serving.clear()
            self._use(host)
        if old is not None and was_serving:
            old.stop()
            log.info("DNS: no longer serving on %s:%d", old.host, old.port)
        if self._started:
            self._bind_or_retry()

    def bind(self):
        """Try to listen now; the OSError when that fails (None when serving or no address yet)."""
        with self._lock:
            if self.serving.is_set() or self.server is None:
                return None
            try:
                self.start_server(self.server)
            except OSError as exc:
                return exc
            self.serving.set()
        log.info("DNS: serving %s on %s:%d (UDP and TCP)", self.zone.domain, self.host, self.server.port)
        return None

    def start(self):
        self.watch.start()
        self._started = True
        self._bind_or_retry()
        return self

    def _bind_or_retry(self):
        if self.bind() is not None and (self._binder is None or not self._binder.is_alive()):
            self._binder = threading.Thread(target=self._bind_loop, name="dns-bind", daemon=True)
            self._binder.start()

    def _bind_loop(self):
        warned = False
        while not self.stop.is_set():
            exc = self.bind()
            if exc is None:
                return
            if not warned:
                log.warning("DNS: cannot listen on %s:%d: %s; retrying every %.0fs", self.host, self.port,
                            exc.strerror or exc, BIND_RETRY)
                warned = True
            self.stop.wait(BIND_RETRY)

    def shutdown(self, timeout=2.0):
        if self._binder is not None:
            self._binder.join(timeout)
        self.watch.join(timeout)
        if self.serving.is_set():
            self.server.stop(timeout)


def may_bind(port, host="127.0.0.1"):
    """False when this process may not listen on `port` at all (a port below
    ip_unprivileged_port_start without root): the kernel checks that before whether
    the address is taken, so a loopback probe answers it for the bridge's address too."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno not in (errno.EACCES, errno.EPERM)
    return True


def build(settings, runtime, client, stop, gateway=None, network="bridge", pod_network=None):
    """The agent's NodeDNS from its settings, or None (--dns-address off, or auto with
    no pod network gateway to listen on). With auto: pod_network (agent/network/'s
    PodNetwork, --pod-network bridge) gives its bridge's gateway once the node has its
    block; else `gateway` when the caller knows it, else that of Docker network `network`."""
    host = settings.dns_address
    if host == "off":
        return None
    if host == "auto" and pod_network is not None and gateway is None:
        if not may_bind(settings.dns_port):
            log.warning("DNS: not allowed to listen on port %d (it needs root or CAP_NET_BIND_SERVICE): no "
                        "cluster DNS on this node; pods get Docker's default resolv.conf", settings.dns_port)
            return None
        dns = NodeDNS(client, None, settings.dns_port, stop, settings.cluster_domain, settings.dns_resolv_conf)
        pod_network.block_listeners.append(lambda cidr, bridge_gateway: dns.listen_on(bridge_gateway))
        dns.waiting_for = lambda: pod_network.error     # e.g. its block is another network's on this engine
        return dns
    if host == "auto":
        host = gateway or docker_network_gateway(runtime, network)
        if host is None:
            log.warning("DNS: no pod network gateway found (--dns-address auto): no cluster DNS on this node; "
                        "pods get Docker's default resolv.conf (give --dns-address IP)")
            return None
    dns = NodeDNS(client, host, settings.dns_port, stop, settings.cluster_domain, settings.dns_resolv_conf)
    if settings.dns_address == "auto":
        exc = dns.bind()
        if exc is not None and exc.errno in (errno.EACCES, errno.EPERM):
            log.warning("DNS: not allowed to listen on %s:%d (%s; port 53 needs root or CAP_NET_BIND_SERVICE): "
                        "no cluster DNS on this node; pods get Docker's default resolv.conf", host,
                        settings.dns_port, exc.strerror)
            return None
    return dns
