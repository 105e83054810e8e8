"""The agent's pod network parts that need no root: address picking, the route set and
its diff, the rendered iptables chains, the bridge's options, the cleanup step list."""
import docker
import pytest

from agent.network import bridge, cleanup, rules
from agent.network.ipam import PENDING_SECONDS, REMEMBER_SECONDS, AddressesExhausted, PodAddresses
from agent.network.pod_network import PodNetwork
from agent.network.routes import desired_routes, route_diff
from agent.runtime.base import ContainerConfig, CreateError
from agent.runtime.docker_runtime import create_kwargs
from controller_kit import FakeClock


# ---- ipam ----

def test_a_freed_address_is_not_handed_out_again_at_once():
    clock = FakeClock()
    ipam = PodAddresses("10.244.1.0/29", clock=clock)      # .1 gateway, .2-.6 for pods
    assert [ipam.assign("a"), ipam.assign("b")] == ["10.244.1.2", "10.244.1.3"]
    ipam.sync({"10.244.1.2": "a", "10.244.1.3": "b"})
    ipam.sync({"10.244.1.3": "b"})                          # pod a went away
    clock.now += REMEMBER_SECONDS + 1
    assert ipam.assign("c") == "10.244.1.4"                 # not a's .2, although it is free
    assert ipam.assign("d") == "10.244.1.5"
    assert ipam.assign("e") == "10.244.1.6"
    assert ipam.assign("f") == "10.244.1.2"                 # only after the cursor went round


def test_a_pod_keeps_its_address_across_container_restarts_and_others_wait_for_it():
    clock = FakeClock()
    ipam = PodAddresses("10.244.1.0/29", clock=clock)
    first = ipam.assign("web")
    ipam.sync({first: "web"})
    ipam.sync({})                                           # its container exited
    assert ipam.assign("web") == first
    assert ipam.assign("other") != first


def test_pending_addresses_stay_taken_until_seen_or_expired_and_exhaustion_says_so():
    clock = FakeClock()
    ipam = PodAddresses("10.244.1.0/30", clock=clock)      # one pod address: .2
    assert ipam.assign("a") == "10.244.1.2"
    with pytest.raises(AddressesExhausted, match="no free pod address left in 10.244.1.0/30"):
        ipam.assign("b")
    clock.now += max(PENDING_SECONDS, REMEMBER_SECONDS) + 1
    assert ipam.assign("b") == "10.244.1.2"


def test_after_a_restart_the_plan_comes_back_from_what_runs_and_the_state_file(tmp_path):
    state = str(tmp_path / "pod-network.json")
    ipam = PodAddresses("10.244.1.0/24", state_file=state)
    for uid in "abcd":
        ipam.assign(uid)                                    # .2 .. .5, .5 last
    again = PodAddresses("10.244.1.0/24", state_file=state)
    again.sync({"10.244.1.2": "a", "10.244.1.3": "b"})      # c and d are gone
    assert again.assign("a") == "10.244.1.2"                # a running pod keeps its address
    assert again.assign("new") == "10.244.1.6"              # after the last one handed out, not c's or d's
    fresh = PodAddresses("10.244.1.0/24")                   # no state file: after the highest running one
    fresh.sync({"10.244.1.9": "x", "10.244.1.3": "y"})
    assert fresh.assign("new") == "10.244.1.10"


# ---- routes ----

def node(name, cidr, ip):
    return {"metadata": {"name": name}, "spec": {"podCIDR": cidr} if cidr else {},
            "status": {"addresses": [{"type": "InternalIP", "address": ip}] if ip else []}}


def test_desired_routes_skip_this_node_nodes_without_block_or_address_and_nodes_on_this_host():
    nodes = [node("w1", "10.244.0.0/24", "192.0.2.1"), node("w2", "10.244.1.0/24", "192.0.2.2"),
             node("w3", "", "192.0.2.3"), node("w4", "10.244.3.0/24", ""),
             node("w5", "10.244.5.0/24", "192.0.2.1")]
    assert desired_routes(nodes, "w1", {"192.0.2.1", "127.0.0.1"}) == {"10.244.1.0/24": "192.0.2.2"}


def test_route_diff_replaces_changed_gateways_adds_new_and_deletes_gone_ones():
    current = {"10.244.1.0/24": "192.0.2.2", "10.244.2.0/24": "192.0.2.3", "10.244.9.0/24": "192.0.2.9"}
    desired = {"10.244.1.0/24": "192.0.2.2", "10.244.2.0/24": "192.0.2.30", "10.244.4.0/24": "192.0.2.4"}
    assert route_diff(current, desired) == ({"10.244.2.0/24": "192.0.2.30", "10.244.4.0/24": "192.0.2.4"},
                                            ["10.244.9.0/24"])
    assert route_diff(desired, desired) == ({}, [])


# ---- iptables ----

