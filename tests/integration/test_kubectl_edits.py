"""kubectl 1.32 changing objects in place (issue 15), against a `shepherd-ha local up`
cluster through the DIR/kubeconfig it wrote (HTTPS, the admin's token: kubectl_kit.py):
edit with KUBE_EDITOR set to a script, label and annotate (set, overwrite, remove with
`key-`), scale of a Deployment and of a ReplicaSet (and a failed --current-replicas
precondition), apply of a multi-document file, apply that removes fields, delete -f of
that file. Each test reads back what the server then holds.
"""
import json
import stat

import pytest
import yaml

from .helpers import expect, wait_for

pytestmark = pytest.mark.integration

NS = "kubectl-edits"


@pytest.fixture(scope="module")
def kubectl(kube):
    kube.ensure_namespace(NS)
    return kube.kubectl_for(NS)


def read(kubectl, path):
    return expect(kubectl.kube.api("GET", path), 200)


def deployment(name, image="nginx:1.25", replicas=0, env=(("A", "1"), ("B", "2")), labels=None):
    meta = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "web", "image": image,
                                                           "env": [{"name": k, "value": v} for k, v in env]}]}}}}


def deploy_path(name):
    return "/apis/apps/v1/namespaces/%s/deployments/%s" % (NS, name)


def container(obj):
    return obj["spec"]["template"]["spec"]["containers"][0]


