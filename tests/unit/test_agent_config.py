"""shepherd-agent options (flag > env > file > default), the Node and lease objects."""
import argparse
import json
import threading
import types

import pytest

from agent import config
from agent import usage as U
from agent.main import build_parser
from agent.node import LEASE_NAMESPACE, NodeManager
from agent.runtime.hollow_runtime import HollowRuntime
from real_api import token_for, token_table
from shepherd_ha.client import Client
from shepherd_ha.client.http_client import spread_order
from tests.waiting import wait_for


def resolve(argv=(), environ=None):
    args = build_parser().parse_args(list(argv))
    return config.settings(config.resolve(args, environ=environ or {}))


def test_defaults_and_required_servers():
    with pytest.raises(config.ConfigError, match="--servers is required"):
        resolve()
    s = resolve(["--servers", "127.0.0.1:8001,http://127.0.0.1:8002/", "--node-name", "n1"])
    assert s.servers == ["http://127.0.0.1:8001", "http://127.0.0.1:8002"]
    assert s.address == "127.0.0.1" and s.bind == "127.0.0.1"      # loopback servers
    assert s.lease_interval == 5.0 and s.status_interval == 30.0 and s.max_pods == 110
    assert s.runtime == "docker" and s.port == 0 and s.backoff_base == 10.0 and s.backoff_max == 300.0
    assert s.reserved_cpu == 100 and s.reserved_memory == 256 << 20
    assert s.cpu_millicores is None and s.memory_bytes is None


def test_flag_beats_env_beats_file(tmp_path):
    path = tmp_path / "agent.yaml"
    path.write_text("servers: http://h:1\nnode-name: from-file\nlease_interval: 7\nlabels: {zone: a}\n")
    env = {"SHEPHERD_NODE_NAME": "from-env", "SHEPHERD_AGENT_CONFIG": str(path)}
    s = resolve([], env)
    assert s.node_name == "from-env" and s.lease_interval == 7.0 and s.labels == {"zone": "a"}
    s = resolve(["--node-name", "from-flag", "--lease-interval", "2"], env)
    assert s.node_name == "from-flag" and s.lease_interval == 2.0


@pytest.mark.parametrize("argv,message", [
    (["--node-name", "Bad_Name"], "not a valid node name"),
    (["--runtime", "podman"], "use docker or hollow"),
    (["--labels", "novalue"], "is not key=value"),
    (["--labels", "a=b c"], "not a valid label value"),
    (["--lease-interval", "0"], "must be positive"),
    (["--lease-interval", "x"], "not a valid float"),
    (["--cpu", "lots"], "--cpu"),
    (["--address", "node-a"], "not an IP address"),
    (["--port", "70000"], "--port"),
    (["--backoff-base", "10", "--backoff-max", "5"], "at least --backoff-base"),
])
def test_bad_options_are_named(argv, message):
    with pytest.raises(config.ConfigError, match=message):
        resolve(["--servers", "http://127.0.0.1:1", "--node-name", "n1"] + argv)