def test_the_rendered_chains_accept_the_cluster_cidr_and_masquerade_only_what_leaves_it():
    text = rules.render("10.244.0.0/16")
    forward, masq = rules.chains("10.244.0.0/16")
    assert (forward, masq) == ("SHEPHERD-PODNET-12240718", "SHEPHERD-MASQ-12240718"), \
        "a name that changed would orphan the chains agents made before"
    assert rules.chains("10.244.0.0/16") != rules.chains("10.232.0.0/16"), "each cluster has its own pair"
    assert rules.chains("10.244.7.0/16") == rules.chains("10.244.0.0/16"), "however the CIDR is written"
    text = {table: t.replace(forward, "SHEPHERD-PODNET").replace(masq, "SHEPHERD-PODNET-MASQ")
            for table, t in text.items()}
    assert text == rules.render("10.244.0.0/16", rules.LEGACY_CHAINS)
    assert text["filter"] == (
        "*filter\n:SHEPHERD-PODNET - [0:0]\n"
        "-A SHEPHERD-PODNET -s 10.244.0.0/16 -m comment --comment \"shepherd pod network: from pods\" -j ACCEPT\n"
        "-A SHEPHERD-PODNET -d 10.244.0.0/16 -m comment --comment \"shepherd pod network: to pods\" -j ACCEPT\n"
        "COMMIT\n")
    assert text["nat"] == (
        "*nat\n:SHEPHERD-PODNET-MASQ - [0:0]\n"
        "-A SHEPHERD-PODNET-MASQ -d 10.244.0.0/16 -m comment --comment \"shepherd pod network: pod to pod keeps "
        "its source\" -j RETURN\n"
        "-A SHEPHERD-PODNET-MASQ -s 10.244.0.0/16 -m comment --comment \"shepherd pod network: leaving the "
        "cluster CIDR\" -j MASQUERADE\nCOMMIT\n")


# ---- the bridge and the container ----

def test_the_bridge_network_is_named_labelled_and_made_without_dockers_masquerade():
    opts = bridge.network_options("worker-1", "10.244.3.0/24")
    assert opts["name"] == "shepherd-pods-worker-1"
    assert opts["labels"][bridge.LABEL_NETWORK] == "worker-1"
    assert opts["options"]["com.docker.network.bridge.enable_ip_masquerade"] == "false"
    assert len(opts["options"]["com.docker.network.bridge.name"]) <= 15
    assert bridge.bridge_name("worker-1") != bridge.bridge_name("worker-2")
    [pool] = opts["ipam"]["Config"]
    assert (pool["Subnet"], pool["Gateway"]) == ("10.244.3.0/24", "10.244.3.1")


def test_a_container_on_the_pod_network_asks_docker_for_the_address_we_picked():
    api = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41")
    kwargs = create_kwargs(api, ContainerConfig(name="c", image="busybox", labels={},
                                                network_mode="shepherd-pods-w1", ipv4_address="10.244.3.7",
                                                hostname="web"))
    assert kwargs["networking_config"]["EndpointsConfig"]["shepherd-pods-w1"]["IPAMConfig"] == {
        "IPv4Address": "10.244.3.7"}
    assert kwargs["host_config"]["NetworkMode"] == "shepherd-pods-w1"
    assert kwargs["hostname"] == "web"


def test_attach_refuses_with_the_reason_until_the_network_is_ready():
    net = PodNetwork(client=None, docker_api=None, node="w1", cluster_cidr="10.244.0.0/16", stop=None)
    config = ContainerConfig(name="c", image="busybox", labels={})
    with pytest.raises(CreateError, match="not ready: waiting for this node's pod CIDR"):
        net.attach(config, {"metadata": {"uid": "u1"}})
    net.addresses = PodAddresses("10.244.3.0/24")
    net.ready.set()
    attached = net.attach(config, {"metadata": {"uid": "u1"}})
    assert (attached.network_mode, attached.ipv4_address) == ("shepherd-pods-w1", "10.244.3.2")


# ---- cleanup ----

def test_cleanup_runs_every_step_even_after_one_fails_and_others_can_add_theirs():
    calls = []

    def broken(context):
        calls.append("broken")
        raise RuntimeError("no iptables here")

    steps = [("a", broken), ("b", lambda context: calls.append("b") or ["thing b"])]
    removed, failures = cleanup.run(cleanup.CleanupContext(), steps)
    assert calls == ["broken", "b"] and removed == ["thing b"] and failures == ["a: no iptables here"]
    before = list(cleanup.STEPS)
    try:
        cleanup.add_step("dns", lambda context: [], before="pod networks")
        assert [n for n, _ in cleanup.STEPS] == ["service rules", "pod routes", "pod network iptables", "dns",
                                                 "pod networks"]
    finally:
        cleanup.STEPS[:] = before


# ---- the agent's node status keeps the control plane's NetworkUnavailable ----

