"""kubectl's write path through the real API app over a real FSM (tests/unit/real_api.py),
with requests shaped as kubectl 1.32 sends them: the three patch types, server-side
apply, dryRun=All on every write, fieldValidation, managedFields."""
import json

import pytest

from real_api import flask_client as api_client

NS = "/api/v1/namespaces/default"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
WEB = DEPLOYMENTS + "/web"
KUBECTL = {"User-Agent": "kubectl/v1.32.0 (linux/amd64) kubernetes/70d3cc9"}
SMP = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def web_deployment(image="nginx:1.25", replicas=1):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": image,
                                                           "ports": [{"containerPort": 80}],
                                                           "env": [{"name": "A", "value": "1"}]}]}}}}


@pytest.fixture
def api():
    client, replica = api_client()
    resp = client.post(DEPLOYMENTS + "?fieldManager=kubectl-client-side-apply&fieldValidation=Strict",
                       json=web_deployment(), headers=KUBECTL)
    assert resp.status_code == 201, resp.get_json()
    return client, replica


def patch(client, url, body, ctype, **headers):
    return client.patch(url, data=body if isinstance(body, str) else json.dumps(body), content_type=ctype,
                        headers=dict(KUBECTL, **headers))


def container(obj, i=0):
    return obj["spec"]["template"]["spec"]["containers"][i]


def managers(obj):
    return {(e["manager"], e["operation"]) for e in obj["metadata"].get("managedFields", [])}


def test_second_kubectl_apply_is_a_strategic_merge_patch(api):
    client, _ = api
    body = {"metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}\n"}},
            "spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "web"}],
                                           "containers": [{"image": "nginx:1.26", "name": "web",
                                                           "$setElementOrder/env": [{"name": "A"}, {"name": "B"}],
                                                           "env": [{"name": "B", "value": "2"}]}]}}}}
    resp = patch(client, WEB + "?fieldManager=kubectl-client-side-apply&fieldValidation=Strict", body, SMP)
    assert resp.status_code == 200, resp.get_json()
    obj = client.get(WEB).get_json()
    web = container(obj)
    assert web["image"] == "nginx:1.26" and web["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert web["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert "$setElementOrder/containers" not in json.dumps(obj)
    assert obj["metadata"]["generation"] == 2
    assert managers(obj) == {("kubectl-client-side-apply", "Update")}


@pytest.mark.parametrize("manager, body", [
    ("kubectl-set", {"spec": {"template": {"spec": {"containers": [{"image": "nginx:1.27", "name": "web"}]}}}}),
    ("kubectl-rollout", {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": "2026-12-01T23:00:00Z"}}}}}),
])
def test_set_image_and_rollout_restart_shapes(api, manager, body):
    client, _ = api
    resp = patch(client, WEB + "?fieldManager=" + manager, body, SMP)
    assert resp.status_code == 200, resp.get_json()
    obj = resp.get_json()
    assert (manager, "Update") in managers(obj)
    assert obj["metadata"]["generation"] == 2
    assert container(obj)["env"] == [{"name": "A", "value": "1"}]


def test_cordon_is_a_strategic_patch_of_a_node(api):
    client, _ = api
    assert client.post("/api/v1/nodes", json={"metadata": {"name": "n1"}}).status_code == 201
    resp = patch(client, "/api/v1/nodes/n1?fieldManager=kubectl-cordon", {"spec": {"unschedulable": True}}, SMP)
    assert resp.status_code == 200 and resp.get_json()["spec"]["unschedulable"] is True


def test_json_patch_applies_and_a_failed_test_changes_nothing(api):
    client, replica = api
    ok = [{"op": "test", "path": "/spec/replicas", "value": 1}, {"op": "replace", "path": "/spec/replicas", "value": 3}]
    resp = patch(client, WEB, ok, "application/json-patch+json")
    assert resp.status_code == 200 and resp.get_json()["spec"]["replicas"] == 3
    writes = replica.writes
    for bad in ([{"op": "test", "path": "/spec/replicas", "value": 1}],
                [{"op": "remove", "path": "/spec/nothing"}]):
        resp = patch(client, WEB, bad, "application/json-patch+json")
        assert resp.status_code == 422 and resp.get_json()["kind"] == "Status"
    assert patch(client, WEB, {"op": "add"}, "application/json-patch+json").status_code == 400
    assert replica.writes == writes


def test_merge_patch_with_directives_never_stores_them(api):
    client, _ = api
    body = {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "web"}]}}}}
    resp = patch(client, WEB, body, "application/merge-patch+json")
    assert resp.status_code == 200
    assert resp.headers.get_all("Warning") == [
        '299 - "unknown field \\"spec.template.spec.$setElementOrder/containers\\""']
    obj = client.get(WEB).get_json()
    assert "$setElementOrder" not in json.dumps(obj) and container(obj)["ports"]
    strict = patch(client, WEB + "?fieldValidation=Strict", body, "application/merge-patch+json")
    assert strict.status_code == 400
    assert strict.get_json()["details"]["causes"][0]["field"] == "spec.template.spec.$setElementOrder/containers"


