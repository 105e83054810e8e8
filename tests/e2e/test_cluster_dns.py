"""Cluster DNS on real Docker: an agent process serves the zone on the gateway of a Docker
network this test makes (dn-<tag>); busybox pods the agent runs, one of a single container
and one of two (sandbox + joined containers), resolve a Service by its short, namespaced
and full names through the libc resolver (busybox ping's "PING name (ip)" line, our
getent: it applies the search path and ndots:5), a headless Service to its pod's IP, and
an outside name through the agent's forwarder to an upstream DNS server the test runs;
and a pod on a user-defined Docker network, through Docker's embedded DNS."""
import uuid

import pytest
from dnslib import DNSRecord

from agent import spec as P
from agent.dns.forwarder import Forwarder
from agent.dns.node_dns import docker_network_gateway
from agent.dns.pod_dns import ClusterDNS, resolver_config
from agent.dns.records import Zone
from agent.dns.server import DNSServer
from agent.runtime.docker_runtime import DockerRuntime
from tests.unit.dns_kit import FakeUpstream

from .helpers import IMAGE, wait_until

pytestmark = pytest.mark.e2e

CLUSTER_IP = "10.96.77.10"


@pytest.fixture
def dns_network(docker_engine):
    name = "dn-%s" % uuid.uuid4().hex[:8]
    network = docker_engine.api.create_network(name, driver="bridge")
    try:
        info = docker_engine.api.inspect_network(network["Id"])
        yield info["IPAM"]["Config"][0]["Gateway"]
    finally:
        docker_engine.api.remove_network(network["Id"])


@pytest.fixture
def dns_network_name(dns_network, docker_engine):
    return [n["Name"] for n in docker_engine.api.networks()
            if ((n.get("IPAM") or {}).get("Config") or [{}])[0].get("Gateway") == dns_network][0]


@pytest.fixture
def upstream(tmp_path):
    up = FakeUpstream(port=53)
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver %s\n" % up.host)
    yield str(path)
    up.close()


def resolved(agents, node, pod, container, name):
    """The address the container's libc resolver gives for `name` (None when it fails)."""
    ids = [c["Id"] for c in agents.containers(node, pod) if c["Labels"].get("shepherd.io/container-name") == container
           and c["State"] == "running"]
    if not ids:
        return None
    exec_id = agents.engine.api.exec_create(ids[0], ["ping", "-c", "1", "-W", "1", name])["Id"]
    out = agents.engine.api.exec_start(exec_id).decode(errors="replace")
    first = out.splitlines()[0] if out else ""
    if first.startswith("PING ") and "(" in first:
        return first.split("(", 1)[1].split(")", 1)[0]
    return None


def read_file(agents, node, pod, container, path):
    [cid] = [c["Id"] for c in agents.containers(node, pod)
             if c["Labels"].get("shepherd.io/container-name") == container and c["State"] == "running"]
    return agents.engine.api.exec_start(agents.engine.api.exec_create(cid, ["cat", path])["Id"]).decode()


