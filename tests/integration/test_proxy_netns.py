"""Services through real iptables, inside network namespaces made here (prefix sv).

  svnode  a node: bridge svbr0 10.244.1.1/24, sve0 192.168.77.1/24 to svext;
          the real Proxier applies its rules here (iptables-restore via ip netns exec)
  svpod1, svpod2  backends on the bridge (10.244.1.2, .3): a TCP server on 8080 and a
          UDP one on 5353, each answering with its name
  svpodc  a client pod on the bridge (10.244.1.4)
  svext   another node (192.168.77.2), reaching node ports from outside

Root is required: without it these tests fail (they never skip). Everything is in
namespaces we create and delete; the host's tables and routes are not touched.
"""
import os
import subprocess
import sys
import time

import pytest

from agent.proxy import rules
from agent.proxy.cleanup import cleanup_services
from agent.proxy.iptables import Iptables
from agent.proxy.node_setup import ensure_service_route, hairpin_all, prepare_node
from agent.proxy.proxier import Proxier, ProxyConflict, ProxyState

NODE, EXT, CLIENT = "svnode", "svext", "svpodc"
PODS = {"svpod1": "10.244.1.2", "svpod2": "10.244.1.3", CLIENT: "10.244.1.4"}
NODE_IP = "192.168.77.1"

SERVER = r"""
import socket, sys, threading
name = sys.argv[1]
tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
tcp.bind(("0.0.0.0", 8080)); tcp.listen(64)
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("0.0.0.0", 5353))
def serve_udp():
    while True:
        data, peer = udp.recvfrom(100)
        udp.sendto(name.encode(), peer)
threading.Thread(target=serve_udp, daemon=True).start()
print("ready", flush=True)
while True:
    conn, _ = tcp.accept()
    conn.sendall(name.encode()); conn.close()
"""

CLIENT_SCRIPT = r"""
import socket, sys
mode, host, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
for _ in range(count):
    try:
        if mode == "tcp":
            s = socket.create_connection((host, port), timeout=3)
        else:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("0.0.0.0", 40000)); s.settimeout(3); s.connect((host, port)); s.send(b"?")
        print(s.recv(100).decode(), flush=True)
        s.close()
    except Exception as exc:
        print("ERR:" + type(exc).__name__, flush=True)
"""


def sh(*argv, ns=None, check=True):
    argv = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise AssertionError("%s: %s" % (" ".join(argv), proc.stderr.strip()))
    return proc.stdout


def ask(ns, mode, host, port, count=1):
    return sh(sys.executable, "-c", CLIENT_SCRIPT, mode, host, str(port), str(count), ns=ns).split()


def _delete_all():
    for ns in [NODE, EXT] + list(PODS):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture(scope="module")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("these tests program iptables in network namespaces: run them as root")
    _delete_all()
    servers = []
    try:
        for ns in [NODE, EXT] + list(PODS):
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "link", "add", "svbr0", "type", "bridge", ns=NODE)
        sh("ip", "addr", "add", "10.244.1.1/24", "dev", "svbr0", ns=NODE)
        sh("ip", "link", "set", "svbr0", "up", ns=NODE)
        for i, (pod, ip) in enumerate(sorted(PODS.items())):
            veth = "svv%d" % i
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", pod, ns=NODE)
            sh("ip", "link", "set", veth, "master", "svbr0", "up", ns=NODE)
            sh("ip", "addr", "add", ip + "/24", "dev", "eth0", ns=pod)
            sh("ip", "link", "set", "eth0", "up", ns=pod)
            sh("ip", "route", "add", "default", "via", "10.244.1.1", ns=pod)
        sh("ip", "link", "add", "sve0", "type", "veth", "peer", "name", "eth0", "netns", EXT, ns=NODE)
        sh("ip", "addr", "add", NODE_IP + "/24", "dev", "sve0", ns=NODE)
        sh("ip", "link", "set", "sve0", "up", ns=NODE)
        sh("ip", "addr", "add", "192.168.77.2/24", "dev", "eth0", ns=EXT)
        sh("ip", "link", "set", "eth0", "up", ns=EXT)
        for pod in ("svpod1", "svpod2"):
            proc = subprocess.Popen(["ip", "netns", "exec", pod, sys.executable, "-c", SERVER, pod],
                                    stdout=subprocess.PIPE, text=True)
            servers.append(proc)
            assert proc.stdout.readline().strip() == "ready"
        run = Iptables(prefix=["ip", "netns", "exec", NODE])
        assert prepare_node(run) == []
        ensure_service_route(run, "10.96.0.0/12", "svbr0")
        assert sorted(hairpin_all(run, "svbr0")) == ["svv0", "svv1", "svv2"]
        state = ProxyState()
        proxier = Proxier(state, run, node_ips=[NODE_IP], cluster_cidr="10.244.0.0/16",
                          setup=lambda: ensure_service_route(run, "10.96.0.0/12", "svbr0"))
        yield state, proxier, run
    finally:
        for proc in servers:
            proc.kill()
            proc.wait()
        _delete_all()