def test_edit_with_kube_editor_set_to_a_script(kubectl, tmp_path):
    kubectl("apply", "-f", "-", input=json.dumps(deployment("edited")))
    editor = tmp_path / "editor.sh"
    # kubectl hands the editor the object as YAML in a temporary file, its path the last argument
    editor.write_text("#!/bin/sh\nsed -i 's#image: nginx:1.25#image: nginx:1.29#' \"$1\"\n")
    editor.chmod(editor.stat().st_mode | stat.S_IXUSR)
    out = kubectl("edit", "deployment", "edited", env={"KUBE_EDITOR": str(editor), "EDITOR": str(editor)}).stdout
    assert out.strip() == "deployment.apps/edited edited", out
    obj = read(kubectl, deploy_path("edited"))
    assert container(obj)["image"] == "nginx:1.29"
    assert container(obj)["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]   # the rest kept
    assert obj["metadata"]["generation"] == 2
    # an editor that changes nothing: kubectl sends nothing and says so
    same = tmp_path / "same.sh"
    same.write_text("#!/bin/sh\nexit 0\n")
    same.chmod(same.stat().st_mode | stat.S_IXUSR)
    out = kubectl("edit", "deployment", "edited", env={"KUBE_EDITOR": str(same)})
    assert "Edit cancelled, no changes made." in out.stdout + out.stderr
    after = read(kubectl, deploy_path("edited"))     # (its controller may still write status meanwhile)
    assert (after["metadata"]["generation"], after["spec"]) == (obj["metadata"]["generation"], obj["spec"])


def test_label_and_annotate_set_overwrite_and_remove(kubectl):
    kubectl("apply", "-f", "-", input=json.dumps(deployment("tagged", labels={"keep": "me"})))
    assert kubectl("label", "deployment", "tagged", "tier=front").stdout.strip() == "deployment.apps/tagged labeled"
    assert kubectl("annotate", "deployment", "tagged", "note=first").stdout.strip() == \
        "deployment.apps/tagged annotated"
    meta = read(kubectl, deploy_path("tagged"))["metadata"]
    assert meta["labels"] == {"keep": "me", "tier": "front"} and meta["annotations"]["note"] == "first"
    refused = kubectl("label", "deployment", "tagged", "tier=back", check=False)     # no --overwrite
    assert refused.returncode != 0 and "already has a value (front)" in refused.stderr, refused.stderr
    kubectl("label", "deployment", "tagged", "tier=back", "--overwrite")
    kubectl("annotate", "deployment", "tagged", "note=second", "--overwrite")
    meta = read(kubectl, deploy_path("tagged"))["metadata"]
    assert meta["labels"]["tier"] == "back" and meta["annotations"]["note"] == "second"
    assert kubectl("label", "deployment", "tagged", "tier-").stdout.strip() == "deployment.apps/tagged unlabeled"
    kubectl("annotate", "deployment", "tagged", "note-")
    meta = read(kubectl, deploy_path("tagged"))["metadata"]
    assert meta["labels"] == {"keep": "me"} and "note" not in (meta.get("annotations") or {})
    # by selector, on another kind
    for name in ("sel-1", "sel-2"):
        kubectl("create", "configmap", name, "--from-literal=a=b")
    kubectl("label", "configmaps", "sel-1", "sel-2", "group=pair")
    assert kubectl("annotate", "configmaps", "-l", "group=pair", "seen=yes").stdout.splitlines() == [
        "configmap/sel-1 annotated", "configmap/sel-2 annotated"]
    for name in ("sel-1", "sel-2"):
        meta = read(kubectl, "/api/v1/namespaces/%s/configmaps/%s" % (NS, name))["metadata"]
        assert meta["labels"] == {"group": "pair"} and meta["annotations"] == {"seen": "yes"}


def test_scale_a_deployment_and_a_replica_set(kubectl):
    kubectl("apply", "-f", "-", input=json.dumps(deployment("scaled")))
    assert kubectl("scale", "deployment", "scaled", "--replicas=3").stdout.strip() == "deployment.apps/scaled scaled"
    assert read(kubectl, deploy_path("scaled"))["spec"]["replicas"] == 3
    failed = kubectl("scale", "deployment", "scaled", "--current-replicas=5", "--replicas=1", check=False)
    assert failed.returncode != 0 and "Expected replicas to be 5, was 3" in failed.stderr, failed.stderr
    assert read(kubectl, deploy_path("scaled"))["spec"]["replicas"] == 3          # the precondition held it
    # a ReplicaSet of its own (no Deployment above it to scale it back)
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "alone"},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "alone"}},
                   "template": {"metadata": {"labels": {"app": "alone"}},
                                "spec": {"containers": [{"name": "a", "image": "nginx:1.25"}]}}}}
    kubectl("apply", "-f", "-", input=json.dumps(rs))
    assert kubectl("scale", "rs", "alone", "--replicas=2").stdout.strip() == "replicaset.apps/alone scaled"
    path = "/apis/apps/v1/namespaces/%s/replicasets/alone" % NS
    assert read(kubectl, path)["spec"]["replicas"] == 2
    client = kubectl.kube.client
    wait_for("the ReplicaSet's two pods", lambda: len([
        p for p in client.list("pods", NS, label_selector="app=alone")["items"]
        if not p["metadata"].get("deletionTimestamp")]) == 2, timeout=30)
    kubectl("scale", "replicaset/alone", "--replicas=0")
    assert read(kubectl, path)["spec"]["replicas"] == 0
    wait_for("the ReplicaSet's pods gone", lambda: not [
        p for p in client.list("pods", NS, label_selector="app=alone")["items"]
        if not p["metadata"].get("deletionTimestamp")], timeout=30)