def test_a_status_post_keeps_conditions_the_control_plane_set():
    import threading

    from agent.node import NodeManager
    from agent.runtime.hollow_runtime import HollowRuntime
    manager = NodeManager(None, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(), cpu_millicores=1000,
                          memory_bytes=1 << 30)
    manager.node = {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown"},
        {"type": "NetworkUnavailable", "status": "True", "reason": "CIDRNotAvailable", "message": "full"}]}}
    conditions = manager.status()["conditions"]
    assert [c["type"] for c in conditions] == ["Ready", "NetworkUnavailable"]
    assert conditions[0]["reason"] == "AgentReady" and conditions[1]["reason"] == "CIDRNotAvailable"



def test_reading_the_node_learns_conditions_written_after_the_agents_last_post(store, replicas):
    import threading

    from agent.node import NodeManager
    from agent.runtime.hollow_runtime import HollowRuntime
    from real_api import token_for, token_table
    from shepherd_ha.client import Client

    user = "system:node:n1"
    server = replicas(tokens=token_table({user: ["system:nodes"]}))
    # the control plane wrote a condition since the agent's last post (the pod CIDR allocator)
    store.put("nodes", {"metadata": {"name": "n1"}, "spec": {}, "status": {"conditions": [
        {"type": "Ready", "status": "True"},
        {"type": "NetworkUnavailable", "status": "True", "reason": "CIDRNotAvailable"}]}})
    client = Client([server.url], timeout=2.0, retry_deadline=1.0, token=token_for(user))
    try:
        manager = NodeManager(client, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(),
                              cpu_millicores=1000, memory_bytes=1 << 30)
        manager.node = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}    # as last posted
        manager._check_node()
    finally:
        client.close()
    assert [c["type"] for c in manager.status()["conditions"]] == ["Ready", "NetworkUnavailable"]


class FakeIptables:
    """Chains as iptables -S prints them; records what was loaded and inserted."""

    class Done:
        def __init__(self, code, out=""):
            self.returncode, self.stdout = code, out

    def __init__(self):
        self.chains = {}          # (table, chain) -> [rule lines]
        self.restores, self.inserts = [], []

    def restore(self, text):
        self.restores.append(text)
        lines = text.splitlines()
        table, chain = lines[0][1:], lines[1][1:].split()[0]
        self.chains[(table, chain)] = [ln for ln in lines if ln.startswith("-A ")]

    def chain_exists(self, table, chain):
        return (table, chain) in self.chains or chain in ("DOCKER-USER", "POSTROUTING")

    def run(self, *args, check=True, stdin=None, binary=None):
        table, op, chain = args[2], args[3], args[4]
        if op == "-S":
            rules = self.chains.get((table, chain))
            return self.Done(1) if rules is None else self.Done(0, "\n".join(["-N " + chain] + rules) + "\n")
        if op == "-C":
            return self.Done(0 if (table, chain, args[6]) in self.inserts else 1)
        if op == "-I":
            self.inserts.append((table, chain, args[7]))
            return self.Done(0)
        raise AssertionError(args)


def test_rules_are_loaded_once_and_left_alone_while_they_hold_so_counters_survive_a_sync():
    ipt = FakeIptables()
    rules.apply("10.244.0.0/16", ipt)
    assert len(ipt.restores) == 2
    names = rules.chains("10.244.0.0/16")
    assert sorted(ipt.inserts) == [("filter", "DOCKER-USER", names.forward), ("nat", "POSTROUTING", names.masq)]
    rules.apply("10.244.0.0/16", ipt)
    assert len(ipt.restores) == 2 and len(ipt.inserts) == 2
    ipt.chains[("nat", names.masq)] = []          # someone flushed our chain
    rules.apply("10.244.0.0/16", ipt)
    assert len(ipt.restores) == 3 and ipt.restores[-1].startswith("*nat")


def test_hairpin_is_set_only_on_the_bridge_ports_that_lack_it():
    from agent.network.pod_network import ports_without_hairpin
    links = [{"ifname": "veth1", "linkinfo": {"info_slave_data": {"hairpin": True}}},
             {"ifname": "veth2", "linkinfo": {"info_slave_data": {"hairpin": False}}},
             {"ifname": "veth3"}]
    assert ports_without_hairpin(links) == ["veth2", "veth3"]


def test_network_cleanup_scopes_are_checked_and_the_cluster_cidr_read_as_the_agent_writes_it(capsys, monkeypatch):
    import pytest
    with pytest.raises(SystemExit):
        cleanup.main(["cleanup", "--services-only", "--node", "n1"])
    assert "leave out --node and --cluster-cidr" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cleanup.main(["cleanup", "--cluster-cidr", "10.244.0.0/33"])
    assert "--cluster-cidr '10.244.0.0/33'" in capsys.readouterr().err
    seen = []
    monkeypatch.setattr(cleanup, "run", lambda context, steps=None: seen.append((context, steps)) or ([], []))
    assert cleanup.main(["cleanup", "--cluster-cidr", "10.244.7.0/16", "--dry-run"]) == 0
    assert seen[-1][0].cluster_cidr == "10.244.0.0/16" and seen[-1][1] is None
    assert cleanup.main(["cleanup", "--services-only"]) == 0
    assert [name for name, _ in seen[-1][1]] == ["service rules"]