def test_unsupported_patch_type_is_415(api):
    client, _ = api
    resp = patch(client, WEB, "{}", "application/vnd.kubernetes.protobuf")
    assert resp.status_code == 415 and "strategic-merge-patch" in resp.get_json()["message"]


@pytest.mark.parametrize("mode, code", [("Strict", 400), ("Warn", 201), ("Ignore", 201), (None, 201)])
def test_field_validation_on_create(mode, code):
    client, replica = api_client()
    body = {"metadata": {"name": "cm"}, "data": {"a": "b"}, "spec": {"foo": 1}}
    url = NS + "/configmaps" + ("?fieldValidation=%s" % mode if mode else "")
    resp = client.post(url, json=body)
    assert resp.status_code == code, resp.get_json()
    stored = client.get(NS + "/configmaps/cm")
    if code == 400:
        assert 'unknown field "spec"' in resp.get_json()["message"]
        assert stored.status_code == 404
        return
    assert "spec" not in stored.get_json() and stored.get_json()["data"] == {"a": "b"}
    warnings = resp.headers.get_all("Warning")
    assert warnings == (['299 - "unknown field \\"spec\\""'] if mode in ("Warn", None) else [])


def test_bad_option_values_are_invalid(api):
    client, replica = api
    writes = replica.writes
    for url in (NS + "/configmaps?fieldValidation=strict", NS + "/configmaps?dryRun=true"):
        resp = client.post(url, json={"metadata": {"name": "x"}})
        assert resp.status_code == 422 and resp.get_json()["reason"] == "Invalid", resp.get_json()
    assert client.delete(WEB, json={"dryRun": ["Yes"]}).status_code == 422
    assert replica.writes == writes


def test_dry_run_on_every_write_answers_and_stores_nothing(api):
    client, replica = api
    before = client.get(WEB).get_json()
    writes = replica.writes
    created = client.post(NS + "/configmaps?dryRun=All&fieldManager=kubectl-client-side-apply",
                          json={"metadata": {"name": "cm"}, "data": {"a": "b"}})
    assert created.status_code == 201
    assert created.get_json()["metadata"]["uid"] and created.get_json()["metadata"]["creationTimestamp"]
    assert client.get(NS + "/configmaps/cm").status_code == 404
    new = web_deployment(image="nginx:2")
    new["metadata"]["resourceVersion"] = before["metadata"]["resourceVersion"]
    put = client.put(WEB + "?dryRun=All", json=new)
    assert put.status_code == 200 and container(put.get_json())["image"] == "nginx:2"
    assert put.get_json()["metadata"]["generation"] == 2
    for ctype, body in ((SMP, {"spec": {"replicas": 4}}), ("application/merge-patch+json", {"spec": {"replicas": 4}}),
                        ("application/json-patch+json", [{"op": "replace", "path": "/spec/replicas", "value": 4}])):
        resp = patch(client, WEB + "?dryRun=All", body, ctype)
        assert resp.status_code == 200 and resp.get_json()["spec"]["replicas"] == 4
    applied = patch(client, WEB + "?dryRun=All&fieldManager=kubectl&force=true",
                    json.dumps(web_deployment(replicas=7)), APPLY)
    assert applied.status_code == 200 and applied.get_json()["spec"]["replicas"] == 7
    status = client.put(WEB + "/status?dryRun=All", json=dict(before, status={"replicas": 9}))
    assert status.status_code == 200 and status.get_json()["status"]["replicas"] == 9
    scale = patch(client, WEB + "/scale?dryRun=All", {"spec": {"replicas": 5}}, "application/merge-patch+json")
    assert scale.status_code == 200 and scale.get_json()["spec"]["replicas"] == 5
    deleted = client.delete(WEB, json={"kind": "DeleteOptions", "apiVersion": "v1",
                                       "propagationPolicy": "Background", "dryRun": ["All"]})
    assert deleted.status_code == 200
    assert client.delete(WEB + "?dryRun=All").status_code == 200
    assert replica.writes == writes
    assert client.get(WEB).get_json() == before


