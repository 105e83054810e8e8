"""Server-side printing (shepherd_ha/api/tables.py, model/printer_columns.py): Kubernetes'
columns per kind, kubectl's cell texts (pod STATUS, ages, ports...), the Accept forms
that ask for a Table, and what each row carries (includeObject)."""
from datetime import datetime, timedelta, timezone

import pytest

from shepherd_ha.api.tables import TableRequest, table_version
from shepherd_ha.model.printer_columns import columns_for, pod_status
from shepherd_ha.model.resources import RESOURCES

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def ago(**kw):
    return (NOW - timedelta(**kw)).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(plural, *objects, include="Metadata"):
    return TableRequest("v1", include).table(RESOURCES[plural], list(objects), "42", now=NOW)


def row_of(plural, obj, wide=True):
    t = table(plural, obj)
    names = [c["name"] for c in t["columnDefinitions"] if wide or c["priority"] == 0]
    cells = [cell for cell, c in zip(t["rows"][0]["cells"], t["columnDefinitions"]) if wide or c["priority"] == 0]
    return dict(zip(names, cells))


def pod(name="web-1", statuses=None, phase="Running", **extra):
    obj = {"metadata": {"name": name, "namespace": "default", "creationTimestamp": ago(minutes=5),
                        "labels": {"app": "web"}, "uid": "u1", "resourceVersion": "7"},
           "spec": {"containers": [{"name": "app", "image": "nginx"}]},
           "status": {"phase": phase, "containerStatuses": statuses or []}}
    for key, value in extra.items():
        obj.setdefault(key, {}).update(value) if isinstance(value, dict) else obj.update({key: value})
    return obj


def running(ready=True, restarts=0, **cs):
    return dict({"name": "app", "ready": ready, "restartCount": restarts,
                 "state": {"running": {"startedAt": ago(minutes=4)}}}, **cs)


def waiting(reason, restarts=0):
    return {"name": "app", "ready": False, "restartCount": restarts, "state": {"waiting": {"reason": reason}}}


def terminated(reason=None, code=0, signal=None):
    term = {"exitCode": code}
    if reason:
        term["reason"] = reason
    if signal:
        term["signal"] = signal
    return {"name": "app", "ready": False, "restartCount": 0, "state": {"terminated": term}}


def test_pod_columns_are_kubernetes_and_wide_ones_have_priority_1():
    defs = table("pods", pod())["columnDefinitions"]
    assert [(c["name"], c["priority"]) for c in defs] == [
        ("Name", 0), ("Ready", 0), ("Status", 0), ("Restarts", 0), ("Age", 0),
        ("IP", 1), ("Node", 1), ("Nominated Node", 1), ("Readiness Gates", 1)]
    assert defs[0]["format"] == "name" and all(c["description"] for c in defs)
    row = row_of("pods", pod(statuses=[running()], status={"podIP": "10.1.0.4"}, spec={"nodeName": "n1"}))
    assert row == {"Name": "web-1", "Ready": "1/1", "Status": "Running", "Restarts": 0, "Age": "5m",
                   "IP": "10.1.0.4", "Node": "n1", "Nominated Node": "<none>", "Readiness Gates": "<none>"}


@pytest.mark.parametrize("obj, expected", [
    (pod(phase="Pending"), "Pending"),
    (pod(phase="Pending", statuses=[waiting("ContainerCreating")]), "ContainerCreating"),
    (pod(statuses=[waiting("CrashLoopBackOff", 4)]), "CrashLoopBackOff"),
    (pod(phase="Succeeded", statuses=[terminated("Completed")]), "Completed"),
    (pod(phase="Failed", statuses=[terminated("Error", 1)]), "Error"),
    (pod(phase="Failed", statuses=[terminated(code=137)]), "ExitCode:137"),
    (pod(phase="Failed", statuses=[terminated(signal=9)]), "Signal:9"),
    (pod(statuses=[running()], metadata={"deletionTimestamp": ago(seconds=3)}), "Terminating"),
    (pod(phase="Failed", status={"reason": "Evicted"}), "Evicted"),
    (pod(phase="Pending", spec={"initContainers": [{"name": "i"}]},
         status={"initContainerStatuses": [{"name": "i", "state": {"running": {}}}]}), "Init:0/1"),
    (pod(phase="Pending", spec={"initContainers": [{"name": "i"}]},
         status={"initContainerStatuses": [{"name": "i", "state": {"waiting": {"reason": "ErrImagePull"}}}]}),
     "Init:ErrImagePull"),
])
def test_pod_status_as_kubectl_shows_it(obj, expected):
    assert pod_status(obj) == expected


