"""sheepctl end to end: ctl.main.main([...]) against the real API app over the in-memory
store (tests/unit/real_api.py) on 127.0.0.1."""
import io
import json
import sys
import threading
import time
from datetime import datetime, timedelta, timezone

import pytest
import yaml

from ctl.main import main
from real_api import free_port

from shepherd_ha.controllers.controller import Retry
from shepherd_ha.controllers.namespaces import NamespaceController
from shepherd_ha.store import commands


pytestmark = pytest.mark.usefixtures("ctl_isolated")      # conftest.py


def ago(**kw):
    return (datetime.now(timezone.utc) - timedelta(**kw)).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(out):
    """Rows of a printed table as lists of cells (split on 2+ spaces)."""
    import re
    return [re.split(r"\s{2,}", line.strip()) for line in out.strip().splitlines()]


def running_pod(name, namespace="default", node="n1", ip="10.0.0.5", restarts=0, ready=True):
    return {"metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"},
                         "creationTimestamp": ago(days=3)},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": node},
            "status": {"phase": "Running", "podIP": ip, "containerStatuses": [
                {"name": "c", "ready": ready, "restartCount": restarts, "state": {"running": {}}}]}}


# -- get ---------------------------------------------------------------------

def test_get_pods_table(ctl, store):
    store.put("pods", running_pod("web-1", restarts=3))
    store.put("pods", {"metadata": {"name": "web-2", "creationTimestamp": ago(minutes=30)},
                       "spec": {"containers": [{"name": "c"}, {"name": "d"}]},
                       "status": {"phase": "Pending", "containerStatuses": [
                           {"name": "c", "ready": True, "state": {"running": {}}},
                           {"name": "d", "ready": False,
                            "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}})
    store.put("pods", running_pod("elsewhere", namespace="other"))
    rc, out, err = ctl("get", "pods")
    assert rc == 0 and err == ""
    assert table(out) == [["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
                          ["web-1", "1/1", "Running", "3", "3d"],
                          ["web-2", "1/2", "CrashLoopBackOff", "0", "30m"]]


def test_get_wide_and_all_namespaces(ctl, store):
    store.put("pods", running_pod("a", node="n1", ip="10.0.0.1"))
    store.put("pods", running_pod("b", namespace="other", node="n2", ip="10.0.0.2"))
    rc, out, _ = ctl("get", "po", "-A", "-o", "wide")
    assert rc == 0
    rows = table(out)
    assert rows[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
    assert rows[1][:2] == ["default", "a"] and rows[1][-2:] == ["10.0.0.1", "n1"]
    assert rows[2][:2] == ["other", "b"] and rows[2][-2:] == ["10.0.0.2", "n2"]
    rc, out, _ = ctl("get", "pods", "-n", "other")
    assert [r[0] for r in table(out)] == ["NAME", "b"]


def test_get_empty_namespace_message(ctl):
    rc, out, err = ctl("get", "deploy")
    assert (rc, out, err) == (0, "", "No resources found in default namespace.\n")
    rc, out, err = ctl("get", "nodes")
    assert (rc, out, err) == (0, "", "No resources found\n")
    rc, out, err = ctl("get", "svc", "-n", "prod")
    assert err == "No resources found in prod namespace.\n"


def test_get_json_and_yaml(ctl, store):
    store.put("pods", running_pod("a"))
    store.put("pods", running_pod("b"))
    rc, out, _ = ctl("get", "pods", "-o", "json")
    doc = json.loads(out)
    assert doc["kind"] == "List" and [i["metadata"]["name"] for i in doc["items"]] == ["a", "b"]
    assert doc["items"][0]["kind"] == "Pod" and doc["items"][0]["apiVersion"] == "v1"
    rc, out, _ = ctl("get", "pod", "a", "-o", "json")
    assert json.loads(out)["kind"] == "Pod"
    rc, out, _ = ctl("get", "pods", "a", "b", "-o", "yaml")
    doc = yaml.safe_load(out)
    assert doc["kind"] == "List" and len(doc["items"]) == 2
    rc, out, _ = ctl("get", "pod/a", "-o", "yaml")
    doc = yaml.safe_load(out)
    assert doc["kind"] == "Pod" and doc["metadata"]["name"] == "a"
    assert out.startswith("apiVersion: v1\nkind: Pod\n")
    rc, out, err = ctl("get", "svc", "-o", "json")
    assert json.loads(out)["items"] == [] and err == ""


def test_get_name_output_and_selectors(ctl, store, server):
    store.put("pods", running_pod("a"))
    store.put("pods", dict(running_pod("b"), metadata={"name": "b", "labels": {"app": "db"}}))
    store.put("deployments", {"metadata": {"name": "web"}, "spec": {"replicas": 1}})
    rc, out, _ = ctl("get", "pods", "-l", "app=db", "-o", "name")
    assert out == "pod/b\n"
    assert server.requests[-1]["query"]["labelSelector"] == "app=db"
    rc, out, _ = ctl("get", "deploy", "-o", "name")
    assert out == "deployment.apps/web\n"
    ctl("get", "pods", "--field-selector", "spec.nodeName=n1")
    assert server.requests[-1]["query"]["fieldSelector"] == "spec.nodeName=n1"
    assert "resourceVersion" not in server.requests[-1]["query"]
    ctl("get", "pods", "--stale")
    assert server.requests[-1]["query"]["resourceVersion"] == "0"


def test_get_missing_name(ctl, store):
    store.put("pods", running_pod("a"))
    rc, out, err = ctl("get", "pods", "a", "nope")
    assert rc == 1
    assert err == 'Error from server (NotFound): pods "nope" in namespace default not found\n'
    assert table(out)[1][0] == "a"


def test_get_unknown_resource_type(ctl):
    rc, out, err = ctl("get", "widgets")
    assert rc == 1 and out == ""
    assert err.startswith('error: the server doesn\'t have a resource type "widgets"')


def test_get_other_kinds(ctl, store):
    store.put("deployments", {"metadata": {"name": "web", "creationTimestamp": ago(minutes=30)},
                              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                       "template": {"spec": {"containers": [
                                           {"name": "c", "image": "nginx:1"}]}}},
                              "status": {"readyReplicas": 2, "updatedReplicas": 3,
                                         "availableReplicas": 2}})
    svc = store.put("services", {"metadata": {"name": "web", "creationTimestamp": ago(days=3)},
                                 "spec": {"type": "NodePort", "selector": {"app": "web"},
                                          "ports": [{"port": 80, "nodePort": 30080},
                                                    {"port": 53, "protocol": "UDP"}]}})
    allocated = svc["spec"]["ports"][1]["nodePort"]   # the store gives every port of a NodePort one
    store.put("nodes", {"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/worker": ""},
                                     "creationTimestamp": ago(days=3)},
                        "spec": {"unschedulable": True},
                        "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                   "nodeInfo": {"agentVersion": "0.1.0"}}})
    store.put("nodes", {"metadata": {"name": "n2", "creationTimestamp": ago(days=3)},
                        "status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    store.put("namespaces", {"metadata": {"name": "prod", "creationTimestamp": ago(days=3)},
                             "status": {"phase": "Active"}})
    store.put("endpoints", {"metadata": {"name": "web", "creationTimestamp": ago(days=3)}, "subsets": [
        {"addresses": [{"ip": "10.0.0.%d" % i} for i in range(1, 6)], "ports": [{"port": 80}]}]})
    store.put("events", {"metadata": {"name": "e1"}, "type": "Warning", "reason": "BackOff",
                         "involvedObject": {"kind": "Pod", "name": "web-1"},
                         "message": "restarting failed container", "count": 4,
                         "firstTimestamp": ago(minutes=100), "lastTimestamp": ago(minutes=30)})

    assert table(ctl("get", "deploy")[1]) == [["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"],
                                              ["web", "2/3", "3", "2", "30m"]]
    assert table(ctl("get", "deploy", "-o", "wide")[1])[1][-3:] == ["c", "nginx:1", "app=web"]
    # kubectl's columns (test_kubectl_read checks kubectl's own against the same objects)
    assert table(ctl("get", "svc")[1]) == [["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"],
                                           ["web", "NodePort", svc["spec"]["clusterIP"], "<none>",
                                            "80:30080/TCP,53:%d/UDP" % allocated, "3d"]]
    assert table(ctl("get", "svc", "-o", "wide")[1])[1][-1] == "app=web"
    assert table(ctl("get", "no")[1]) == [["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
                                          ["n1", "Ready,SchedulingDisabled", "worker", "3d", "0.1.0"],
                                          ["n2", "NotReady", "<none>", "3d", "<unknown>"]]
    rows = table(ctl("get", "ns")[1])        # the cluster's own namespaces and prod
    assert rows[0] == ["NAME", "STATUS", "AGE"] and rows[-1] == ["prod", "Active", "3d"]
    assert [r[0] for r in rows[1:]] == ["default", "kube-node-lease", "kube-system", "prod"]
    assert table(ctl("get", "ep")[1])[1] == ["web", "10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 2 more...",
                                             "3d"]
    assert table(ctl("get", "events")[1]) == [
        ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        ["30m (x4 over 100m)", "Warning", "BackOff", "pod/web-1", "restarting failed container"]]


def test_get_several_types(ctl, store):
    rc, out, err = ctl("get", "deployments,services")
    assert (rc, out, err) == (0, "", "No resources found in default namespace.\n")
    store.put("deployments", {"metadata": {"name": "web"}, "spec": {"replicas": 1}})
    store.put("services", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    rc, out, err = ctl("get", "deploy,svc")
    first, second = out.split("\n\n")
    assert table(first)[0][0] == "NAME" and table(first)[1][0] == "deployment.apps/web"
    assert table(second)[0][1] == "TYPE" and table(second)[1][0] == "service/web"
    doc = json.loads(ctl("get", "deploy,svc", "-o", "json")[1])
    assert [i["kind"] for i in doc["items"]] == ["Deployment", "Service"]
    assert ctl("get", "deploy,svc", "web", "-o", "name")[1] == "deployment.apps/web\nservice/web\n"
    rc, out, err = ctl("get", "pod/x", "svc/web")
    assert rc == 1 and err == 'Error from server (NotFound): pods "x" in namespace default not found\n'
    assert table(out)[1][0] == "web"


def test_get_watch_prints_changes(server, store, monkeypatch, capsys):
    store.put("pods", running_pod("a"))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("rc", main(
        ["--server", server.url, "--retry-deadline", "0.3", "get", "pods", "-w"])), daemon=True)
    t.start()

    def wait_for(text):
        deadline = time.monotonic() + 5
        while text not in out.getvalue():
            assert time.monotonic() < deadline, out.getvalue()
            time.sleep(0.02)
    wait_for("a ")
    store.put("pods", running_pod("b"))
    wait_for("b ")
    pod = running_pod("b")
    pod["status"]["containerStatuses"][0]["state"] = {"waiting": {"reason": "ImagePullBackOff"}}
    store.put("pods", pod)
    wait_for("ImagePullBackOff")
    server.stop()  # the only replica dies: the watch ends with an error
    t.join(10)
    assert result["rc"] == 1
    rows = table(out.getvalue())
    assert rows[0][0] == "NAME" and [r[0] for r in rows[1:]] == ["a", "b", "b"]
    assert "no replica reachable" in capsys.readouterr().err


# -- describe ----------------------------------------------------------------

def test_describe_pod_with_events(ctl, store, server):
    store.put("pods", dict(running_pod("web-1", restarts=2),
                           metadata={"name": "web-1", "labels": {"app": "web"},
                                     "ownerReferences": [{"kind": "Deployment", "name": "web"}]}))
    store.put("pods", {"metadata": {"name": "conditions"}, "spec": {"containers": []},
                       "status": {"conditions": [{"type": "Ready", "status": "False",
                                                  "reason": "ContainersNotReady"}]}})
    store.put("events", {"metadata": {"name": "e1"}, "type": "Normal", "reason": "Scheduled",
                         "involvedObject": {"kind": "Pod", "name": "web-1"},
                         "source": {"component": "scheduler"},
                         "message": "assigned default/web-1 to n1", "lastTimestamp": ago(minutes=2)})
    store.put("events", {"metadata": {"name": "e2"}, "type": "Normal", "reason": "Other",
                         "involvedObject": {"kind": "Pod", "name": "someone-else"}, "message": "x"})
    rc, out, err = ctl("describe", "pod", "web-1")
    assert rc == 0, err
    assert "Name:           web-1" in out
    assert "Namespace:      default" in out
    assert "Labels:         app=web" in out
    assert "Node:           n1" in out
    assert "Controlled By:  Deployment/web" in out
    assert "Image:          nginx" in out and "Restart Count:  2" in out
    assert "Events:" in out and "Scheduled" in out and "assigned default/web-1 to n1" in out
    assert "scheduler" in out and "someone-else" not in out
    query = [r["query"] for r in server.requests if r["path"].endswith("/events")][-1]
    assert query["fieldSelector"] == "involvedObject.name=web-1,involvedObject.kind=Pod"

    rc, out, _ = ctl("describe", "po", "conditions")
    assert "ContainersNotReady" in out and "Events:         <none>" in out
    rc, out, err = ctl("describe", "pod", "ghost")
    assert rc == 1 and err == 'Error from server (NotFound): pods "ghost" in namespace default not found\n'


def test_describe_pod_shows_where_env_and_volumes_come_from_not_what_they_hold(ctl, store):
    container = {"name": "c", "image": "nginx",
                 "env": [{"name": "PLAIN", "value": "1"},
                         {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "web-sec", "key": "password"}}},
                         {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "hello",
                                                                                "optional": True}}},
                         {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
                 "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}, {"secretRef": {"name": "s2"}}],
                 "volumeMounts": [{"name": "conf", "mountPath": "/etc/app", "readOnly": True},
                                  {"name": "scratch", "mountPath": "/scratch", "subPath": "a"}]}
    store.put("pods", {"metadata": {"name": "mnt"}, "spec": {
        "containers": [container], "volumes": [{"name": "conf", "configMap": {"name": "cfg"}},
                                               {"name": "scratch", "emptyDir": {}},
                                               {"name": "pw", "secret": {"secretName": "web-sec"}}]}})
    rc, out, err = ctl("describe", "pod", "mnt")
    assert rc == 0, err
    for text in ("PLAIN=1", "PASS=<set to the key 'password' in secret 'web-sec'>",
                 "GREETING=<set to the key 'hello' of config map 'cfg'> (optional)", "ME=(v1:metadata.name)",
                 "cfg ConfigMap with prefix CFG_", "s2 Secret",
                 "/etc/app from conf (ro)", "/scratch from scratch (rw) subpath a",
                 "ConfigMap cfg", "EmptyDir", "Secret web-sec"):
        assert text in out, (text, out)


def test_describe_other_kinds(ctl, store):
    store.put("deployments", {"metadata": {"name": "web"},
                              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                                       "template": {"metadata": {"labels": {"app": "web"}},
                                                    "spec": {"containers": [
                                                        {"name": "c", "image": "nginx:1",
                                                         "resources": {"limits": {"cpu": "500m"}}}]}}},
                              "status": {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 2,
                                         "unavailableReplicas": 1}})
    store.put("nodes", {"metadata": {"name": "n1"}, "status": {
        "conditions": [{"type": "Ready", "status": "True"}],
        "addresses": [{"type": "InternalIP", "address": "192.168.1.10"}],
        "capacity": {"cpu": "4", "memory": "8Gi"}}})
    store.put("services", {"metadata": {"name": "web"}, "spec": {"selector": {"app": "web"},
                                                                   "ports": [{"port": 80,
                                                                              "targetPort": 8080}]}})
    out = ctl("describe", "deploy", "web")[1]
    assert "3 desired | 3 updated | 3 total | 2 available | 1 unavailable" in out
    assert "limits: cpu=500m" in out
    out = ctl("describe", "node", "n1")[1]
    assert "192.168.1.10" in out and "8Gi" in out and "Ready" in out
    # the agent's events name the node by name as uid (the kubelet's way), the control plane's by its uid
    store.put("events", {"metadata": {"name": "n1.proxy"}, "reason": "ServiceProxyStoodDown", "type": "Warning",
                         "message": "Service proxy stands down", "count": 1,
                         "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": "n1", "uid": "n1"}})
    store.put("events", {"metadata": {"name": "n1.other"}, "reason": "FromAnotherN1", "type": "Normal",
                         "message": "a node of that name before", "count": 1,
                         "involvedObject": {"kind": "Node", "apiVersion": "v1", "name": "n1", "uid": "old-uid"}})
    out = ctl("describe", "node", "n1")[1]
    assert "ServiceProxyStoodDown" in out and "FromAnotherN1" not in out
    out = ctl("describe", "svc", "web")[1]
    assert "TargetPort:     8080/TCP" in out
    store.put("namespaces", {"metadata": {"name": "team"}, "status": {"phase": "Terminating", "conditions": [
        {"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain",
         "message": "Some resources are remaining: pods has 2 resource instances"}]}})
    out = ctl("describe", "ns", "team")[1]
    assert "Terminating" in out and "SomeResourcesRemain" in out and "pods has 2 resource instances" in out
    assert "Conditions" not in ctl("describe", "ns", "default")[1]


# -- apply / create ----------------------------------------------------------

MANIFESTS = """\
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels: {app: web}
spec:
  containers:
  - name: c
    image: nginx:1.25
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: c
        image: nginx:1.25
        ports:
        - containerPort: 80
"""


def test_apply_created_unchanged_configured(ctl, store, tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text(MANIFESTS)
    rc, out, err = ctl("apply", "-f", path)
    assert (rc, err) == (0, "")
    assert out == "pod/web created\ndeployment.apps/web created\n"

    rc, out, _ = ctl("apply", "-f", path)
    assert out == "pod/web unchanged\ndeployment.apps/web unchanged\n"

    # someone else sets a label and the server defaults a field inside a list item:
    # neither is in the manifest, so apply still reports unchanged and keeps them
    dep = store.get_obj("deployments", "web")
    dep["metadata"]["labels"] = {"team": "a"}
    dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"
    store.put("deployments", dep)
    rc, out, _ = ctl("apply", "-f", path)
    assert out == "pod/web unchanged\ndeployment.apps/web unchanged\n"

    path.write_text(MANIFESTS.replace("replicas: 2", "replicas: 5"))
    rc, out, _ = ctl("apply", "-f", path)
    assert (rc, out) == (0, "pod/web unchanged\ndeployment.apps/web configured\n")
    live = store.get_obj("deployments", "web")
    assert live["spec"]["replicas"] == 5
    assert live["metadata"]["labels"] == {"team": "a"}       # kept
    assert live["metadata"]["generation"] == 2


def test_apply_conflict_message(ctl, store, server, tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text(MANIFESTS)
    ctl("apply", "-f", path)
    path.write_text(MANIFESTS.replace("replicas: 2", "replicas: 3"))

    def race(info):  # someone writes the deployment between our read and our write
        if info["method"] == "PUT" and "/deployments/" in info["path"]:
            server.hooks.clear()
            dep = store.get_obj("deployments", "web")
            dep["spec"]["replicas"] = 9
            store.put("deployments", dep)
    server.hooks.append(race)
    rc, out, err = ctl("apply", "-f", path)
    assert rc == 1
    assert out == "pod/web unchanged\n"
    assert err == "deployment web changed since you read it; re-run apply\n"
    assert store.get_obj("deployments", "web")["spec"]["replicas"] == 9
    rc, out, err = ctl("apply", "-f", path)
    assert (rc, out) == (0, "pod/web unchanged\ndeployment.apps/web configured\n")


def test_apply_continues_after_an_error(ctl, store, server, tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text(MANIFESTS)
    server.fail_next(1, code=422, methods=["POST"], message='Pod "web" is invalid: spec.containers[0].image: Required value')
    rc, out, err = ctl("apply", "-f", path)
    assert rc == 1
    assert out == "deployment.apps/web created\n"
    assert err == ('Error from server (Invalid): error when applying "%s": Pod "web" is invalid: '
                   'spec.containers[0].image: Required value\n' % path)


def test_apply_directory_stdin_json_and_list(ctl, store, tmp_path):
    d = tmp_path / "manifests"
    d.mkdir()
    (d / "b-svc.json").write_text(json.dumps({"apiVersion": "v1", "kind": "Service",
                                              "metadata": {"name": "web", "namespace": "team"},
                                              "spec": {"ports": [{"port": 80}]}}))
    (d / "a-ns.yml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n")
    (d / "notes.txt").write_text("not a manifest")
    rc, out, err = ctl("apply", "-f", d)
    assert (rc, err) == (0, "")
    assert out == "namespace/team created\nservice/web created\n"
    assert store.get_obj("services", "web", "team") is not None

    doc = {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "ConfigMapIsNotHere"}]}
    rc, out, err = ctl("apply", "-f", "-", stdin=io.StringIO(json.dumps(doc)))
    assert rc == 1 and "unknown kind 'ConfigMapIsNotHere'" in err

    spec = {"containers": [{"name": "c", "image": "nginx"}]}
    doc = {"kind": "List", "items": [{"kind": "Pod", "metadata": {"name": "p1"}, "spec": spec},
                                     {"kind": "Pod", "metadata": {"name": "p2"}, "spec": spec}]}
    rc, out, err = ctl("apply", "-f", "-", stdin=io.StringIO(json.dumps(doc)))
    assert (rc, out) == (0, "pod/p1 created\npod/p2 created\n")


def test_apply_namespace_mismatch(ctl, tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("kind: Pod\napiVersion: v1\nmetadata: {name: p, namespace: a}\n")
    rc, out, err = ctl("apply", "-f", path, "-n", "b")
    assert rc == 1 and "does not match the namespace 'b'" in err


def test_manifest_errors_abort_before_any_write(ctl, server, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(MANIFESTS)
    bad = tmp_path / "web.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n   labels: x\n")
    rc, out, err = ctl("apply", "-f", good, "-f", bad)
    assert rc == 1 and out == ""
    assert err.startswith("error: %s: line 5: " % bad)
    assert "Traceback" not in err
    assert not [r for r in server.requests if r["method"] != "GET"]

    rc, _, err = ctl("apply", "-f", tmp_path / "missing.yaml")
    assert (rc, err) == (1, "error: %s: no such file or directory\n" % (tmp_path / "missing.yaml"))

    bad.write_text("kind: Pod\nmetadata: {}\n")
    rc, _, err = ctl("create", "-f", bad)
    assert (rc, err) == (1, "error: %s: line 1: Pod has no metadata.name\n" % bad)

    bad.write_text('{"kind": "Pod",\n "metadata": {"name": "x"},,}')
    rc, _, err = ctl("apply", "-f", bad)
    assert rc == 1 and err.startswith("error: %s: line 2: " % bad)


def test_create_and_already_exists(ctl, store, tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text(MANIFESTS)
    rc, out, _ = ctl("create", "-f", path)
    assert (rc, out) == (0, "pod/web created\ndeployment.apps/web created\n")
    rc, out, err = ctl("create", "-f", path)
    assert rc == 1 and out == ""
    assert 'Error from server (AlreadyExists): error when creating "%s": pods "web" in namespace default ' \
        'already exists' % path in err
    rc, out, _ = ctl("create", "namespace", "prod")
    assert (rc, out) == (0, "namespace/prod created\n")
    assert store.get_obj("namespaces", "prod") is not None
    rc, out, _ = ctl("create", "deployment", "api", "--image", "api:1", "--replicas", "2", "-n", "prod")
    assert (rc, out) == (0, "deployment.apps/api created\n")
    assert store.get_obj("deployments", "api", "prod")["spec"]["replicas"] == 2


# -- delete / scale ----------------------------------------------------------

def test_delete(ctl, store, server, tmp_path):
    store.put("pods", running_pod("web"))
    store.put("pods", dict(running_pod("pending"), spec={"containers": [{"name": "c", "image": "nginx"}]}))
    store.put("deployments", {"metadata": {"name": "web"}, "spec": {"replicas": 1}})
    rc, out, err = ctl("delete", "pod", "web")
    assert (rc, out, err) == (0, 'pod "web" deleted\n', "")
    # A pod on a node terminates gracefully (its agent stops it), as in Kubernetes; deleting it
    # again is no error.
    assert store.get_obj("pods", "web")["metadata"]["deletionTimestamp"]
    assert ctl("delete", "pod", "web") == (0, 'pod "web" deleted\n', "")
    rc, out, err = ctl("delete", "pod", "pending")    # on no node: gone at once
    assert (rc, out, err) == (0, 'pod "pending" deleted\n', "")
    assert store.get_obj("pods", "pending") is None
    rc, out, err = ctl("delete", "pod", "pending")
    assert (rc, out, err) == (1, "", 'Error from server (NotFound): pods "pending" in namespace default not found\n')
    rc, out, err = ctl("delete", "pod", "pending", "--ignore-not-found")
    assert (rc, out, err) == (0, "", "")
    rc, out, err = ctl("delete", "deploy", "web", "--cascade=orphan")
    assert out == 'deployment.apps "web" deleted\n'
    assert json.loads(server.requests[-1]["body"])["propagationPolicy"] == "Orphan"
    store.put("deployments", {"metadata": {"name": "x"}, "spec": {"replicas": 1}})
    rc, out, err = ctl("delete", "deploy", "x", "--cascade=foreground")
    assert (rc, out) == (0, 'deployment.apps "x" deleted\n')
    assert json.loads(server.requests[-1]["body"])["propagationPolicy"] == "Foreground"
    rc, out, err = ctl("delete", "deploy", "x", "--cascade=sideways")
    assert rc == 1 and "background, foreground or orphan" in err


def test_delete_grace_period_and_force(ctl, store, server):
    store.put("pods", running_pod("web"))
    rc, out, err = ctl("delete", "pod", "web", "--grace-period=0")
    assert rc == 1 and "--force" in err, "skipping the graceful stop must be asked for"
    rc, out, err = ctl("delete", "pod", "web", "--grace-period=0", "--force")
    assert (rc, out) == (0, 'pod "web" deleted\n')
    assert json.loads(server.requests[-1]["body"])["gracePeriodSeconds"] == 0
    store.put("pods", running_pod("api"))
    ctl("delete", "pod", "api", "--grace-period", "5")
    assert json.loads(server.requests[-1]["body"])["gracePeriodSeconds"] == 5


def test_delete_from_file_and_selector(ctl, store, tmp_path):
    path = tmp_path / "web.yaml"
    path.write_text(MANIFESTS)
    ctl("apply", "-f", path)
    rc, out, err = ctl("delete", "-f", path)
    assert (rc, out) == (0, 'pod "web" deleted\ndeployment.apps "web" deleted\n')
    store.put("pods", running_pod("a"))
    store.put("pods", running_pod("b"))
    store.put("pods", dict(running_pod("c"), metadata={"name": "c", "labels": {"app": "db"}}))
    rc, out, _ = ctl("delete", "pods", "-l", "app=web")
    assert out == 'pod "a" deleted\npod "b" deleted\n'
    assert store.get_obj("pods", "c") is not None


def test_scale(ctl, store, server):
    store.put("deployments", {"metadata": {"name": "web"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    rc, out, err = ctl("scale", "deployment", "web", "--replicas", "4")
    assert (rc, out, err) == (0, "deployment.apps/web scaled\n", "")
    assert server.requests[-1]["path"] == "/apis/apps/v1/namespaces/default/deployments/web/scale"
    assert store.get_obj("deployments", "web")["spec"]["replicas"] == 4
    rc, out, err = ctl("scale", "pod", "web", "--replicas", "2")
    assert rc == 1 and "cannot be scaled" in err
    rc, out, err = ctl("scale", "deploy/ghost", "--replicas", "2")
    assert rc == 1 and err == 'Error from server (NotFound): deployments "ghost" in namespace default not found\n'


# -- cluster / version / errors ----------------------------------------------

CLUSTER = {"leader": "r1", "self": "r2", "replicas": [
    {"id": "r1", "api": "http://127.0.0.1:8001", "raft": "127.0.0.1:7001", "role": "leader",
     "term": 3, "commitIndex": 120, "appliedIndex": 120, "revision": 57, "reachable": True},
    {"id": "r2", "api": "http://127.0.0.1:8002", "raft": "127.0.0.1:7002", "role": "follower",
     "term": 3, "commitIndex": 120, "appliedIndex": 119, "revision": 57, "reachable": True},
    {"id": "r3", "api": "http://127.0.0.1:8003", "raft": "127.0.0.1:7003", "reachable": False}]}


def test_cluster_status(ctl, server):
    server.cluster_info = CLUSTER
    rc, out, _ = ctl("cluster", "status")
    rows = table(out)
    assert rows[0] == ["ID", "ROLE", "TERM", "COMMIT", "APPLIED", "REVISION", "REACHABLE", "API"]
    assert rows[1] == ["r1*", "leader", "3", "120", "120", "57", "yes", "http://127.0.0.1:8001"]
    assert rows[2] == ["r2", "follower", "3", "120", "119", "57", "yes", "http://127.0.0.1:8002"]
    assert rows[3] == ["r3", "-", "-", "-", "-", "-", "no", "http://127.0.0.1:8003"]
    assert "leader: r1 (as seen by r2)" in out
    rc, out, _ = ctl("cluster", "status", "-o", "json")
    assert json.loads(out) == CLUSTER
    server.cluster_info = dict(CLUSTER, leader=None)
    assert "no leader" in ctl("cluster", "status")[1]


def test_version(ctl, server):
    rc, out, _ = ctl("version")
    assert out == "Client Version: 0.1.0\nServer Version: 0.1.0 (replica r1 at %s)\n" % server.url
    assert main(["version", "--client"]) == 0  # needs no server


def test_no_replica_reachable(capsys):
    url = "http://127.0.0.1:%d" % free_port()
    rc = main(["--server", url, "--retry-deadline", "0.2", "get", "pods"])
    err = capsys.readouterr().err
    assert rc == 1
    assert err == ("no replica reachable at %s: connection refused (is the cluster up? try "
                   "`shepherd-ha local status --dir DIR`)\n" % url)


def test_server_503_is_reported(ctl, server):
    server.fail_next(1000, message="no quorum: 1 of 3 replicas reachable")
    rc, out, err = ctl("get", "pods", "--retry-deadline", "0.2")
    assert (rc, out) == (1, "")
    assert err == "Error from server (ServiceUnavailable): no quorum: 1 of 3 replicas reachable\n"


def test_usage_errors_exit_2_without_traceback(capsys):
    assert main(["get"]) == 2
    assert main([]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_delete_wait_follows_a_namespace_until_it_is_gone(ctl, store):
    store.put("namespaces", {"metadata": {"name": "team"}, "spec": {"finalizers": ["kubernetes"]}})
    store.put("pods", dict(running_pod("web"), metadata={"name": "web", "namespace": "team"}))
    store.put("configmaps", {"metadata": {"name": "c", "namespace": "team"}})
    controller = NamespaceController(store)
    stop = threading.Event()

    def leader():           # the namespace controller, and the agent stopping its pod a little later
        started = time.monotonic()
        while not stop.is_set():
            if time.monotonic() - started > 1.0 and store.get_obj("pods", "web", "team") is not None:
                store.apply(commands.write([commands.delete("pods", "team", "web")]))
            try:
                controller.reconcile("team")
            except Retry:
                pass
            stop.wait(0.1)
    thread = threading.Thread(target=leader, daemon=True)
    thread.start()
    try:
        rc, out, err = ctl("delete", "namespace", "team", "--wait", "--timeout", "20")
    finally:
        stop.set()
        thread.join(5)
    assert (rc, out) == (0, 'namespace "team" deleted\n'), err
    assert "waiting for namespace \"team\": Some resources are remaining: pods has 1 resource instances" in err
    assert store.get_obj("namespaces", "team") is None and store.get_obj("pods", "web", "team") is None


def test_delete_wait_gives_up_after_its_timeout_and_says_on_what(ctl, store):
    store.put("pods", running_pod("web"))
    rc, out, err = ctl("delete", "pod", "web", "--wait", "--timeout", "0.6")
    assert rc == 1 and out == 'pod "web" deleted\n'
    assert err == ('waiting for pod "web": its agent is stopping it (grace period 30s)\n'
                   'error: timed out waiting for pod "web" to be deleted (--timeout 0.6s)\n')
    rc, out, err = ctl("delete", "pod", "web", "--wait", "--grace-period=0", "--force")
    assert (rc, out, err) == (0, 'pod "web" deleted\n', "")
