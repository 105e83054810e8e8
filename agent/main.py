"""`shepherd-agent`: the node agent. Runs until SIGTERM or SIGINT.

    shepherd-agent --servers http://10.0.0.1:8001,http://10.0.0.2:8001 --node-name node-1

On SIGTERM the agent stops its own threads and exits; the containers it runs keep
running, and the next agent on this node adopts them (same containers, no restart).
"""
import argparse
import logging
import signal
import sys
import threading

from shepherd_ha import __version__
from shepherd_ha.client import Client

from . import config
from .cluster_check import other_cluster
from .dns import node_dns
from .events import EventSink
from .node import NodeManager
from .pod_usage import PodUsage
from .pods import PodManager
from .proxy.wiring import build_proxy
from .runtime import RuntimeFailure, make_runtime

log = logging.getLogger("agent")

DESCRIPTION = """\
Shepherd HA node agent: registers this machine as a Node, renews its lease, posts
usage, and runs the pods bound to it as Docker containers (or simulated ones with
--runtime hollow), reporting their status. Every option can also come from the
environment (SHEPHERD_<OPTION>) or a YAML file (--config); the command line wins,
then the environment, then the file."""


def build_parser():
    parser = argparse.ArgumentParser(prog="shepherd-agent", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version="shepherd-agent " + __version__)
    config.add_arguments(parser)
    return parser


class Agent:
    """The agent's parts wired together (also used in-process by tests and benchmarks)."""

    def __init__(self, settings, runtime=None, client=None):
        self.settings = s = settings
        self.stop_event = threading.Event()
        self.runtime = runtime or make_runtime(s.runtime, s.node_name, s.docker_url, s.cluster_id)
        self.client = client or Client(s.servers, timeout=5.0, retry_deadline=10.0, token=s.token, ca_file=s.ca_file,
                                       cluster_id=s.cluster_id, spread_key=s.node_name,
                                       user_agent="shepherd-agent/%s (%s)" % (__version__, s.node_name))
        self.log_server = None
        events = EventSink(self.client, s.node_name, self.stop_event, qps=s.event_qps)
        self.pod_network = None
        if getattr(s, "pod_network", "none") == "bridge":
            from .network.pod_network import PodNetwork
            self.pod_network = PodNetwork(self.client, self.runtime.api, s.node_name, s.cluster_cidr,
                                          self.stop_event, state_dir=s.state_dir)
        # with the pod network, auto DNS listens on its bridge's gateway once the block is known
        self.dns = node_dns.build(s, self.runtime, self.client, self.stop_event, pod_network=self.pod_network)
        self.pods = PodManager(self.client, self.runtime, s.node_name, s.address, self.stop_event,
                               backoff_base=s.backoff_base, backoff_cap=s.backoff_max,
                               sandbox_image=s.sandbox_image, housekeeping_interval=s.housekeeping_interval,
                               workers=s.workers, state_dir=s.state_dir,
                               configmap_refresh_interval=s.configmap_refresh_interval, events=events,
                               cluster_dns=self.dns.pod_cluster_dns if self.dns is not None else None,
                               pod_network=self.pod_network)
        labels = dict(s.labels)
        self.node = NodeManager(self.client, self.runtime, s.node_name, s.address, self.stop_event,
                                labels=labels, port=0, cpu_millicores=s.cpu_millicores,
                                memory_bytes=s.memory_bytes, reserved_cpu=s.reserved_cpu,
                                reserved_memory=s.reserved_memory, max_pods=s.max_pods,
                                lease_interval=s.lease_interval, status_interval=s.status_interval,
                                containers=self.pods.running_containers,
                                runtime_error=lambda: self.pods.runtime_error)
        self.proxy = build_proxy(s, self.client, self.stop_event, events=events)
        self.pod_usage = PodUsage(self.runtime, s.node_name)      # `kubectl top pods`, read by the log server

    def start(self):
        s = self.settings
        port = s.port
        try:
            from .log_server import LogServer
        except ImportError:     # pragma: no cover - agent/log_server.py is part of the agent
            LogServer = None
            log.warning("agent/log_server.py is missing: no container logs over HTTP")
        if LogServer is not None:
            access = None
            if s.token:
                from .log_access import LogAccess
                access = LogAccess(s.servers, s.node_name, s.token, cluster_id=s.cluster_id, ca_file=s.ca_file)
            self.log_server = LogServer(self.runtime, s.node_name, s.bind, s.port, access=access, tls=s.tls,
                                        usage=self.pod_usage)
            self.log_server.start()
            port = self.log_server.port
            log.info("serving container logs on %s:%d", s.bind, port)
        self.node.port = port or 0
        self.pod_usage.start(self.stop_event)
        if self.dns is not None:
            self.dns.start()
        self.node.start()
        if self.pod_network is not None:
            self.pod_network.start()
        self.pods.start()
        if self.proxy is not None:
            self.proxy.start()
        log.info("agent for node %s started: runtime %s, address %s, servers %s", s.node_name,
                 self.runtime.name, s.address, ", ".join(s.servers))

    def shutdown(self, timeout=5.0):
        """Stop the agent's threads; containers keep running."""
        self.stop_event.set()
        self.pods.shutdown(timeout)
        self.node.join(timeout)
        if self.pod_network is not None:
            self.pod_network.join(timeout)
        if self.proxy is not None:
            self.proxy.join(timeout)
        self.pod_usage.join(timeout)
        if self.dns is not None:
            self.dns.shutdown(timeout)
        if self.log_server is not None:
            try:
                self.log_server.stop()
            except Exception:  # noqa: BLE001
                log.exception("stopping the log server")
        self.client.close()
        self.runtime.close()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["network"]:          # shepherd-agent network cleanup ...
        from .network import cleanup
        return cleanup.main(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        values = config.resolve(args)
        settings = config.settings(values)
    except config.ConfigError as exc:
        print("shepherd-agent: %s" % exc, file=sys.stderr)
        return 2
    logging.basicConfig(level=settings.log_level,
                        format="%(asctime)s %(levelname)s " + settings.node_name + " %(name)s: %(message)s")
    for noisy in ("urllib3", "docker", "waitress"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    wrong = other_cluster(settings)
    if wrong:
        print("shepherd-agent: %s" % wrong, file=sys.stderr)
        return 2
    try:
        agent = Agent(settings)
    except RuntimeFailure as exc:
        print("shepherd-agent: %s" % exc, file=sys.stderr)
        return 1
    stopping = threading.Event()

    def on_signal(signum, frame):
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        agent.start()
    except OSError as exc:
        print("shepherd-agent: cannot start: %s" % exc, file=sys.stderr)
        agent.shutdown(1.0)
        return 1
    while not stopping.wait(1.0):
        pass
    log.info("stopping (containers keep running)")
    agent.shutdown()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
