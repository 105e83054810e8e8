"""PodMetrics (`kubectl top pods`): quantities, the agents' samples and cgroup reads, the
metrics grant, and the real API over an in-memory store asking real agent log servers
(hollow runtime) on loopback, one of them dead."""
import socket
import time

import pytest
import requests

from agent.labels import container_labels, sandbox_labels
from agent.log_access import LogAccess
from agent.log_server import LogServer
from agent.pod_usage import PodUsage
from agent.runtime import cgroup_usage
from agent.runtime.base import ContainerConfig, ContainerSummary
from agent.runtime.hollow_runtime import HollowRuntime
from shepherd_ha.api import pod_metrics
from shepherd_ha.api.app import create_app
from shepherd_ha.api.pod_metrics import cpu_quantity, go_duration, memory_quantity
from shepherd_ha.api.replica_credentials import ReplicaCredentials
from test_api_pod_logs import Served
from real_api import bearer, memory_replica, token_table

CREDS = ReplicaCredentials("correct-horse-battery-staple-42", "00" * 16)
OTHER = ReplicaCredentials("another-cluster-password-000042", "00" * 16)


# ---- Kubernetes quantities ----

def test_cpu_and_memory_in_kubernetes_quantities():
    assert [cpu_quantity(n) for n in (0, 3_000_000, 2_000_000_000, 250_000_000, 3_128_545, 2_000, -5)] == \
        ["0", "3m", "2", "250m", "3128545n", "2u", "0"]
    assert memory_quantity(12 * 1024 * 1024) == "12288Ki" and memory_quantity(4097) == "4Ki"
    assert [go_duration(s) for s in (10, 10.0034, 0.5, 65.5, 0)] == ["10s", "10.003s", "0.5s", "1m5.5s", "0s"]


# ---- the grant ----

@pytest.fixture
def access():
    return LogAccess([], "n1", "node-token", clock=lambda: 1000.0, monotonic=lambda: 5.0,
                     fetch_key=lambda: CREDS.log_grant_key)


def test_a_metrics_grant_opens_exactly_its_node_and_scope(access):
    pod_grant = CREDS.metrics_grant("n1", "default", "web", now=1000.0)
    assert access.may_read_metrics(pod_grant, "default", "web") is None
    assert "pod" in access.may_read_metrics(pod_grant, "default", "db"), "one pod's grant, another pod"
    assert "pod" in access.may_read_metrics(pod_grant, "default", ""), "one pod's grant, the whole namespace"
    assert "namespace" in access.may_read_metrics(CREDS.metrics_grant("n1", "default", now=1000.0), "kube-system")
    assert access.may_read_metrics(CREDS.metrics_grant("n1", now=1000.0)) is None, "all namespaces"
    assert "node" in access.may_read_metrics(CREDS.metrics_grant("n2", "default", "web", now=1000.0),
                                             "default", "web"), "another node's grant"
    assert "not signed" in access.may_read_metrics(OTHER.metrics_grant("n1", "default", "web", now=1000.0),
                                                   "default", "web")
    assert "expired" in access.may_read_metrics(CREDS.metrics_grant("n1", now=800.0))


def test_grants_do_not_cross_between_logs_and_metrics_and_tokens_open_nothing(access):
    log_grant = CREDS.log_grant("n1", "default", "web", "app", "u1", now=1000.0)
    assert access.may_read(log_grant, "default", "web", "app") is None
    assert "use" in access.may_read_metrics(log_grant, "default", "web")
    assert access.may_read(CREDS.metrics_grant("n1", "default", "web", now=1000.0), "default", "web", "app")
    for token in ("Bearer node-token", "Bearer " + CREDS.peer_token, ""):
        assert "no metrics grant" in access.may_read_metrics(token, "default", "web")


# ---- the agent's samples ----

class ScriptedRuntime:
    """list() and usage() from a script the test changes between passes."""

    def __init__(self):
        self.rows, self.readings = [], {}

    def list(self, labels):
        return [r for r in self.rows if all(r.labels.get(k) == v for k, v in labels.items())]

    def usage(self, cid):
        return self.readings.get(cid)


def pod(name, uid="u-web", ns="default"):
    return {"metadata": {"name": name, "namespace": ns, "uid": uid}}