def test_apply_a_multi_document_file_remove_fields_then_delete_by_file(kubectl, tmp_path):
    path = str(tmp_path / "app.yaml")

    def write(docs):
        with open(path, "w") as fh:
            yaml.safe_dump_all(docs, fh, sort_keys=False)        # documents separated by ---

    settings = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "multi-settings"},
                "data": {"mode": "fast", "extra": "1"}}
    app = deployment("multi-app", labels={"team": "a", "tier": "front"})
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "multi-svc"},
           "spec": {"selector": {"app": "multi-app"}, "ports": [{"name": "http", "port": 80}]}}
    write([settings, app, svc])
    out = kubectl("apply", "-f", path).stdout.splitlines()
    assert out == ["configmap/multi-settings created", "deployment.apps/multi-app created",
                   "service/multi-svc created"], out
    cm_path = "/api/v1/namespaces/%s/configmaps/multi-settings" % NS
    svc_path = "/api/v1/namespaces/%s/services/multi-svc" % NS
    assert read(kubectl, cm_path)["data"] == {"mode": "fast", "extra": "1"}
    assert read(kubectl, deploy_path("multi-app"))["metadata"]["labels"] == {"team": "a", "tier": "front"}
    assert [p["port"] for p in read(kubectl, svc_path)["spec"]["ports"]] == [80]

    # the next version of the file drops a data key, a label and an env var, and changes the port
    del settings["data"]["extra"]
    del app["metadata"]["labels"]["tier"]
    app["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    svc["spec"]["ports"] = [{"name": "http", "port": 8080}]
    write([settings, app, svc])
    out = kubectl("apply", "-f", path).stdout.splitlines()
    assert out == ["configmap/multi-settings configured", "deployment.apps/multi-app configured",
                   "service/multi-svc configured"], out
    assert read(kubectl, cm_path)["data"] == {"mode": "fast"}
    obj = read(kubectl, deploy_path("multi-app"))
    assert obj["metadata"]["labels"] == {"team": "a"}
    assert container(obj)["env"] == [{"name": "A", "value": "1"}]
    assert [p["port"] for p in read(kubectl, svc_path)["spec"]["ports"]] == [8080]

    out = kubectl("delete", "-f", path).stdout.splitlines()
    assert out == ['configmap "multi-settings" deleted', 'deployment.apps "multi-app" deleted',
                   'service "multi-svc" deleted'], out
    for gone in (cm_path, deploy_path("multi-app"), svc_path):
        wait_for("%s deleted" % gone, lambda: kubectl.kube.api("GET", gone).status_code == 404, timeout=30)
    again = kubectl("delete", "-f", path, check=False)
    assert again.returncode != 0 and 'configmaps "multi-settings" in namespace %s not found' % NS in again.stderr, again.stderr
    assert kubectl("delete", "-f", path, "--ignore-not-found").returncode == 0


def test_replace_set_env_diff_expose_and_a_foreground_delete(kubectl, tmp_path):
    kubectl("apply", "-f", "-", input=json.dumps(deployment("swapped")))
    live = yaml.safe_load(kubectl("get", "deployment", "swapped", "-o", "yaml").stdout)
    container(live)["image"] = "nginx:1.31"
    path = tmp_path / "swapped.yaml"
    path.write_text(yaml.safe_dump(live))
    assert kubectl("replace", "-f", str(path)).stdout.strip() == "deployment.apps/swapped replaced"
    assert container(read(kubectl, deploy_path("swapped")))["image"] == "nginx:1.31"
    assert kubectl("set", "env", "deployment/swapped", "C=3", "A-").stdout.strip() == \
        "deployment.apps/swapped env updated"
    assert container(read(kubectl, deploy_path("swapped")))["env"] == [{"name": "B", "value": "2"},
                                                                       {"name": "C", "value": "3"}]
    # diff: exit 1 and the change shown when the file differs from the server, 0 when not
    wanted = deployment("swapped", image="nginx:1.32", env=(("B", "2"), ("C", "3")))
    differs = kubectl("diff", "-f", "-", input=json.dumps(wanted), check=False)
    assert differs.returncode == 1 and "+        image: nginx:1.32" in differs.stdout, differs
    assert container(read(kubectl, deploy_path("swapped")))["image"] == "nginx:1.31"    # diff stores nothing
    kubectl("apply", "-f", "-", input=json.dumps(wanted))
    assert kubectl("diff", "-f", "-", input=json.dumps(wanted), check=False).returncode == 0
    assert kubectl("expose", "deployment", "swapped", "--port=80", "--target-port=8080").stdout.strip() == \
        "service/swapped exposed"
    svc = read(kubectl, "/api/v1/namespaces/%s/services/swapped" % NS)
    assert svc["spec"]["selector"] == {"app": "swapped"} and \
        [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(80, 8080)]
    kubectl("scale", "deployment", "swapped", "--replicas=2")
    client = kubectl.kube.client
    wait_for("the deployment's pods", lambda: len(client.list("pods", NS, label_selector="app=swapped")["items"]) == 2,
             timeout=30)
    kubectl("delete", "deployment", "swapped", "--cascade=foreground", "--wait=true", timeout=90)
    # foreground: the Deployment goes only after its dependents, so they are gone by now
    assert kubectl.kube.api("GET", deploy_path("swapped")).status_code == 404
    assert not client.list("replicasets", NS, label_selector="app=swapped")["items"]
    assert not client.list("pods", NS, label_selector="app=swapped")["items"]
