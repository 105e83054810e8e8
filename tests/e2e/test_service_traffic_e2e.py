"""The whole data plane on real Docker, as `make up` runs it: 3 replicas, 2 agents on this
engine, each with its own pod bridge, the first with --proxy-mode iptables (the host's rules
for both nodes' pods). A Deployment `web` of 2 busybox httpd pods (one per node: max-pods
2 and 1 with the client on the first) each serving its hostname; a ClusterIP Service and a
NodePort one. A busybox client fetches the Service by its full and short names and is
answered by both backends; a backend reaches itself through its Service (hairpin); the
NodePort answers on the node's address; after scaling to zero the client is refused at once.

The servers allocate blocks from 10.244.192.0/18 (other tests' pod networks on this engine
use the start of 10.244.0.0/16) while the agents keep --cluster-cidr 10.244.0.0/16: every
agent of the cluster on a host renders the same SHEPHERD-PODNET-<hash> chains. At the end the nodes' networks,
the SHEP-* chains and the service route go (`shepherd-agent network cleanup --node`)."""
import subprocess
import sys
import time

import pytest

from tests.integration.helpers import start_cluster

from .helpers import E2E, IMAGE, AgentSet, wait_until

pytestmark = pytest.mark.e2e

SERVER_OPTIONS = dict(E2E.server_options, cluster_cidr="10.244.192.0/18")
AGENT_CIDR = ["--cluster-cidr", "10.244.0.0/16"]
WEB = ("mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 8080 -h /www")


@pytest.fixture(scope="module")
def e2e_cluster(tmp_path_factory, request, docker_engine):
    cluster = start_cluster(tmp_path_factory.mktemp("dataplane"), 3, SERVER_OPTIONS)
    request.addfinalizer(cluster.stop_all)
    return cluster


def node_address():
    """This host's address toward the outside (what the NodePort must answer on)."""
    out = subprocess.run(["ip", "-4", "-o", "route", "get", "192.0.2.250"], capture_output=True, text=True).stdout
    words = out.split()
    return words[words.index("src") + 1] if "src" in words else None


def exec_in(agents, cid, cmd, timeout=15):
    api = agents.engine.api
    exec_id = api.exec_create(cid, ["timeout", str(timeout), "sh", "-c", cmd])["Id"]
    return api.exec_start(exec_id).decode(errors="replace")


def running_container(agents, pod, name):
    ids = [c["Id"] for c in agents.containers(pod=pod) if c["State"] == "running"
           and c["Labels"].get("shepherd.io/container-name") == name]
    return ids[0] if ids else None


# busybox nc, not wget (this image's wget crashes resolving names); the body's last line
GET = "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 %s 80 2>&1 | tail -n 1"


def fetch_many(agents, cid, host, count=12):
    out = exec_in(agents, cid, "for i in $(seq %d); do %s; done" % (count, GET % host), 40)
    return [line.strip() for line in out.splitlines() if line.strip()]



def test_make_up_data_plane_services_dns_nodeport_hairpin_and_refusal(agents):
    client = agents.client
    address = node_address()
    assert address, "no non-loopback address on this host for the NodePort"
    a = agents.start("a", extra=AGENT_CIDR + ["--proxy-mode", "iptables", "--max-pods", "2"])
    b = agents.start("b", extra=AGENT_CIDR + ["--max-pods", "1"])
    try:
        agents.create_pod("client", [{"name": "c", "image": IMAGE, "command": ["sleep", "3600"]}], node=a)
        labels = {"app": "web-%s" % agents.tag}
        client.create("deployments", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"nodeSelector": {agents.group_label[0]: agents.group_label[1]},
                         "containers": [{"name": "web", "image": IMAGE, "command": ["sh", "-c", WEB],
                                         "ports": [{"containerPort": 8080}],
                                         "readinessProbe": {"tcpSocket": {"port": 8080},
                                                            "periodSeconds": 1}}]}}}}, namespace="default")
        client.create("services", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
                                   "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}},
                      namespace="default")
        nodeport = client.create("services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web-np"},
            "spec": {"type": "NodePort", "selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}},
            namespace="default")
        port = nodeport["spec"]["ports"][0]["nodePort"]
        agents.wait_running("client", 40)

        def both_ready():
            pods = [p for p in agents.pods("app=%s" % labels["app"])
                    if any(c.get("type") == "Ready" and c.get("status") == "True"
                           for c in (p.get("status") or {}).get("conditions") or [])]
            return pods if len(pods) == 2 else None
        pods = wait_until(both_ready, 60, "2 web pods Ready", agents.log_tails)
        assert {p["spec"]["nodeName"] for p in pods} == {a, b}
        ips = {p["status"]["podIP"] for p in pods}
        assert all(ip.startswith("10.244.") for ip in ips), ips
        names = {p["metadata"]["name"] for p in pods}
        cid = running_container(agents, "client", "c")

        last = {}

        def answered_by_both(url):
            got = last["got"] = fetch_many(agents, cid, url)
            return got if names <= set(got) else None
        for url in ("web.default.svc.cluster.local", "web"):
            got = wait_until(lambda: answered_by_both(url), 40, "both backends answer %s" % url,
                             lambda: "the client got %s\n%s" % (last.get("got"), agents.log_tails(8)))
            assert set(got) <= names | {""}, got

        # hairpin: a backend through its own Service gets itself at least once
        for pod in pods:
            name = pod["metadata"]["name"]
            web = running_container(agents, name, "web")
            wait_until(lambda: name in fetch_many(agents, web, "web", 8), 30,
                       "pod %s reaches itself through its Service" % name)

        # the NodePort on the node's address, from the host
        def nodeport_answers():
            seen = set()
            for _ in range(12):
                proc = subprocess.run(["curl", "-s", "-m", "2", "http://%s:%d/" % (address, port)],
                                      capture_output=True, text=True)
                seen.add(proc.stdout.strip())
            return seen if names <= seen else None
        wait_until(nodeport_answers, 30, "NodePort %s:%d answered by both" % (address, port))

        # scaled to zero: refused at once, not a hang
        client.patch("deployments", "web", {"spec": {"replicas": 0}}, namespace="default")
        wait_until(lambda: not agents.pods("app=%s" % labels["app"]), 40, "web pods gone")

        seen = []

        def refused():
            started = time.monotonic()
            out = exec_in(agents, cid, GET.replace("-w 2", "-w 5") % "web", 10)
            seen.append((out.strip(), round(time.monotonic() - started, 2)))
            return (out, time.monotonic() - started) if "refused" in out.lower() else None
        out, took = wait_until(refused, 45, "the client refused once no endpoint is left",
                               lambda: "the client got %s" % seen[-5:])
        assert took < 2.0, (out, took)
    finally:
        for kind, name in (("deployments", "web"), ("services", "web"), ("services", "web-np")):
            try:
                client.delete(kind, name, namespace="default")
            except Exception:  # noqa: BLE001 - keep cleaning
                pass
        agents.cleanup()
        for node in (a, b):
            done = subprocess.run([sys.executable, "-m", "agent.main", "network", "cleanup", "--node", node],
                                  capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stdout + done.stderr
        for node in (a, b):
            left = agents.engine.api.networks(filters={"label": ["shepherd.io/pod-network=%s" % node]})
            assert not left, left
