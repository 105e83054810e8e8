"""Real kubectl (1.32, on PATH) against a `shepherd-ha local up` cluster (3 replicas, HTTPS
from the cluster CA, bearer tokens) through the DIR/kubeconfig it wrote (kubectl_kit.py):
discovery, version, cluster-info, get with server-side Tables (-o wide|yaml|json|jsonpath,
-l, -A, --field-selector), get -w, describe with events, wait, delete, a user with only
`view` refused with kubectl's Forbidden message. Assertions are on kubectl's output and
on what the server then holds.
"""
import json
import queue
import re
import subprocess
import threading
import time

import kubernetes
import pytest
import yaml

from agent.node_info import node_info

from .helpers import expect, unique
from .kubectl_kit import kubeconfig_user

NS = "kubectl-read"


@pytest.fixture(scope="module")
def kubectl(kube):
    for name in (NS, "kubectl-other"):
        kube.ensure_namespace(name)
    return kube.kubectl_for(NS)


def rows(text):
    """kubectl's table output as dicts per row, split on runs of 2+ spaces."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = re.split(r"\s{2,}", lines[0].strip())
    return header, [dict(zip(header, re.split(r"\s{2,}", line.strip()))) for line in lines[1:]]


def merge_patch(kube, path, body):
    return expect(kube.api("PATCH", path, data=json.dumps(body),
                           headers={"Content-Type": "application/merge-patch+json"}), 200)


def post(kube, path, body):
    return expect(kube.api("POST", path, json=body), 201)


@pytest.fixture(scope="module")
def objects(kube, kubectl):
    """A node (its lease kept moving, as by an agent), pods (one Running on it), a deployment,
    a service, a config map and an event."""
    recent = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 60))
    node = unique("kn")
    post(kube, "/api/v1/nodes", {
        "metadata": {"name": node, "labels": {"node-role.kubernetes.io/worker": ""}}})
    lease = kube.keep_node_alive(node)
    merge_patch(kube, "/api/v1/nodes/%s/status" % node, {"status": {
        "addresses": [{"type": "InternalIP", "address": "10.9.0.7"}, {"type": "Hostname", "address": node}],
        # what an agent reports (agent/node_info.py), with a few values pinned for the assertions
        "nodeInfo": dict(node_info("docker://24.0.7", "shepherd-agent/test"),
                         osImage="Debian GNU/Linux 12 (bookworm)", kernelVersion="6.1.0-test"),
        "conditions": [{"type": "Ready", "status": "True", "reason": "AgentReady",
                        "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    pod = {"metadata": {"name": "web-1", "labels": {"app": "web", "tier": "front"}},
           "spec": {"nodeName": node, "containers": [{"name": "app", "image": "nginx:1.25"}]}}
    created = post(kube, "/api/v1/namespaces/%s/pods" % NS, pod)
    merge_patch(kube, "/api/v1/namespaces/%s/pods/web-1/status" % NS, {"status": {
        "phase": "Running", "podIP": "10.244.1.5",
        "containerStatuses": [{"name": "app", "image": "nginx:1.25", "imageID": "", "ready": True,
                               "restartCount": 0, "started": True,
                               "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}})
    post(kube, "/api/v1/namespaces/%s/pods" % NS, {
        "metadata": {"name": "batch-1", "labels": {"app": "batch"}},
        "spec": {"containers": [{"name": "job", "image": "busybox"}]}})
    post(kube, "/api/v1/namespaces/kubectl-other/pods", {
        "metadata": {"name": "elsewhere", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "app", "image": "nginx"}]}})
    post(kube, "/apis/apps/v1/namespaces/%s/deployments" % NS, {
        "metadata": {"name": "api"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}},
                              "spec": {"containers": [{"name": "srv", "image": "shepherd/api:2"}]}}}})
    post(kube, "/api/v1/namespaces/%s/services" % NS, {
        "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})
    post(kube, "/api/v1/namespaces/%s/configmaps" % NS, {
        "metadata": {"name": "settings"}, "data": {"a": "1", "b": "2", "c": "3"}})
    post(kube, "/api/v1/namespaces/%s/events" % NS, {
        "metadata": {"name": "web-1.manual"}, "type": "Warning", "reason": "ProbeWobble",
        "message": "readiness probe wobbled on purpose", "count": 1, "source": {"component": "kubectl-test"},
        "involvedObject": {"kind": "Pod", "namespace": NS, "name": "web-1", "uid": created["metadata"]["uid"],
                           "apiVersion": "v1"},
        # recent: the event pruner drops old events
        "firstTimestamp": recent, "lastTimestamp": recent})
    yield {"kube": kube, "node": node}
    lease.stop()


def test_version_api_versions_api_resources_and_cluster_info(kubectl, kube):
    version = json.loads(kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.32.0-shepherd.")
    assert version["serverVersion"]["major"] == "1" and version["serverVersion"]["minor"] == "32"
    assert "Server Version: v1.32.0-shepherd." in kubectl("version").stdout
    assert kubectl("api-versions").stdout.split() == ["apps/v1", "coordination.k8s.io/v1", "metrics.k8s.io/v1beta1",
                                                         "rbac.authorization.k8s.io/v1", "v1"]
    header, resources = rows(kubectl("api-resources", "-o", "wide").stdout)
    assert header[:5] == ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    # metrics.k8s.io's nodes and pods (NodeMetrics, PodMetrics: verbs get list) are checked apart
    by_name = {r["NAME"]: r for r in resources if not {"NodeMetrics", "PodMetrics"} & set(r.values())}
    # (their SHORTNAMES cell is empty, which shifts the split columns: checked by name)
    assert kubectl("api-resources", "--api-group=metrics.k8s.io", "-o", "name").stdout.split() == [
        "nodes.metrics.k8s.io", "pods.metrics.k8s.io"]
    assert "pods.metrics.k8s.io" in kubectl("api-resources", "--namespaced=true", "--verbs=list", "-o",
                                            "name").stdout.split()
    assert set(by_name) == {"configmaps", "endpoints", "events", "namespaces", "nodes", "pods", "services",
                            "secrets", "controllerrevisions", "deployments", "replicasets", "leases", "roles",
                            "clusterroles", "rolebindings", "clusterrolebindings"}
    assert by_name["replicasets"]["SHORTNAMES"] == "rs" and by_name["replicasets"]["CATEGORIES"] == "all"
    assert [by_name["pods"][k] for k in ("SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND")] == \
        ["po", "v1", "true", "Pod"]
    assert by_name["pods"]["CATEGORIES"] == "all"
    assert by_name["deployments"]["SHORTNAMES"] == "deploy" and by_name["deployments"]["APIVERSION"] == "apps/v1"
    assert by_name["nodes"]["NAMESPACED"] == "false"
    assert kubectl("api-resources", "--namespaced=false", "-o", "name").stdout.split() == [
        "namespaces", "nodes", "nodes.metrics.k8s.io", "clusterrolebindings.rbac.authorization.k8s.io",
        "clusterroles.rbac.authorization.k8s.io"]
    info = kubectl("cluster-info").stdout
    assert "Kubernetes control plane is running at %s" % kube.url in info


def test_kubectl_uses_the_kubeconfig_local_up_wrote_https_with_the_admin_token(kube, kubectl):
    server, token, ca_inline = kubeconfig_user(kube.kubeconfig)
    assert server == kube.url and server.startswith("https://") and ca_inline
    assert token == kube.lc.token() and token
    assert kubectl("config", "view", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}").stdout == server
    # the token is what lets it in: the same kubeconfig with a wrong token is refused
    refused = kubectl("get", "pods", token="not-a-token", check=False)
    assert refused.returncode != 0 and "You must be logged in to the server" in refused.stderr, refused.stderr


def test_get_pods_prints_kubernetes_columns_and_wide_ones(kubectl, objects):
    header, pods = rows(kubectl("get", "pods").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    by_name = {p["NAME"]: p for p in pods}
    assert set(by_name) == {"web-1", "batch-1"}
    assert (by_name["web-1"]["READY"], by_name["web-1"]["STATUS"], by_name["web-1"]["RESTARTS"]) == \
        ("1/1", "Running", "0")
    assert (by_name["batch-1"]["READY"], by_name["batch-1"]["STATUS"]) == ("0/1", "Pending")
    header, pods = rows(kubectl("get", "pods", "-o", "wide").stdout)
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE",
                      "READINESS GATES"]
    web = [p for p in pods if p["NAME"] == "web-1"][0]
    assert web["IP"] == "10.244.1.5" and web["NODE"] == objects["node"]
    header, pods = rows(kubectl("get", "po", "-l", "app=web").stdout)
    assert [p["NAME"] for p in pods] == ["web-1"]
    header, pods = rows(kubectl("get", "pods", "-A", "-l", "app=web").stdout)
    assert header[:2] == ["NAMESPACE", "NAME"]
    assert sorted((p["NAMESPACE"], p["NAME"]) for p in pods) == [("kubectl-other", "elsewhere"), (NS, "web-1")]
    header, pods = rows(kubectl("get", "pods", "--field-selector", "status.phase=Running").stdout)
    assert [p["NAME"] for p in pods] == ["web-1"]
    header, pods = rows(kubectl("get", "pods", "--show-labels").stdout)
    assert [p["LABELS"] for p in pods if p["NAME"] == "web-1"] == ["app=web,tier=front"]


def test_output_formats(kubectl, objects):
    listed = json.loads(kubectl("get", "pods", "-o", "json").stdout)
    assert listed["kind"] == "List" and sorted(i["metadata"]["name"] for i in listed["items"]) == ["batch-1", "web-1"]
    assert all(i["kind"] == "Pod" and i["spec"]["containers"] for i in listed["items"])
    pod = yaml.safe_load(kubectl("get", "pod", "web-1", "-o", "yaml").stdout)
    assert pod["kind"] == "Pod" and pod["status"]["podIP"] == "10.244.1.5"
    assert kubectl("get", "pod", "web-1", "-o", "jsonpath={.spec.nodeName}").stdout == objects["node"]
    names = kubectl("get", "pods", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}").stdout
    assert names.split() == ["batch-1", "web-1"]
    assert kubectl("get", "pods", "-o", "name").stdout.split() == ["pod/batch-1", "pod/web-1"]
    header, cols = rows(kubectl("get", "pod", "web-1", "-o", "custom-columns=N:.metadata.name,IP:.status.podIP").stdout)
    assert cols == [{"N": "web-1", "IP": "10.244.1.5"}]
    # --sort-by asks for whole objects in the rows (includeObject=Object): container "app" before "job"
    header, by_container = rows(kubectl("get", "pods", "--sort-by=.spec.containers[0].name").stdout)
    assert [p["NAME"] for p in by_container] == ["web-1", "batch-1"]
    header, one = rows(kubectl("get", "pod", "web-1").stdout)          # one object: a one-row Table
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"] and one[0]["STATUS"] == "Running"
    mixed = kubectl("get", "deploy/api", "svc/web").stdout
    assert re.search(r"^deployment\.apps/api\s+0/0\s+0\s+0\s", mixed, re.M)
    assert re.search(r"^service/web\s+ClusterIP\s", mixed, re.M)


def test_get_other_kinds_with_their_columns(kubectl, objects):
    header, deploys = rows(kubectl("get", "deploy", "-o", "wide").stdout)
    assert header == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    api = [d for d in deploys if d["NAME"] == "api"][0]
    assert (api["READY"], api["CONTAINERS"], api["IMAGES"], api["SELECTOR"]) == \
        ("0/0", "srv", "shepherd/api:2", "app=api")
    header, services = rows(kubectl("get", "svc").stdout)
    assert header == ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]
    web = [s for s in services if s["NAME"] == "web"][0]
    assert web["TYPE"] == "ClusterIP" and web["PORT(S)"] == "80/TCP"
    header, nodes = rows(kubectl("get", "nodes", "-o", "wide").stdout)
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
                      "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    node = [n for n in nodes if n["NAME"] == objects["node"]][0]
    assert node["STATUS"] in ("Ready", "NotReady")     # no agent renews its lease: it may turn NotReady
    assert (node["ROLES"], node["VERSION"], node["INTERNAL-IP"], node["OS-IMAGE"], node["KERNEL-VERSION"],
            node["CONTAINER-RUNTIME"]) == ("worker", "shepherd-agent/test", "10.9.0.7",
                                           "Debian GNU/Linux 12 (bookworm)", "6.1.0-test", "docker://24.0.7")
    header, namespaces = rows(kubectl("get", "ns").stdout)
    assert header == ["NAME", "STATUS", "AGE"]
    assert {"name": NS, "status": "Active"} in [{"name": n["NAME"], "status": n["STATUS"]} for n in namespaces]
    header, maps = rows(kubectl("get", "cm").stdout)
    assert header == ["NAME", "DATA", "AGE"] and [(m["NAME"], m["DATA"]) for m in maps] == [("settings", "3")]
    everything = kubectl("get", "all").stdout
    for name in ("pod/web-1", "pod/batch-1", "service/web", "deployment.apps/api"):
        assert name in everything
    header, events = rows(kubectl("get", "events", "--field-selector", "reason=ProbeWobble").stdout)
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert [(e["TYPE"], e["OBJECT"], e["MESSAGE"]) for e in events] == \
        [("Warning", "pod/web-1", "readiness probe wobbled on purpose")]


def test_describe_pod_shows_its_events(kubectl, objects):
    text = kubectl("describe", "pod", "web-1").stdout
    assert re.search(r"^Name:\s+web-1$", text, re.M) and re.search(r"^Node:\s+%s" % objects["node"], text, re.M)
    events = text[text.index("\nEvents:"):]
    assert re.search(r"Warning\s+ProbeWobble\s+\S+\s+kubectl-test\s+readiness probe wobbled on purpose", events)
    node = kubectl("describe", "node", objects["node"]).stdout
    assert re.search(r"^Roles:\s+worker$", node, re.M) and re.search(r"Kernel Version:\s+6.1.0-test", node)
    assert re.search(r"^\s+%s\s+web-1\s" % NS, node, re.M), node       # its non-terminated pods
    deploy = kubectl("describe", "deployment", "api").stdout
    assert re.search(r"^Replicas:\s+0 desired", deploy, re.M) and re.search(r"^Selector:\s+app=api$", deploy, re.M)
    svc = kubectl("describe", "svc", "web").stdout
    assert re.search(r"^Selector:\s+app=web$", svc, re.M) and re.search(r"^Port:\s+<unset>\s+80/TCP$", svc, re.M)


def test_get_watch_prints_a_change_as_a_row(kubectl, objects):
    proc = subprocess.Popen(kubectl.argv + ["get", "pods", "-w", "-l", "app=batch"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.rstrip("\n")) for line in proc.stdout], daemon=True).start()

    def next_line(timeout=30):
        try:
            return lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("kubectl get -w printed nothing in %ds: %s" % (timeout, proc.stderr.read()
                                                                               if proc.poll() is not None else ""))
    try:
        assert re.split(r"\s{2,}", next_line()) == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        assert re.split(r"\s{2,}", next_line())[:3] == ["batch-1", "0/1", "Pending"]
        time.sleep(1.0)         # the watch is open once the list is printed; give it a moment
        merge_patch(objects["kube"], "/api/v1/namespaces/%s/pods/batch-1/status" % NS, {"status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "job", "image": "busybox", "imageID": "", "ready": False,
                                   "restartCount": 0,
                                   "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]}})
        changed = re.split(r"\s{2,}", next_line())
        assert changed[:3] == ["batch-1", "0/1", "Error"], changed
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_the_official_python_client_reads_typed_nodes_and_pods_and_its_watch_has_no_none(objects):
    with objects["kube"].python_client() as api_client:
        core = kubernetes.client.CoreV1Api(api_client)
        nodes = {n.metadata.name: n for n in core.list_node().items}
        info = nodes[objects["node"]].status.node_info
        assert info.kernel_version == "6.1.0-test" and info.boot_id and info.kube_proxy_version == ""
        pods = core.list_namespaced_pod(NS)
        assert sorted(p.metadata.name for p in pods.items) == ["batch-1", "web-1"]
        events = list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=3))
        assert sorted((e["type"], e["object"].metadata.name) for e in events) == \
            [("ADDED", "batch-1"), ("ADDED", "web-1")]
        assert all(isinstance(e["object"], kubernetes.client.V1Pod) for e in events)
        # From the list's revision: nothing to send at first (the old server sent a bare
        # newline there, which this client yields as a None event), then one pod.
        late = threading.Timer(1.0, lambda: post(objects["kube"], "/api/v1/namespaces/%s/pods" % NS,
                                                 {"metadata": {"name": "late-1"},
                                                  "spec": {"containers": [{"name": "a", "image": "x"}]}}))
        late.start()
        try:
            events = list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=4,
                                                          resource_version=pods.metadata.resource_version))
        finally:
            late.join()
        assert None not in events and events[0]["type"] == "ADDED"
        assert {(e["type"], e["object"].metadata.name) for e in events[1:]} <= {("MODIFIED", "late-1")}  # bound
        # deserialize=False parses each line with json.loads: a bare newline killed it (ValueError)
        raw = list(kubernetes.watch.Watch().stream(core.list_namespaced_pod, NS, timeout_seconds=2,
                                                   resource_version=pods.metadata.resource_version,
                                                   deserialize=False))
        assert raw and all(isinstance(e, dict) and e["type"] in ("ADDED", "MODIFIED") for e in raw)
        apps = kubernetes.client.AppsV1Api(api_client)
        assert [d.metadata.name for d in apps.list_namespaced_deployment(NS).items] == ["api"]


def test_wait_for_a_condition_then_delete_by_name_and_by_label(kubectl, objects):
    kube = objects["kube"]
    for name in ("gone-1", "gone-2", "gone-3"):
        # never bound (no node matches): deleted at once, with no agent to wait for
        post(kube, "/api/v1/namespaces/%s/pods" % NS, {
            "metadata": {"name": name, "labels": {"app": "gone"}},
            "spec": {"nodeSelector": {"kubectl-test": "nowhere"},
                     "containers": [{"name": "a", "image": "nginx"}]}})
    waiter = subprocess.Popen(kubectl.argv + ["wait", "--for=condition=Ready", "pod/gone-1", "--timeout=30s"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        assert waiter.poll() is None, "kubectl wait returned before the pod was Ready: %s" % (waiter.communicate(),)
        merge_patch(kube, "/api/v1/namespaces/%s/pods/gone-1/status" % NS, {"status": {
            "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
        out, err = waiter.communicate(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait(5)
    assert waiter.returncode == 0 and out.strip() == "pod/gone-1 condition met", (out, err)
    assert kube.client.get("pods", "gone-1", NS)["status"]["phase"] == "Running"
    assert kubectl("delete", "pod", "gone-1").stdout.strip() == 'pod "gone-1" deleted'
    assert kube.api("GET", "/api/v1/namespaces/%s/pods/gone-1" % NS).status_code == 404
    # wait --for=delete: blocks while the pod is there, returns once it is gone
    deleted_waiter = subprocess.Popen(kubectl.argv + ["wait", "--for=delete", "pod/gone-2", "--timeout=30s"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        assert deleted_waiter.poll() is None, "kubectl wait --for=delete returned while the pod was there: %s" % (
            deleted_waiter.communicate(),)
        deleted = kubectl("delete", "pods", "-l", "app=gone").stdout.splitlines()
        out, err = deleted_waiter.communicate(timeout=30)
    finally:
        if deleted_waiter.poll() is None:
            deleted_waiter.kill()
            deleted_waiter.wait(5)
    assert deleted_waiter.returncode == 0 and out.strip() == "pod/gone-2 condition met", (out, err)
    assert sorted(deleted) == ['pod "gone-2" deleted', 'pod "gone-3" deleted']
    gone = kubectl("get", "pods", "-l", "app=gone")
    assert gone.stdout == "" and "No resources found in %s namespace." % NS in gone.stderr
    assert not kube.client.list("pods", NS, label_selector="app=gone")["items"]


def test_a_user_with_only_view_reads_and_is_forbidden_to_write(kubectl, objects):
    kube = objects["kube"]
    viewer = kube.add_user_token("viewer", ["shepherd:view"])
    _, pods = rows(kubectl("get", "pods", token=viewer).stdout)
    assert {p["NAME"] for p in pods} >= {"web-1", "batch-1"}
    refused = kubectl("delete", "pod", "web-1", token=viewer, check=False)
    assert refused.returncode == 1
    assert 'Error from server (Forbidden): pods "web-1" is forbidden: User "viewer" cannot delete resource ' \
        '"pods" in API group "" in the namespace "%s"' % NS in refused.stderr, refused.stderr
    refused = kubectl("create", "configmap", "by-viewer", "--from-literal=a=b", token=viewer, check=False)
    assert refused.returncode == 1 and 'User "viewer" cannot create resource "configmaps"' in refused.stderr, \
        refused.stderr
    refused = kubectl("get", "secrets", token=viewer, check=False)       # view does not read Secrets
    assert refused.returncode == 1 and 'User "viewer" cannot list resource "secrets"' in refused.stderr, \
        refused.stderr
    assert kube.client.get("pods", "web-1", NS)["metadata"].get("deletionTimestamp") is None
    assert kube.api("GET", "/api/v1/namespaces/%s/configmaps/by-viewer" % NS).status_code == 404


def test_a_node_and_a_pod_run_by_a_real_agent_read_by_kubectl_and_the_typed_client(kubectl, kube, objects):
    """Last in the module: a Ready node lets the scheduler bind the other tests' pods."""
    name = unique("agent")
    kube.add_hollow_agent(name, wait=False)
    try:
        post(kube, "/api/v1/namespaces/%s/pods" % NS, {
            "metadata": {"name": "on-agent", "labels": {"app": "on-agent"}},
            "spec": {"nodeName": name, "containers": [{"name": "app", "image": "registry.example/app:1"}]}})
        deadline = time.monotonic() + 60
        while True:
            nodes = kubectl("get", "nodes", name, "-o", "wide", check=False)
            pods = kubectl("get", "pods", "-l", "app=on-agent", check=False)
            if nodes.returncode == 0 and pods.returncode == 0 and rows(nodes.stdout)[1][0]["STATUS"] == "Ready" \
                    and rows(pods.stdout)[1][0]["STATUS"] == "Running":
                break
            assert time.monotonic() < deadline, "the agent's node or pod never got ready:\n%s%s%s\n%s" % (
                nodes.stdout, nodes.stderr, pods.stdout, open(kube.lc.agent_log(name)).read()[-3000:])
            time.sleep(1.0)
        node = rows(nodes.stdout)[1][0]
        assert node["VERSION"].startswith("shepherd-agent/") and node["CONTAINER-RUNTIME"] == "hollow://1"
        assert node["KERNEL-VERSION"] not in ("", "<unknown>") and node["OS-IMAGE"] not in ("", "<unknown>")
        assert rows(pods.stdout)[1][0]["READY"] == "1/1"
        with kube.python_client() as api_client:
            typed = kubernetes.client.CoreV1Api(api_client).read_node(name)
        info = typed.status.node_info
        assert info.boot_id and info.machine_id and info.system_uuid and info.os_image and info.kernel_version
        assert info.kube_proxy_version == "" and info.architecture and info.operating_system == "linux"
        assert {a.type for a in typed.status.addresses} == {"InternalIP", "Hostname"}
        assert typed.status.capacity["pods"] and typed.status.allocatable["cpu"]
        assert typed.status.daemon_endpoints.kubelet_endpoint.port > 0
        assert [c.status for c in typed.status.conditions if c.type == "Ready"] == ["True"]
    finally:
        kube.lc.stop_agent(name)