def test_dry_run_refuses_what_the_store_would(api):
    client, replica = api
    assert client.post(DEPLOYMENTS + "?dryRun=All", json=web_deployment()).status_code == 409
    assert client.post("/api/v1/namespaces/nope/configmaps?dryRun=All",
                       json={"metadata": {"name": "x"}}).status_code == 404
    assert client.delete(DEPLOYMENTS + "/ghost?dryRun=All").status_code == 404
    stale = web_deployment()
    stale["metadata"]["resourceVersion"] = "1"
    assert client.put(WEB + "?dryRun=All", json=stale).status_code == 409
    assert client.post(DEPLOYMENTS + "?dryRun=All", json={"metadata": {"name": "bad"}}).status_code == 422


def test_server_side_apply_creates_conflicts_and_forces():
    client, replica = api_client()
    config = json.dumps(web_deployment(replicas=2))
    missing = patch(client, WEB, config, APPLY)
    assert missing.status_code == 422 and "fieldManager" in missing.get_json()["message"]
    created = patch(client, WEB + "?fieldManager=kubectl&fieldValidation=Strict&force=false", config, APPLY)
    assert created.status_code == 201, created.get_json()
    obj = created.get_json()
    assert managers(obj) == {("kubectl", "Apply")}
    assert container(obj)["imagePullPolicy"] == "IfNotPresent"          # defaulted, not owned
    scaled = patch(client, WEB + "/scale?fieldManager=kubectl-scale", {"spec": {"replicas": 5}},
                   "application/merge-patch+json")
    assert scaled.status_code == 200
    conflict = patch(client, WEB + "?fieldManager=kubectl&force=false", config, APPLY)
    assert conflict.status_code == 409, conflict.get_json()
    status = conflict.get_json()
    assert status["reason"] == "Conflict"
    assert status["details"]["causes"] == [{"reason": "FieldManagerConflict", "field": ".spec.replicas",
                                            "message": 'conflict with "kubectl-scale" with subresource "scale" using apps/v1'}]
    assert client.get(WEB).get_json()["spec"]["replicas"] == 5
    forced = patch(client, WEB + "?fieldManager=kubectl&force=true", config, APPLY)
    assert forced.status_code == 200 and forced.get_json()["spec"]["replicas"] == 2


def test_server_side_apply_takes_yaml_and_removes_what_it_stops_applying():
    client, _ = api_client()
    first = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n  labels: {team: a}\n"
             "data:\n  one: '1'\n  two: '2'\n")
    assert patch(client, NS + "/configmaps/cm?fieldManager=me", first, APPLY).status_code == 201
    second = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  one: '1'\n"
    resp = patch(client, NS + "/configmaps/cm?fieldManager=me", second, APPLY)
    assert resp.status_code == 200
    obj = client.get(NS + "/configmaps/cm").get_json()
    assert obj["data"] == {"one": "1"} and not obj["metadata"].get("labels")
    bad = patch(client, NS + "/configmaps/cm?fieldManager=me", "a: [unclosed", APPLY)
    assert bad.status_code == 400
    dated = patch(client, NS + "/configmaps/cm?fieldManager=me", "metadata: {name: cm}\ndata: {d: 2026-01-01}\n", APPLY)
    assert dated.status_code == 400 and "quote it" in dated.get_json()["message"]
    other = patch(client, NS + "/configmaps/cm?fieldManager=me", "metadata: {name: other}\n", APPLY)
    assert other.status_code == 400