def test_unknown_file_keys_are_refused(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("servers: x\nnodename: y\n")
    with pytest.raises(config.ConfigError, match="unknown option"):
        resolve(["--config", str(path)])


def test_help_names_every_option_and_its_env():
    text = build_parser().format_help()
    for opt in config.AGENT_OPTIONS:
        assert opt.flag in text and opt.env in text


def test_labels_and_quantities():
    s = resolve(["--servers", "http://127.0.0.1:1", "--node-name", "n1", "--labels", "zone=a, disk=ssd",
                 "--cpu", "4", "--memory", "8Gi", "--runtime", "HOLLOW"])
    assert s.labels == {"zone": "a", "disk": "ssd"} and s.runtime == "hollow"
    assert s.cpu_millicores == 4000 and s.memory_bytes == 8 << 30


def test_default_address_toward_a_remote_server():
    # a UDP connect sends nothing; any address of this host will do
    addr = config.default_address(["http://192.0.2.10:8001"])
    assert addr.count(".") == 3


# ---- the Node and its lease ----

NODE_USER = "system:node:n1"
NODES = "/api/v1/nodes"
NODE = NODES + "/n1"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % LEASE_NAMESPACE
LEASE = LEASES + "/n1"


@pytest.fixture
def api(store, replicas):
    """The real API over an in-memory store, and the agent's real client with the node's
    own identity (the node authorizer answers as it would the agent)."""
    server = replicas(tokens=token_table({NODE_USER: ["system:nodes"]}))
    client = Client([server.url], timeout=2.0, retry_deadline=1.0, token=token_for(NODE_USER))
    yield types.SimpleNamespace(store=store, server=server, client=client)
    client.close()


def sent(server, *methods_paths):
    """The requests the server received, as (method, path), only those given when any."""
    seen = [(r["method"], r["path"]) for r in list(server.requests)]
    return [k for k in seen if k in methods_paths] if methods_paths else seen


def bodies(server, method, path):
    return [json.loads(r["body"]) for r in list(server.requests) if (r["method"], r["path"]) == (method, path)]


def node_manager(client, **kw):
    return NodeManager(client, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(), port=10250,
                       cpu_millicores=2000, memory_bytes=4 << 30, labels={"zone": "a"}, **kw)


def test_node_object(api):
    node = node_manager(api.client).node_object(usage={"cpuPercent": 1.0})
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "n1" and labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"] == U.arch() and labels["zone"] == "a"
    assert labels["shepherd.io/runtime"] == "hollow"
    assert node["spec"] == {"unschedulable": False}
    st = node["status"]
    assert st["capacity"] == {"cpu": "2", "memory": "4194304Ki", "pods": "110"}
    assert st["allocatable"] == {"cpu": "1900m", "memory": "3932160Ki", "pods": "110"}
    assert {"type": "InternalIP", "address": "10.0.0.7"} in st["addresses"]
    assert any(a["type"] == "Hostname" for a in st["addresses"])
    assert st["nodeInfo"]["containerRuntimeVersion"] == "hollow://1"
    assert st["nodeInfo"]["kubeletVersion"].startswith("shepherd-agent/")
    assert st["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10250}}
    [ready] = st["conditions"]
    assert ready["type"] == "Ready" and ready["status"] == "True" and ready["reason"] == "AgentReady"
    assert st["usage"] == {"cpuPercent": 1.0}


def test_register_creates_or_merges_labels_then_posts_status(api):
    node_manager(api.client).register()
    assert sent(api.server) == [("POST", NODES), ("PATCH", NODE + "/status")]
    [posted] = bodies(api.server, "PATCH", NODE + "/status")
    stored = api.store.get_obj("nodes", "n1")
    for usage in (posted["status"]["usage"], stored["status"]["usage"]):
        for key in ("cpuPercent", "memoryUsedBytes", "memoryAvailableBytes", "diskUsedBytes", "diskTotalBytes",
                    "load1", "load5", "load15", "timestamp"):
            assert key in usage
    # registered already (an agent restart): the create is refused, the labels merged, the status posted
    api.store.put("nodes", {"metadata": {"name": "n1", "labels": {"set-by": "admin"}}, "spec": {}})
    del api.server.requests[:]
    nm = node_manager(api.client)
    nm.register()
    assert sent(api.server) == [("POST", NODES), ("PATCH", NODE), ("PATCH", NODE + "/status")]
    assert bodies(api.server, "PATCH", NODE) == [{"metadata": {"labels": nm.labels()}}]
    stored = api.store.get_obj("nodes", "n1")
    assert stored["metadata"]["labels"] == dict(nm.labels(), **{"set-by": "admin"})
    assert stored["status"]["conditions"][0]["reason"] == "AgentReady"


def test_lease_renewals_change_renew_time_and_create_a_missing_lease(api):
    nm = node_manager(api.client, lease_interval=5.0)
    nm.renew_lease()
    assert sent(api.server) == [("PATCH", LEASE), ("POST", LEASES)]
    lease = api.store.get_obj("leases", "n1", namespace=LEASE_NAMESPACE)
    assert lease["metadata"]["name"] == "n1" and lease["metadata"]["namespace"] == LEASE_NAMESPACE
    assert lease["spec"]["holderIdentity"] == "n1" and lease["spec"]["leaseDurationSeconds"] == 40
    for _ in range(3):
        nm.renew_lease()
    patched = [b["spec"]["renewTime"] for b in bodies(api.server, "PATCH", LEASE)[1:]]
    assert sent(api.server)[2:] == [("PATCH", LEASE)] * 3 and len(set(patched)) == 3
    assert all(t.endswith("Z") and len(t.split(".")[1]) == 7 for t in patched)
    assert api.store.get_obj("leases", "n1", namespace=LEASE_NAMESPACE)["spec"]["renewTime"] == patched[-1]


def test_ready_transition_time_is_kept(api):
    nm = node_manager(api.client)
    first = nm.status()["conditions"][0]
    nm.node = {"status": {"conditions": [dict(first, lastTransitionTime="EARLIER")]}}
    assert nm.status()["conditions"][0]["lastTransitionTime"] == "EARLIER"


def test_big_usage_changes():
    assert U.big_change(None, {})
    assert not U.big_change({"cpuPercent": 10, "memoryPercent": 50}, {"cpuPercent": 25, "memoryPercent": 60})
    assert U.big_change({"cpuPercent": 10, "memoryPercent": 50}, {"cpuPercent": 35, "memoryPercent": 50})
    assert U.big_change({"cpuPercent": 10, "memoryPercent": 50}, {"cpuPercent": 10, "memoryPercent": 75})


def test_formats():
    assert U.format_cpu(2000) == "2" and U.format_cpu(1900) == "1900m"
    assert U.format_memory(1 << 20) == "1024Ki"


def test_parser_is_argparse():
    assert isinstance(build_parser(), argparse.ArgumentParser)


def test_ready_false_while_the_runtime_fails(api):
    error = {"text": "Docker engine: connection refused"}
    nm = NodeManager(api.client, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(),
                     runtime_error=lambda: error["text"])
    cond = nm.status()["conditions"][0]
    assert cond["status"] == "False" and cond["reason"] == "ContainerRuntimeDown"
    assert "connection refused" in cond["message"]
    error["text"] = None
    assert nm.status()["conditions"][0]["status"] == "True"


def test_token_file_gives_the_bearer_token(tmp_path):
    token = tmp_path / "node-token"
    token.write_text("n" * 32 + "\n")
    base = ["--servers", "127.0.0.1:8001", "--node-name", "n1"]
    assert resolve(base).token is None
    assert resolve(base + ["--token-file", str(token)]).token == "n" * 32
    token.write_text("\n")
    with pytest.raises(config.ConfigError, match="is empty"):
        resolve(base + ["--token-file", str(token)])
    with pytest.raises(config.ConfigError, match="cannot read --token-file"):
        resolve(base + ["--token-file", str(tmp_path / "missing")])


def test_a_token_table_is_not_a_token(tmp_path):
    table = tmp_path / "tokens.csv"
    table.write_text("%s,admin,admin,system:masters\n%s,node,node,system:nodes\n" % ("a" * 32, "n" * 32))
    with pytest.raises(config.ConfigError, match="must hold one token"):
        resolve(["--servers", "127.0.0.1:8001", "--node-name", "n1", "--token-file", str(table)])


class SteadyUsage(U.UsageSampler):
    """The host's usage with cpu and memory held still: the machine's cpu % sampled every
    0.02 s jumps by 20 points at random, and each jump is a status post of its own."""

    def sample(self):
        return dict(super().sample(), cpuPercent=5.0, memoryPercent=50.0)


def _run_loops(client, what, until, timeout=15.0):
    """Run the lease and status loops (renewals every 0.02 s, a post every 0.3 s) until
    until() holds (at most `timeout` seconds)."""
    stop = threading.Event()
    nm = NodeManager(client, HollowRuntime("n1"), "n1", "10.0.0.7", stop, cpu_millicores=2000,
                     memory_bytes=4 << 30, lease_interval=0.02, status_interval=0.3)
    nm.sampler = SteadyUsage()
    nm.start()
    try:
        wait_for(what, until, timeout)
    finally:
        stop.set()
        nm.join(5)
    assert not any(t.is_alive() for t in nm._threads)
    return nm


def test_the_node_is_read_before_each_status_post_not_after_each_renewal(api):
    # 1,000 agents reading their Node after every 5 s renewal were as many requests as the
    # renewals themselves (docs/benchmarks.md, run O).
    def posts():
        return [i for i, k in enumerate(sent(api.server)) if k == ("PATCH", NODE + "/status")]
    _run_loops(api.client, "registration's post and two more", lambda: len(posts()) >= 3)
    kinds = sent(api.server)
    renewals = kinds.count(("PATCH", LEASE))
    gets = kinds.count(("GET", NODE))
    assert renewals >= 10 and len(posts()) >= 3, kinds
    assert gets <= len(posts()) + 1 < renewals, (gets, len(posts()), renewals)
    # every post after registration's first reads the Node since the post before (the lease
    # thread's renewals may come in between)
    assert all(("GET", NODE) in kinds[before + 1:i] for before, i in zip(posts(), posts()[1:])), kinds


def test_a_node_deleted_meanwhile_is_registered_again_at_the_next_post(api):
    removed = []

    def delete_before_the_first_read(request):     # someone deletes the Node just as the agent reads it
        if (request["method"], request["path"]) == ("GET", NODE) and not removed:
            removed.append(api.store.remove("nodes", "n1"))
    api.server.hooks.append(delete_before_the_first_read)
    watched = (("GET", NODE), ("POST", NODES), ("PATCH", NODE + "/status"))

    def registered_again():
        node, kinds = api.store.get_obj("nodes", "n1"), sent(api.server, *watched)
        return removed and node is not None and node["metadata"]["uid"] != removed[0]["metadata"]["uid"] \
            and ("PATCH", NODE + "/status") in kinds[kinds.index(("GET", NODE)):]
    _run_loops(api.client, "the Node deleted and registered again", registered_again)
    kinds = sent(api.server, *watched)
    first_read = kinds.index(("GET", NODE))              # the first post's read finds it gone
    assert kinds[:first_read] == [("POST", NODES), ("PATCH", NODE + "/status")], kinds
    assert kinds[first_read + 1:first_read + 3] == [("POST", NODES), ("PATCH", NODE + "/status")], kinds
    assert api.store.get_obj("nodes", "n1")["metadata"]["labels"]["kubernetes.io/hostname"] == "n1"


def test_agents_spread_over_the_servers_by_node_name(replicas):
    """Every agent is given the same --servers; each starts on the one its node name picks.
    The names are chosen so that each replica is some agent's home: twelve fixed names
    missed one of three randomly ported replicas in about 2 % of runs (CI, session 28)."""
    from agent.main import Agent
    urls = [replicas().url for _ in range(3)]
    homes = {}
    for n in range(200):
        homes.setdefault(spread_order(urls, "node-%d" % n)[0], "node-%d" % n)
    assert len(homes) == 3, homes
    seen = {}
    for index, name in homes.items():
        agent = Agent(resolve(["--servers", ",".join(urls), "--node-name", name, "--runtime", "hollow"]))
        try:
            agent.client.version()
            seen[name] = agent.client.last_server
        finally:
            agent.client.close()
    assert seen == {name: urls[index] for index, name in homes.items()}