def service(name, ip, port, target, protocol="TCP", node_port=None):
    spec = {"clusterIP": ip, "type": "NodePort" if node_port else "ClusterIP",
            "ports": [{"port": port, "targetPort": target, "protocol": protocol}]}
    if node_port:
        spec["ports"][0]["nodePort"] = node_port
    return {"metadata": {"namespace": "default", "name": name}, "spec": spec}


def endpoints(name, ips, port, protocol="TCP"):
    subsets = [{"addresses": [{"ip": ip} for ip in ips], "ports": [{"port": port, "protocol": protocol}]}]
    subsets = subsets if ips else []
    return {"metadata": {"namespace": "default", "name": name}, "subsets": subsets}


def publish(state, proxier, *objs):
    for obj in objs:
        state.put("services" if "spec" in obj else "endpoints", obj)
    proxier.sync()


def test_cluster_ip_is_balanced_over_both_backends(cluster):
    state, proxier, run = cluster
    publish(state, proxier, service("web", "10.96.0.10", 80, 8080),
            endpoints("web", [PODS["svpod1"], PODS["svpod2"]], 8080))
    answers = ask(CLIENT, "tcp", "10.96.0.10", 80, count=40)
    assert set(answers) == {"svpod1", "svpod2"}, answers
    # From the node itself too (nat OUTPUT, through the service CIDR route).
    assert set(ask(NODE, "tcp", "10.96.0.10", 80, count=20)) == {"svpod1", "svpod2"}


def test_node_port_from_another_node_reaches_both_backends(cluster):
    state, proxier, run = cluster
    publish(state, proxier, service("web-np", "10.96.0.11", 80, 8080, node_port=30080),
            endpoints("web-np", [PODS["svpod1"], PODS["svpod2"]], 8080))
    answers = ask(EXT, "tcp", NODE_IP, 30080, count=40)
    assert set(answers) == {"svpod1", "svpod2"}, answers


def test_hairpin_a_backend_reaches_itself_through_its_service(cluster):
    state, proxier, run = cluster
    publish(state, proxier, service("self", "10.96.0.12", 80, 8080), endpoints("self", [PODS["svpod1"]], 8080))
    assert ask("svpod1", "tcp", "10.96.0.12", 80, count=3) == ["svpod1"] * 3


def test_a_service_without_endpoints_refuses_at_once(cluster):
    state, proxier, run = cluster
    publish(state, proxier, service("empty", "10.96.0.13", 80, 8080, node_port=30081), endpoints("empty", [], 8080))
    started = time.monotonic()
    assert ask(CLIENT, "tcp", "10.96.0.13", 80) == ["ERR:ConnectionRefusedError"]
    assert ask(EXT, "tcp", NODE_IP, 30081) == ["ERR:ConnectionRefusedError"]
    # Refused, not timed out: both answers came well inside one client timeout (3 s).
    assert time.monotonic() - started < 3.0


def test_removing_an_endpoint_deletes_its_udp_conntrack_entries(cluster):
    state, proxier, run = cluster
    publish(state, proxier, service("dns", "10.96.0.20", 53, 5353, "UDP"),
            endpoints("dns", [PODS["svpod1"]], 5353, "UDP"))
    assert ask(CLIENT, "udp", "10.96.0.20", 53) == ["svpod1"]
    assert PODS["svpod1"] in sh("conntrack", "-L", "-p", "udp", "--orig-dst", "10.96.0.20", ns=NODE)
    # The same flow (same source port) would stay with svpod1 while its entry lives.
    publish(state, proxier, endpoints("dns", [PODS["svpod2"]], 5353, "UDP"))
    assert PODS["svpod1"] not in sh("conntrack", "-L", "-p", "udp", "--orig-dst", "10.96.0.20", ns=NODE)
    assert ask(CLIENT, "udp", "10.96.0.20", 53) == ["svpod2"]
    # Scale to zero: the entry goes and the client is refused.
    publish(state, proxier, endpoints("dns", [], 5353, "UDP"))
    assert PODS["svpod2"] not in sh("conntrack", "-L", "-p", "udp", "--orig-dst", "10.96.0.20", ns=NODE)
    assert ask(CLIENT, "udp", "10.96.0.20", 53) == ["ERR:ConnectionRefusedError"]


def test_a_removed_service_leaves_no_chain_behind(cluster):
    state, proxier, run = cluster
    publish(state, proxier, service("gone", "10.96.0.30", 80, 8080), endpoints("gone", [PODS["svpod2"]], 8080))
    sp = rules.service_ports([state.objects["services"][("default", "gone")]],
                             {("default", "gone"): state.objects["endpoints"][("default", "gone")]})[0]
    chain = rules.svc_chain(sp)
    assert chain in run.our_chains()["nat"]
    state.remove("services", service("gone", "", 0, 0))
    state.remove("endpoints", endpoints("gone", [], 0))
    figures = proxier.sync()
    assert not figures["full"]
    assert chain not in run.our_chains()["nat"]
    assert rules.sep_chain(sp, sp.endpoints[0]) not in run.our_chains()["nat"]
    assert ask(CLIENT, "tcp", "10.96.0.30", 80) != ["svpod2"]