def test_pods_resolve_services_by_short_and_full_names(agents, dns_network, upstream):
    gateway = dns_network
    # Docker's default bridge for the pods (no pod bridge or iptables chains on the host's engine;
    # the pod network's case is tests/integration/test_pod_network_dns.py, in namespaces)
    node = agents.start("dn", extra=["--dns-address", gateway, "--dns-resolv-conf", upstream,
                                     "--pod-network", "none"])
    tag = agents.tag
    web, db = "web-%s" % tag, "db-%s" % tag
    sleeper = {"image": IMAGE, "imagePullPolicy": "Never", "command": ["sleep", "3600"]}
    agents.create_pod("backend-%s" % tag, [dict(sleeper, name="main")], node=node, labels={"app": web})
    for name, spec in ((web, {"clusterIP": CLUSTER_IP}), (db, {"clusterIP": "None"})):
        agents.client.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                                          "spec": dict(spec, selector={"app": web},
                                                       ports=[{"name": "http", "port": 80}])})
    try:
        backend = agents.wait_running("backend-%s" % tag)
        backend_ip = backend["status"]["podIP"]

        def served(name, want):
            reply = DNSRecord.parse(DNSRecord.question(name).send(gateway, 53, timeout=2))
            return [str(rr.rdata) for rr in reply.rr] == [want]
        # the agent's watch sees the Service and the endpoints controller's Endpoints
        wait_until(lambda: served("%s.default.svc.cluster.local" % web, CLUSTER_IP), 20, "the Service in DNS",
                   agents.log_tails)
        wait_until(lambda: served("%s.default.svc.cluster.local" % db, backend_ip), 20, "the headless endpoints",
                   agents.log_tails)

        agents.create_pod("one-%s" % tag, [dict(sleeper, name="main")], node=node)
        agents.create_pod("two-%s" % tag, [dict(sleeper, name="first"), dict(sleeper, name="second")], node=node)
        agents.wait_running("one-%s" % tag)
        agents.wait_running("two-%s" % tag)
        for pod, containers in (("one-%s" % tag, ["main"]), ("two-%s" % tag, ["first", "second"])):
            for container in containers:
                conf = read_file(agents, node, pod, container, "/etc/resolv.conf")
                # on a user-defined network Docker writes its embedded DNS, which forwards to ours
                assert "nameserver %s" % gateway in conf or "nameserver 127.0.0.11" in conf, conf
                assert "search default.svc.cluster.local svc.cluster.local cluster.local" in conf, conf
                assert "ndots:5" in conf, conf
                for name in (web, web + ".default", web + ".default.svc.cluster.local"):
                    got = wait_until(lambda: resolved(agents, node, pod, container, name), 10,
                                     "%s in %s/%s to resolve" % (name, pod, container))
                    assert got == CLUSTER_IP, (pod, container, name, got)
                assert resolved(agents, node, pod, container, db) == backend_ip
                # outside the zone: through the search path (NXDOMAIN from us) to the forwarder
                assert resolved(agents, node, pod, container, "example.com") == "93.184.216.34"
                assert resolved(agents, node, pod, container, "nope-%s" % tag) is None
        # busybox nslookup asks our server directly for the full name
        [cid] = [c["Id"] for c in agents.containers(node, "one-%s" % tag) if c["State"] == "running"]
        out = agents.engine.api.exec_start(agents.engine.api.exec_create(
            cid, ["nslookup", "%s.default.svc.cluster.local" % web])["Id"]).decode()
        assert "Address: %s" % CLUSTER_IP in out and gateway in out, out

        # the Service goes: its name goes too
        agents.client.delete("services", web)
        wait_until(lambda: resolved(agents, node, "one-%s" % tag, "main", web) is None, 20, "the name to go")
    finally:
        for name in (web, db):
            try:
                agents.client.delete("services", name)
            except Exception:  # noqa: BLE001
                pass


def test_auto_address_is_the_pod_network_gateway(dns_network, dns_network_name):
    runtime = DockerRuntime()
    try:
        assert docker_network_gateway(runtime, dns_network_name) == dns_network
        assert docker_network_gateway(runtime, "dn-no-such-network") is None
    finally:
        runtime.close()


def test_a_pod_on_a_user_defined_network_resolves_through_dockers_embedded_dns(dns_network, dns_network_name):
    """A pod bridge made as a Docker network (not the default bridge) puts 127.0.0.11 in
    resolv.conf: Docker's resolver in the pod's namespace, which forwards to --dns (ours),
    keeping the search path and ndots."""
    gateway, tag = dns_network, uuid.uuid4().hex[:6]
    zone = Zone()
    zone.set_service("default", "web", {"metadata": {"name": "web", "namespace": "default"},
                                        "spec": {"clusterIP": CLUSTER_IP, "ports": [{"port": 80}]}})
    server = DNSServer(zone, gateway, 53, Forwarder(lambda: [])).start()
    runtime = DockerRuntime()
    pod = {"metadata": {"name": "p-%s" % tag, "namespace": "default", "uid": "dn-%s" % tag},
           "spec": {"containers": [{"name": "main", "image": IMAGE}]}}
    config = P.container_config(pod, dict(pod["spec"]["containers"][0], command=["sleep", "3600"]), "dn-%s" % tag,
                                "127.0.0.1", 0, dns=resolver_config(pod, ClusterDNS(gateway)))
    config.network_mode = dns_network_name
    cid = runtime.create(config)
    try:
        runtime.start(cid)
        code, out = runtime.exec(cid, ["cat", "/etc/resolv.conf"], timeout=5)
        assert b"nameserver 127.0.0.11" in out and b"ndots:5" in out, out
        for name in ("web", "web.default", "web.default.svc.cluster.local"):
            code, out = runtime.exec(cid, ["ping", "-c", "1", "-W", "1", name], timeout=10)
            assert out.splitlines()[0].startswith(b"PING %s (%s)" % (name.encode(), CLUSTER_IP.encode())), out
    finally:
        runtime.remove(cid)
        runtime.close()
        server.stop()