def test_cpu_is_the_rate_between_two_samples_and_only_running_containers_of_this_node_count():
    rt, clock = ScriptedRuntime(), [100.0]
    usage = PodUsage(rt, "n1", clock=lambda: clock[0], monotonic=lambda: clock[0])
    web = pod("web", "u1")
    rt.rows = [ContainerSummary("c1", "x", container_labels("n1", web, "app", 0), "running", 1.0),
               ContainerSummary("c2", "x", container_labels("n1", web, "side", 0), "running", 1.0),
               ContainerSummary("s1", "x", sandbox_labels("n1", web, 0), "running", 1.0),
               ContainerSummary("o1", "x", container_labels("n2", pod("other"), "app", 0), "running", 1.0),
               ContainerSummary("e1", "x", container_labels("n1", pod("done"), "app", 0), "exited", 1.0)]
    rt.readings = {"c1": (5_000_000_000, 8192), "c2": (0, 4096), "s1": (0, 1), "o1": (0, 1), "e1": (0, 1)}
    usage.sample()
    assert usage.pods() == [], "one sample: no rate yet"
    clock[0] = 110.0
    rt.readings.update({"c1": (6_000_000_000, 12 << 20), "c2": (30_000_000, 8192)})
    usage.sample()
    assert usage.pods() == [{"namespace": "default", "name": "web", "uid": "u1", "timestamp": "1970-01-01T00:01:50Z",
                             "windowSeconds": 10.0, "containers": [
                                 {"name": "app", "cpuNanoCores": 100_000_000, "memoryWorkingSetBytes": 12 << 20},
                                 {"name": "side", "cpuNanoCores": 3_000_000, "memoryWorkingSetBytes": 8192}]}]
    assert usage.pods("kube-system") == [] and usage.pods("default", "db") == []
    clock[0] = 120.0
    rt.readings["c1"] = (10, 1)            # restarted in place: the counter went back
    rt.rows = rt.rows[:1] + rt.rows[2:]    # c2 is gone
    usage.sample()
    assert usage.pods() == [], "no rate from a counter that went back, nothing of a removed container"


def test_hollow_containers_use_nothing_and_say_so_with_a_real_window():
    rt, clock = HollowRuntime("n1"), [50.0]
    web = pod("web", "u1")
    cid = rt.create(ContainerConfig(name="a", image="img", labels=container_labels("n1", web, "app", 0)))
    rt.start(cid)
    usage = PodUsage(rt, "n1", clock=lambda: clock[0], monotonic=lambda: clock[0])
    usage.sample()
    clock[0] = 57.5
    usage.sample()
    [got] = usage.pods()
    assert got["windowSeconds"] == 7.5 and got["containers"] == [
        {"name": "app", "cpuNanoCores": 0, "memoryWorkingSetBytes": 0}]


def test_cgroup_v1_and_v2_reads(tmp_path):
    proc, root = tmp_path / "proc", tmp_path / "cg"
    (proc / "7").mkdir(parents=True)
    (proc / "7" / "cgroup").write_text("4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/docker/abc\n")
    (root / "cpu,cpuacct" / "docker" / "abc").mkdir(parents=True)
    (root / "memory" / "docker" / "abc").mkdir(parents=True)
    (root / "cpu,cpuacct" / "docker" / "abc" / "cpuacct.usage").write_text("2064452985\n")
    (root / "memory" / "docker" / "abc" / "memory.usage_in_bytes").write_text("589824\n")
    (root / "memory" / "docker" / "abc" / "memory.stat").write_text("cache 1\ntotal_inactive_file 81920\n")
    dirs = cgroup_usage.cgroup_dirs(7, root=str(root), proc=str(proc))
    assert cgroup_usage.read_usage(dirs) == (2064452985, 589824 - 81920)
    (proc / "8").mkdir()
    (proc / "8" / "cgroup").write_text("0::/system.slice/docker-abc.scope\n")
    v2 = root / "v2"
    (v2 / "system.slice" / "docker-abc.scope").mkdir(parents=True)
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    (v2 / "system.slice" / "docker-abc.scope" / "cpu.stat").write_text("usage_usec 1500\nuser_usec 1000\n")
    (v2 / "system.slice" / "docker-abc.scope" / "memory.current").write_text("100000\n")
    (v2 / "system.slice" / "docker-abc.scope" / "memory.stat").write_text("anon 5\ninactive_file 200000\n")
    dirs = cgroup_usage.cgroup_dirs(8, root=str(v2), proc=str(proc))
    assert cgroup_usage.read_usage(dirs) == (1_500_000, 0), "never below 0"
    with pytest.raises(cgroup_usage.CgroupUnreadable):
        cgroup_usage.cgroup_dirs(9, root=str(root), proc=str(proc))