def test_restarts_say_how_long_ago_the_last_one_was():
    cs = running(restarts=3, lastState={"terminated": {"exitCode": 1, "finishedAt": ago(minutes=2)}})
    assert row_of("pods", pod(statuses=[cs]))["Restarts"] == "3 (2m ago)"
    assert row_of("pods", pod(statuses=[running(ready=False)]))["Ready"] == "0/1"


def test_deployment_node_and_service_rows():
    deploy = {"metadata": {"name": "web", "creationTimestamp": ago(hours=3)},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "tier": "fe"}},
                       "template": {"spec": {"containers": [{"name": "app", "image": "nginx:1.25"},
                                                            {"name": "side", "image": "busybox"}]}}},
              "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    assert row_of("deployments", deploy) == {"Name": "web", "Ready": "2/3", "Up-to-date": 3, "Available": 2,
                                             "Age": "3h", "Containers": "app,side",
                                             "Images": "nginx:1.25,busybox", "Selector": "app=web,tier=fe"}
    node = {"metadata": {"name": "n1", "creationTimestamp": ago(days=3, hours=2),
                         "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "edge"}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                                     {"type": "Hostname", "address": "n1"}],
                       "nodeInfo": {"kubeletVersion": "shepherd-agent/0.1.0", "osImage": "Debian 12",
                                    "kernelVersion": "6.1.0", "containerRuntimeVersion": "docker://24.0.7"}}}
    assert row_of("nodes", node) == {"Name": "n1", "Status": "Ready,SchedulingDisabled",
                                     "Roles": "control-plane,edge", "Age": "3d2h",
                                     "Version": "shepherd-agent/0.1.0", "Internal-IP": "10.0.0.7",
                                     "External-IP": "<none>", "OS-Image": "Debian 12", "Kernel-Version": "6.1.0",
                                     "Container-Runtime": "docker://24.0.7"}
    node["status"]["conditions"][0]["status"] = "Unknown"
    node["spec"]["unschedulable"] = False
    assert row_of("nodes", node)["Status"] == "NotReady"
    del node["status"]["conditions"]
    assert row_of("nodes", node)["Status"] == "Unknown"
    svc = {"metadata": {"name": "web", "creationTimestamp": ago(seconds=30)},
           "spec": {"type": "NodePort", "clusterIP": "10.96.0.10", "selector": {"b": "2", "a": "1"},
                    "ports": [{"port": 80, "nodePort": 30080}, {"port": 53, "protocol": "UDP"}]}}
    assert row_of("services", svc) == {"Name": "web", "Type": "NodePort", "Cluster-IP": "10.96.0.10",
                                       "External-IP": "<none>", "Port(s)": "80:30080/TCP,53/UDP", "Age": "30s",
                                       "Selector": "a=1,b=2"}
    svc["spec"]["type"] = "LoadBalancer"
    assert row_of("services", svc)["External-IP"] == "<pending>"


def test_the_other_kinds_columns():
    cm = {"metadata": {"name": "c", "creationTimestamp": ago(days=40)}, "data": {"a": "1", "b": "2"}}
    assert row_of("configmaps", cm) == {"Name": "c", "Data": 2, "Age": "40d"}
    ns = {"metadata": {"name": "default", "creationTimestamp": ago(seconds=90)}, "status": {"phase": "Terminating"}}
    assert row_of("namespaces", ns) == {"Name": "default", "Status": "Terminating", "Age": "90s"}
    ep = {"metadata": {"name": "web", "creationTimestamp": ago(minutes=1)},
          "subsets": [{"addresses": [{"ip": "10.1.0.%d" % i} for i in range(1, 5)], "ports": [{"port": 80}]}]}
    assert row_of("endpoints", ep)["Endpoints"] == "10.1.0.1:80,10.1.0.2:80,10.1.0.3:80 + 1 more..."
    assert row_of("endpoints", {"metadata": {"name": "x"}})["Endpoints"] == "<none>"
    event = {"metadata": {"name": "web-1.17", "creationTimestamp": ago(minutes=9)},
             "involvedObject": {"kind": "Pod", "name": "web-1", "fieldPath": "spec.containers{app}"},
             "reason": "BackOff", "type": "Warning", "message": "Back-off restarting", "count": 5,
             "source": {"component": "shepherd-agent", "host": "n1"},
             "firstTimestamp": ago(minutes=9), "lastTimestamp": ago(seconds=20)}
    assert row_of("events", event) == {"Last Seen": "20s", "Type": "Warning", "Reason": "BackOff",
                                       "Object": "pod/web-1", "Subobject": "spec.containers{app}",
                                       "Source": "shepherd-agent, n1", "Message": "Back-off restarting",
                                       "First Seen": "9m", "Count": 5, "Name": "web-1.17"}
    rev = {"metadata": {"name": "web-5d8f", "creationTimestamp": ago(hours=1),
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                                             "controller": True}]}, "revision": 2}
    assert row_of("controllerrevisions", rev) == {"Name": "web-5d8f", "Controller": "deployment.apps/web",
                                                  "Revision": 2, "Age": "60m"}
    lease = {"metadata": {"name": "n1", "creationTimestamp": ago(minutes=1)}, "spec": {"holderIdentity": "n1"}}
    assert row_of("leases", lease) == {"Name": "n1", "Holder": "n1", "Age": "60s"}