def test_a_full_sync_removes_chains_nobody_rendered_and_keeps_one_jump_each(cluster):
    state, proxier, run = cluster
    subprocess.run(["ip", "netns", "exec", NODE, "iptables-restore", "--noflush"], check=True, text=True,
                   input="*nat\n:SHEP-SVC-LEFTOVER - [0:0]\n-A SHEP-SVC-LEFTOVER -j RETURN\nCOMMIT\n")
    proxier.sync(full=True)
    proxier.sync(full=True)
    saved = sh("iptables-save", ns=NODE)
    assert "SHEP-SVC-LEFTOVER" not in saved
    for table, chain, rule in rules.JUMPS:
        target = rule.rsplit(" ", 1)[1]
        assert sh("iptables-save", "-t", table, ns=NODE).count("-A %s " % chain) >= 1
        assert sum(1 for line in sh("iptables-save", "-t", table, ns=NODE).splitlines()
                   if line.startswith("-A %s " % chain) and line.endswith("-j " + target)) == 1


def test_a_second_clusters_proxy_on_the_host_stands_down_and_changes_nothing(cluster):
    state, proxier, run = cluster
    publish(state, proxier, service("owned", "10.96.0.30", 80, 8080), endpoints("owned", [PODS["svpod1"]], 8080))
    a, b = rules.owner("cluster-a", None, "a-1"), rules.owner("cluster-b", None, "b-1")
    mine = Proxier(state, run, node_ips=[NODE_IP], cluster_cidr="10.244.0.0/16", owner=a)
    mine.sync()
    assert run.claim().owner == a
    before = sh("iptables-save", "-t", "nat", ns=NODE)
    other_state = ProxyState()
    other_state.put("services", service("theirs", "10.112.0.30", 80, 8080))
    other_state.put("endpoints", endpoints("theirs", [PODS["svpod2"]], 8080))
    other = Proxier(other_state, run, node_ips=[NODE_IP], cluster_cidr="10.232.0.0/16", owner=b)
    for _ in range(2):          # its first sync, and a retry: it looks again, and stands down again
        with pytest.raises(ProxyConflict) as refused:
            other.sync()
        assert "belong to another cluster (cluster-a, node a-1), not to this agent's (cluster-b, node b-1)" \
            in str(refused.value)
        assert "--proxy-mode none" in str(refused.value)
    after = sh("iptables-save", "-t", "nat", ns=NODE)
    assert [ln for ln in after.splitlines() if ln.startswith("-A")] == \
        [ln for ln in before.splitlines() if ln.startswith("-A")], "the first cluster's rules are untouched"
    assert ask(CLIENT, "tcp", "10.96.0.30", 80) == ["svpod1"]
    # The owner itself, restarted (a new Proxier), goes on; and once that cluster's rules
    # are gone, the other may take the host.
    assert Proxier(state, run, node_ips=[NODE_IP], cluster_cidr="10.244.0.0/16", owner=a).sync()["full"]
    mine.release()              # a proxy that stops gives its claim up: the other may take the host
    other.sync()
    assert run.claim().owner == b
    assert ask(CLIENT, "tcp", "10.112.0.30", 80) == ["svpod2"]
    cleanup_services(run)
    proxier.sync(full=True)       # the module's proxier (no owner) takes the host back for the tests after


def test_cleanup_twice_is_harmless(cluster):
    state, proxier, run = cluster
    proxier.sync(full=True)
    assert "chain(s)" in cleanup_services(run) and "chain(s)" in cleanup_services(run)
    assert "SHEP" not in sh("iptables-save", ns=NODE)
    proxier.sync(full=True)


def test_cleanup_removes_every_chain_jump_and_the_route(cluster):
    state, proxier, run = cluster
    assert "SHEP-" in sh("iptables-save", ns=NODE)
    # The real command, run inside the node's namespace.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    done = subprocess.run(["ip", "netns", "exec", NODE, sys.executable, "-m", "agent.main", "network", "cleanup",
                           "--node", "sv-no-such-node"],   # no Docker network of ours is touched
                          capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=root))
    assert done.returncode == 0, done.stderr
    assert "service rules removed" in done.stdout
    assert "SHEP" not in sh("iptables-save", ns=NODE)
    assert "10.96.0.0/12" not in sh("ip", "route", ns=NODE)
    figures = proxier.sync(full=True)      # the next periodic full sync puts everything back
    assert figures["full"] and not figures["rewrite"]
    assert "10.96.0.0/12" in sh("ip", "route", ns=NODE)
    # each connection picks an endpoint at random (1/2): 30 all to one has odds 2^-29; 10 failed once in CI
    assert set(ask(NODE, "tcp", "10.96.0.10", 80, count=30)) == {"svpod1", "svpod2"}
    assert set(ask(CLIENT, "tcp", "10.96.0.10", 80, count=20)) == {"svpod1", "svpod2"}