# ---- the agent's endpoint ----

def test_the_agent_serves_usage_only_for_a_grant_of_its_scope(access):
    usage = PodUsage(HollowRuntime("n1"), "n1")
    app = LogServer(HollowRuntime("n1"), "n1", access=access, usage=usage).app.test_client()
    assert app.get("/stats/pods?namespace=default").status_code == 401
    node_token = {"Authorization": "Bearer node-token"}
    assert app.get("/stats/pods?namespace=default", headers=node_token).status_code == 403
    one = {"Authorization": CREDS.metrics_grant("n1", "default", "web", now=1000.0)}
    refused = app.get("/stats/pods?namespace=default&pod=db", headers=one)
    assert refused.status_code == 403 and "db" in refused.json["message"]
    assert app.get("/stats/pods?namespace=default&pod=web", headers=one).json == {"node": "n1", "pods": []}
    assert app.get("/stats/pods?pod=web", headers=one).status_code == 400
    assert app.get("/stats/pods?namespace=Not_A_Name", headers=one).status_code == 400


# ---- the API over real agents ----

class Agent:
    """A log server with a hollow runtime and sampled usage, as agent/main.py wires them."""

    def __init__(self, node, pods, keys):
        self.runtime = HollowRuntime(node)
        for p in pods:
            for c in p["spec"]["containers"]:
                cid = self.runtime.create(ContainerConfig(name=node + p["metadata"]["name"] + c["name"], image="i",
                                                          labels=container_labels(node, p, c["name"], 0)))
                self.runtime.start(cid)
        self.usage = PodUsage(self.runtime, node)
        self.usage.sample()
        time.sleep(0.05)
        self.usage.sample()
        access = LogAccess([], node, "t", fetch_key=lambda: keys)
        self.server = LogServer(self.runtime, node, access=access, usage=self.usage).start()

    def stop(self):
        self.server.stop()


def node_obj(name, port):
    return {"metadata": {"name": name}, "status": {
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": port}}}}


def pod_obj(name, node, ns="default", labels=None, containers=("app",), phase="Running"):
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"nodeName": node, "containers": [{"name": c, "image": "i"} for c in containers]},
            "status": {"phase": phase}}


@pytest.fixture
def world():
    replica = memory_replica(("default", "team"))
    stored = {}
    for p in (pod_obj("web", "n1", labels={"app": "web"}, containers=("app", "side")),
              pod_obj("db", "n1", labels={"app": "db"}), pod_obj("other", "n1", ns="team"),
              pod_obj("far", "n2"), pod_obj("hung", "n3"), pod_obj("old", "n1", phase="Succeeded")):
        stored[p["metadata"]["name"]] = replica.store.put("pods", p)
    agent = Agent("n1", [stored[n] for n in ("web", "db", "other")], [CREDS.log_grant_key])
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))          # bound, never listening: connections are refused
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(8)                       # accepts, never answers: the scrape's read timeout
    replica.store.put("nodes", node_obj("n1", agent.server.port))
    replica.store.put("nodes", node_obj("n2", dead.getsockname()[1]))
    replica.store.put("nodes", node_obj("n3", hung.getsockname()[1]))
    users = {"admin": ["system:masters"], "nobody": [], "system:node:n1": ["system:nodes"]}
    app = create_app(replica, tokens=token_table(users), log_grants=CREDS)
    served = Served(app)
    yield served.url
    served.stop()
    agent.stop()
    dead.close()
    hung.close()


def get(url, path, who="admin", **kw):
    return requests.get(url + "/apis/metrics.k8s.io/v1beta1" + path, headers=bearer(who, **kw.pop("headers", {})),
                        timeout=30, **kw)