def test_every_kind_has_a_name_column_and_cells_match_the_columns():
    for plural in RESOURCES:
        cols = columns_for(plural)
        assert any(c.format == "name" for c in cols), plural
        t = table(plural, {"metadata": {"name": "x"}})      # a bare object never breaks a row
        assert len(t["rows"][0]["cells"]) == len(t["columnDefinitions"])


def test_rows_carry_metadata_the_object_or_nothing():
    obj = pod()
    meta = table("pods", obj)
    assert meta["kind"] == "Table" and meta["apiVersion"] == "meta.k8s.io/v1"
    assert meta["metadata"] == {"resourceVersion": "42"}
    assert meta["rows"][0]["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                         "metadata": obj["metadata"]}
    whole = table("pods", obj, include="Object")["rows"][0]["object"]
    assert whole["spec"] == obj["spec"] and whole["kind"] == "Pod" and whole["apiVersion"] == "v1"
    assert "object" not in table("pods", obj, include="None")["rows"][0]
    beta = TableRequest("v1beta1", "Metadata").table(RESOURCES["pods"], [obj], "1", now=NOW)
    assert beta["apiVersion"] == "meta.k8s.io/v1beta1"
    assert beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


def test_watch_events_carry_one_row_tables_and_bookmarks_stay_as_they_are():
    req = TableRequest("v1", "Metadata")
    first = req.watch_event(RESOURCES["pods"], {"type": "ADDED", "object": pod()}, True)
    assert first["type"] == "ADDED" and first["object"]["kind"] == "Table"
    assert len(first["object"]["rows"]) == 1 and first["object"]["columnDefinitions"]
    assert first["object"]["metadata"] == {"resourceVersion": "7"}
    later = req.watch_event(RESOURCES["pods"], {"type": "DELETED", "object": pod()}, False)
    assert later["object"]["columnDefinitions"] == [] and later["object"]["rows"][0]["cells"][0] == "web-1"
    bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}}
    assert req.watch_event(RESOURCES["pods"], bookmark, True) is bookmark


@pytest.mark.parametrize("accept, version", [
    ("application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),
    ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
     "application/json", "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
    ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1;"
     "g=meta.k8s.io", "v1"),
    ("application/json", None), (None, None), ("*/*", None),
    ("application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),
    ("application/json;as=Table;v=v2;g=meta.k8s.io", None),
    ("application/json;as=Table;v=v1;g=other.io", None),
])
def test_which_accept_headers_ask_for_a_table(accept, version):
    assert table_version(accept) == version


@pytest.mark.parametrize("count", [0, 1, 250])
def test_a_list_table_in_chunks_is_the_same_json(count):
    import json
    pods = [pod("p%03d" % i) for i in range(count)]
    req = TableRequest("v1", "Metadata")
    chunks = req.list_chunks(RESOURCES["pods"], pods, "9")
    assert len(chunks) == 2 + (count + 99) // 100
    whole = json.loads(b"".join(chunks))
    one_piece = req.table(RESOURCES["pods"], pods, "9")
    assert whole["columnDefinitions"] == one_piece["columnDefinitions"] and whole["metadata"] == {"resourceVersion": "9"}
    assert [r["cells"][0] for r in whole["rows"]] == [r["cells"][0] for r in one_piece["rows"]]