def test_a_no_op_write_makes_no_new_revision(api):
    client, replica = api
    before = client.get(WEB).get_json()
    again = patch(client, WEB + "?fieldManager=other", {"spec": {"replicas": 1}}, SMP)
    assert again.get_json()["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert again.get_json()["metadata"]["managedFields"] == before["metadata"]["managedFields"]


def test_the_default_field_manager_comes_from_the_user_agent(api):
    client, _ = api
    resp = patch(client, WEB, {"metadata": {"labels": {"x": "y"}}}, SMP)
    assert ("kubectl", "Update") in managers(resp.get_json())


def test_apply_to_a_subresource_is_refused_with_a_way_out(api):
    client, replica = api
    writes = replica.writes
    resp = patch(client, WEB + "/status?fieldManager=me", '{"status": {"replicas": 1}}', APPLY)
    assert resp.status_code == 400 and "merge" in resp.get_json()["message"]
    resp = patch(client, WEB + "/scale?fieldManager=me", '{"spec": {"replicas": 1}}', APPLY)
    assert resp.status_code == 415
    assert replica.writes == writes


def test_force_is_only_for_apply(api):
    client, _ = api
    resp = patch(client, WEB + "?force=true", {"spec": {"replicas": 2}}, SMP)
    assert resp.status_code == 422 and "non-apply" in resp.get_json()["message"]


def test_managed_fields_a_write_sets_replace_the_stored_ones(api):
    """kubectl moves client-side apply ownership to server-side apply with a JSON patch of
    metadata.managedFields, then applies: the fields it stopped applying go."""
    client, _ = api
    moved = [{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": "2026-01-01T00:00:00Z",
              "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}}}]
    resp = patch(client, WEB + "?fieldManager=kubectl", [{"op": "replace", "path": "/metadata/managedFields",
                                                           "value": moved}], "application/json-patch+json")
    assert resp.status_code == 200 and resp.get_json()["metadata"]["managedFields"] == moved
    config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}
    applied = patch(client, WEB + "?fieldManager=kubectl", json.dumps(config), APPLY)
    assert applied.status_code == 200, applied.get_json()
    assert not applied.get_json()["metadata"].get("labels")
    reset = patch(client, WEB, [{"op": "replace", "path": "/metadata/managedFields", "value": []}],
                  "application/json-patch+json")
    assert reset.get_json()["metadata"]["managedFields"] == []


def test_a_key_sent_twice_is_refused_when_strict_and_warned_about_otherwise():
    client, replica = api_client()
    body = '{"metadata": {"name": "cm"}, "data": {"a": "1", "a": "2"}}'
    strict = client.post(NS + "/configmaps?fieldValidation=Strict", data=body, content_type="application/json")
    assert strict.status_code == 400 and 'duplicate field "a"' in strict.get_json()["message"]
    assert client.get(NS + "/configmaps/cm").status_code == 404
    warned = client.post(NS + "/configmaps", data=body, content_type="application/json")
    assert warned.status_code == 201 and warned.headers.get_all("Warning") == ['299 - "json: duplicate field \\"a\\""']
    assert warned.get_json()["data"] == {"a": "2"}


def test_dry_run_of_a_service_refuses_what_the_allocator_would(api):
    """dryRun=All answered 201 for a Service asking for a cluster IP or node port another
    Service holds, and 200 for a changed cluster IP; the real write is a 422."""
    client, _ = api
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"},
           "spec": {"type": "NodePort", "clusterIP": "10.96.0.50", "ports": [{"port": 80, "nodePort": 30080}]}}
    assert client.post(NS + "/services", json=svc).status_code == 201
    taken_ip = dict(svc, metadata={"name": "b"}, spec={"clusterIP": "10.96.0.50", "ports": [{"port": 80}]})
    taken_port = dict(svc, metadata={"name": "c"}, spec={"type": "NodePort", "ports": [{"port": 80, "nodePort": 30080}]})
    for body, field in ((taken_ip, "spec.clusterIP"), (taken_port, "spec.ports[0].nodePort")):
        real = client.post(NS + "/services", json=body)
        dry = client.post(NS + "/services?dryRun=All", json=body)
        assert real.status_code == dry.status_code == 422, (real.get_json(), dry.get_json())
        assert field in dry.get_json()["message"] and "already allocated" in dry.get_json()["message"]
    moved, really = (patch(client, NS + "/services/a" + q, {"spec": {"clusterIP": "10.96.0.51"}},
                           "application/merge-patch+json") for q in ("?dryRun=All", ""))
    assert moved.status_code == really.status_code == 422, (moved.get_json(), really.get_json())
    assert moved.get_json()["message"] == really.get_json()["message"]
    fine = client.post(NS + "/services?dryRun=All", json=dict(taken_ip, spec={"ports": [{"port": 80}]}))
    assert fine.status_code == 201, fine.get_json()
    assert client.get(NS + "/services/b").status_code == 404


def test_an_unknown_field_named_in_any_script_is_warned_about_in_an_ascii_header():
    # Found by the fuzz campaign: a Warning header holding "é" or "字" made waitress fail
    # to encode the answer (headers go out as Latin-1), a 500.
    client, _ = api_client()
    resp = client.post("/api/v1/namespaces/default/configmaps?fieldValidation=Warn",
                       json={"metadata": {"name": "cm-warn"}, "data": {"a": "b"}, "字é": 1})
    assert resp.status_code == 201, resp.get_json()
    warning = resp.headers["Warning"]
    assert warning.isascii() and "\\u5b57" in warning and "\\xe9" in warning
    assert "字é" not in client.get("/api/v1/namespaces/default/configmaps/cm-warn").get_json()


def test_an_unknown_field_with_a_line_break_in_its_name_is_warned_about_on_one_line():
    # Found by the fuzz campaign: a field name holding "\r" or "\n" made Werkzeug refuse
    # the Warning header after the object was stored: a 500 for a create that happened.
    client, _ = api_client()
    resp = client.post("/api/v1/namespaces/default/configmaps?fieldValidation=Warn",
                       json={"metadata": {"name": "cm-crlf"}, "data": {"a": "b"}, "x\r\ny\x00\x7f": 1})
    assert resp.status_code == 201, resp.get_json()
    assert resp.headers["Warning"] == '299 - "unknown field \\"x\\x0d\\x0ay\\x00\\x7f\\""'


def test_patches_change_one_of_two_equal_parts_only(api):
    """Equal parts of a stored object (selector and template labels, requests and limits,
    two probes) are shared by interning; a patch of one must not change the other (a JSON
    patch of limits.cpu changed requests.cpu, and a template label was refused as a
    selector change, before stored objects were kept trees)."""
    client, _ = api
    probe = {"tcpSocket": {"port": 80}}
    web = web_deployment()
    web["spec"]["template"]["spec"]["containers"][0].update(
        resources={"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}, livenessProbe=probe, readinessProbe=probe)
    assert client.put(WEB, json=web).status_code == 200
    resp = patch(client, WEB, [{"op": "replace", "path": "/spec/template/spec/containers/0/resources/limits/cpu",
                                "value": "2"},
                               {"op": "add", "path": "/spec/template/metadata/labels/tier", "value": "x"}],
                 "application/json-patch+json")
    assert resp.status_code == 200, resp.get_json()
    stored = client.get(WEB).get_json()
    assert container(stored)["resources"] == {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}
    assert stored["spec"]["selector"]["matchLabels"] == {"app": "web"}
    assert stored["spec"]["template"]["metadata"]["labels"] == {"app": "web", "tier": "x"}
    resp = patch(client, WEB, {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "readinessProbe": {"tcpSocket": {"port": 81}}}]}}}}, SMP)
    assert resp.status_code == 200, resp.get_json()
    assert container(client.get(WEB).get_json())["livenessProbe"]["tcpSocket"] == {"port": 80}