def test_pod_metrics_of_a_namespace_with_a_dead_and_a_hung_node_left_out_and_named(world):
    started = time.monotonic()
    resp = get(world, "/namespaces/default/pods")
    took = time.monotonic() - started
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["kind"] == "PodMetricsList" and body["apiVersion"] == "metrics.k8s.io/v1beta1"
    by_name = {m["metadata"]["name"]: m for m in body["items"]}
    assert set(by_name) == {"web", "db"}, "team/other is another namespace; far and hung are on silent nodes"
    web = by_name["web"]
    assert web["kind"] == "PodMetrics" and web["metadata"]["namespace"] == "default"
    assert web["metadata"]["labels"] == {"app": "web"} and web["timestamp"].endswith("Z")
    assert web["window"].endswith("s") and web["window"] != "0s"
    assert web["containers"] == [{"name": "app", "usage": {"cpu": "0", "memory": "0Ki"}},
                                 {"name": "side", "usage": {"cpu": "0", "memory": "0Ki"}}], "hollow: nothing runs"
    warnings = resp.headers.get("Warning", "")
    assert "node n2" in warnings and "refused" in warnings and "node n3" in warnings, warnings
    assert took < pod_metrics.usage_scrape.DEADLINE_SECONDS + 3, "bounded by the scrape deadline"


def test_all_namespaces_label_selector_one_pod_and_a_table(world):
    everything = get(world, "/pods").json()["items"]
    assert {(m["metadata"]["namespace"], m["metadata"]["name"]) for m in everything} == \
        {("default", "web"), ("default", "db"), ("team", "other")}
    selected = get(world, "/namespaces/default/pods", params={"labelSelector": "app=db"}).json()["items"]
    assert [m["metadata"]["name"] for m in selected] == ["db"]
    one = get(world, "/namespaces/default/pods/web")
    assert one.status_code == 200 and one.json()["kind"] == "PodMetrics" and one.json()["metadata"]["name"] == "web"
    down = get(world, "/namespaces/default/pods/far")
    assert down.status_code == 503 and "node n2" in down.json()["message"]
    assert get(world, "/namespaces/default/pods/nosuch").status_code == 404
    assert get(world, "/namespaces/default/pods", params={"labelSelector": "a in (("}).status_code == 400
    table = get(world, "/namespaces/default/pods", params={"labelSelector": "app"},
                headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"}).json()
    assert table["kind"] == "Table" and [c["name"] for c in table["columnDefinitions"]] == \
        ["Name", "CPU", "Memory", "Window"]
    assert sorted(r["cells"][:3] for r in table["rows"]) == [["db", "0m", "0Mi"], ["web", "0m", "0Mi"]]


def test_rbac_and_node_identity_decide_who_reads_pod_metrics(world):
    denied = get(world, "/namespaces/default/pods", who="nobody")
    assert denied.status_code == 403 and 'resource "pods" in API group "metrics.k8s.io"' in denied.json()["message"]
    # A node's own token reads no pod metrics, not even of its own pods (RBAC gives nodes none).
    assert get(world, "/namespaces/default/pods", who="system:node:n1").status_code == 403
    assert get(world, "/namespaces/default/pods/web", who="system:node:n1").status_code == 403


class _ScriptedAgent:
    """A loopback HTTP server answering /stats/pods with `handle(request_handler)`."""

    def __init__(self, handle):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                handle(self)

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.node = node_obj("n1", self.server.server_address[1])

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def test_an_agent_trickling_its_answer_is_cut_off_at_the_deadline(monkeypatch):
    """The read timeout bounds each wait for a byte, not the answer: an agent sending a
    byte every 0.2 s must not hold the scrape's thread past its deadline."""
    monkeypatch.setattr(pod_metrics.usage_scrape, "DEADLINE_SECONDS", 1.0)

    def trickle(handler):
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        try:
            for _ in range(100):                      # at most 20 s, ends when the client goes
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass
    agent = _ScriptedAgent(trickle)
    try:
        started = time.monotonic()
        with pytest.raises(pod_metrics.usage_scrape.NodeFailed, match="did not finish its answer"):
            pod_metrics.usage_scrape.scrape_node(agent.node, "default", None, "r1")
        assert time.monotonic() - started < 4.0
    finally:
        agent.stop()


def test_odd_answers_from_an_agent_are_left_out_and_the_rest_is_shown():
    """Infinity, 1e308, a list for a name, a number for containers: each pod with such an
    answer is left out (they raised OverflowError/TypeError: a 500 for the whole listing)."""
    good = {"namespace": "default", "name": "web", "uid": "u1", "timestamp": "2026-12-02T00:00:00Z",
            "windowSeconds": 10.0, "containers": [{"name": "app", "cpuNanoCores": 5, "memoryWorkingSetBytes": 4096}]}
    odd = [dict(good, name="w1", windowSeconds=1e308), dict(good, name="w2", containers=5),
           dict(good, name="w3", containers=[{"name": ["x"], "cpuNanoCores": 1, "memoryWorkingSetBytes": 1}]),
           dict(good, name="w4", containers=[{"name": "app", "cpuNanoCores": float("inf"),
                                              "memoryWorkingSetBytes": 1}]),
           dict(good, name=["w5"]), "not a pod"]
    import json as _json
    body = _json.dumps({"node": "n1", "pods": [good] + odd}).encode()   # Infinity, as Python writes it

    def answer(handler):
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)
    agent = _ScriptedAgent(answer)
    try:
        pods = pod_metrics.usage_scrape.scrape_node(agent.node, "default", None, "r1")
    finally:
        agent.stop()
    assert [p["name"] for p in pods] == ["web"]
    shown = pod_metrics.pod_metrics(pod_obj("web", "n1"), pods[0])
    assert shown["containers"] == [{"name": "app", "usage": {"cpu": "5n", "memory": "4Ki"}}]


