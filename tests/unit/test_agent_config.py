"""shepherd-agent options (flag > env > file > default), the Node and lease objects."""
import argparse
import threading
import time

import pytest

from agent import config
from agent import usage as U
from agent.main import build_parser
from agent.node import LEASE_NAMESPACE, NodeManager
from agent.runtime.hollow_runtime import HollowRuntime
from shepherd_ha.client import ApiError
from shepherd_ha.client.http_client import spread_order


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

class RecordingClient:
    def __init__(self, exists=False, lease_exists=True):
        self.calls = []
        self.exists = exists
        self.lease_exists = lease_exists

    def create(self, resource, obj, namespace=None):
        self.calls.append(("create", resource, obj))
        if resource == "nodes" and self.exists:
            raise ApiError({"code": 409, "reason": "AlreadyExists", "message": "exists"})
        if resource == "leases":
            self.lease_exists = True
        return obj

    def patch(self, resource, name, body, namespace=None, subresource=None):
        self.calls.append(("patch", resource, body, namespace, subresource))
        if resource == "leases" and not self.lease_exists:
            raise ApiError({"code": 404, "reason": "NotFound", "message": "no lease"})
        return {"metadata": {"name": name}, **body}


def node_manager(client, **kw):
    return NodeManager(client, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(), port=10250,
                       cpu_millicores=2000, memory_bytes=4 << 30, labels={"zone": "a"}, **kw)


def test_node_object():
    node = node_manager(RecordingClient()).node_object(usage={"cpuPercent": 1.0})
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


def test_register_creates_or_merges_labels_then_posts_status():
    client = RecordingClient()
    node_manager(client).register()
    assert [c[:2] for c in client.calls] == [("create", "nodes"), ("patch", "nodes")]
    assert client.calls[1][4] == "status"
    usage = client.calls[1][2]["status"]["usage"]
    for key in ("cpuPercent", "memoryUsedBytes", "memoryAvailableBytes", "diskUsedBytes", "diskTotalBytes",
                "load1", "load5", "load15", "timestamp"):
        assert key in usage
    client = RecordingClient(exists=True)
    node_manager(client).register()
    assert [c[:2] for c in client.calls] == [("create", "nodes"), ("patch", "nodes"), ("patch", "nodes")]
    assert client.calls[1][2] == {"metadata": {"labels": node_manager(client).labels()}}


def test_lease_renewals_change_renew_time_and_create_a_missing_lease():
    client = RecordingClient(lease_exists=False)
    nm = node_manager(client, lease_interval=5.0)
    nm.renew_lease()
    assert [c[:2] for c in client.calls] == [("patch", "leases"), ("create", "leases")]
    lease = client.calls[1][2]
    assert lease["metadata"] == {"name": "n1", "namespace": LEASE_NAMESPACE}
    assert lease["spec"]["holderIdentity"] == "n1" and lease["spec"]["leaseDurationSeconds"] == 40
    times = set()
    for _ in range(3):
        nm.renew_lease()
        times.add(client.calls[-1][2]["spec"]["renewTime"])
    assert len(times) == 3
    assert all(t.endswith("Z") and len(t.split(".")[1]) == 7 for t in times)


def test_ready_transition_time_is_kept():
    nm = node_manager(RecordingClient())
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


def test_ready_false_while_the_runtime_fails():
    error = {"text": "Docker engine: connection refused"}
    nm = NodeManager(RecordingClient(), HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(),
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


class NodeReadingClient(RecordingClient):
    """Registered already; counts reads of the Node, which may be deleted meanwhile."""

    def __init__(self):
        super().__init__(exists=True)
        self.deleted = False

    def get(self, resource, name, namespace=None, consistent=True):
        self.calls.append(("get", resource, name))
        if self.deleted:
            self.deleted = False         # registering again brings it back
            raise ApiError({"code": 404, "reason": "NotFound", "message": "no node"})
        return {"metadata": {"name": name}, "status": {"conditions": []}}


def _run_loops(client, seconds):
    stop = threading.Event()
    nm = NodeManager(client, HollowRuntime("n1"), "n1", "10.0.0.7", stop, cpu_millicores=2000,
                     memory_bytes=4 << 30, lease_interval=0.02, status_interval=0.3)
    nm.start()
    time.sleep(seconds)
    stop.set()
    nm.join(5)
    return nm


def test_the_node_is_read_before_each_status_post_not_after_each_renewal():
    # 1,000 agents reading their Node after every 5 s renewal were as many requests as the
    # renewals themselves (docs/benchmarks.md, run O).
    client = NodeReadingClient()
    _run_loops(client, 1.0)
    kinds = [(c[0], c[1]) + ((c[4],) if c[0] == "patch" else ()) for c in client.calls]
    renewals = kinds.count(("patch", "leases", None))
    gets = kinds.count(("get", "nodes"))
    posts = [i for i, k in enumerate(kinds) if k == ("patch", "nodes", "status")]
    assert renewals >= 10 and len(posts) >= 2, kinds
    assert gets <= len(posts) + 1 < renewals, (gets, len(posts), renewals)
    # every post after registration's first reads the Node since the post before (the lease
    # thread's renewals may come in between)
    assert all(("get", "nodes") in kinds[before + 1:i] for before, i in zip(posts, posts[1:])), kinds


def test_a_node_deleted_meanwhile_is_registered_again_at_the_next_post():
    client = NodeReadingClient()
    client.deleted = True
    _run_loops(client, 0.5)
    kinds = [(c[0], c[1]) for c in client.calls]
    first_read = kinds.index(("get", "nodes"))           # the first post's read finds it gone
    assert ("create", "nodes") in kinds[first_read:], kinds


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