def test_sheepctl_top_pods_as_kubectl_prints_it(world, capsys, ctl_isolated):
    from ctl.main import main
    from real_api import token_for

    def top(*argv):
        capsys.readouterr()
        rc = main(["--server", world, "--token", token_for("admin"), "top", "pods"] + list(argv))
        cap = capsys.readouterr()
        return rc, [line.split() for line in cap.out.strip().splitlines()], cap.err
    rc, rows, err = top("-l", "app")             # the hung and the dead node's pods are not selected
    assert rc == 0, err
    assert rows == [["NAME", "CPU(cores)", "MEMORY(bytes)"], ["db", "0m", "0Mi"], ["web", "0m", "0Mi"]]
    rc, rows, _ = top("web", "--containers")
    assert rows == [["POD", "NAME", "CPU(cores)", "MEMORY(bytes)"], ["web", "app", "0m", "0Mi"],
                    ["web", "side", "0m", "0Mi"]]
    rc, rows, _ = top("-A", "-l", "app!=nothing")
    assert [r[:2] for r in rows] == [["NAMESPACE", "NAME"], ["default", "db"], ["default", "web"], ["team", "other"]]
    rc, _, err = top("-n", "team", "-l", "app=none")
    assert rc == 0 and err.strip() == "No resources found in team namespace."
    rc, _, err = top("web", "-A")
    assert rc == 1 and "give -n NAMESPACE" in err
    rc, _, err = top("--sort-by", "disk")
    assert rc == 1 and "sorts by cpu or memory" in err


def test_top_pods_rows_sum_a_pods_containers_and_sort():
    from ctl.commands.top import pod_rows
    items = [{"metadata": {"namespace": "a", "name": "p1"},
              "containers": [{"name": "x", "usage": {"cpu": "250000000n", "memory": "10240Ki"}},
                             {"name": "y", "usage": {"cpu": "5m", "memory": "2Mi"}}]},
             {"metadata": {"namespace": "a", "name": "p2"},
              "containers": [{"name": "z", "usage": {"cpu": "1", "memory": "nonsense"}}]}]
    headers, rows = pod_rows(items)
    assert headers == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    assert rows == [["p1", "255m", "12Mi"], ["p2", "1000m", "<unknown>"]]
    _, rows = pod_rows([{"metadata": {"name": "tiny"}, "containers": [{"usage": {"cpu": "500000n", "memory": "0"}}]}])
    assert rows == [["tiny", "1m", "0Mi"]]          # rounded up, as kubectl prints it
    _, rows = pod_rows(items, sort_by="cpu")
    assert [r[0] for r in rows] == ["p2", "p1"]
    _, rows = pod_rows(items, containers=True, all_namespaces=True)
    assert rows[0] == ["a", "p1", "x", "250m", "10Mi"] and rows[2] == ["a", "p2", "z", "1000m", "<unknown>"]
