"""Validation that grew stricter than what a store already holds (through the real API app
over a real FSM, tests/unit/real_api.py): an update leaving such a value as it is goes
through, as Kubernetes ratchets validation; a new bad value is still refused."""
from real_api import flask_client
from shepherd_ha.model.defaults import apply_defaults

PODS = "/api/v1/namespaces/default/pods"
SERVICES = "/api/v1/namespaces/default/services"
MERGE = "application/merge-patch+json"


def test_a_stored_value_a_newer_rule_refuses_does_not_freeze_the_object():
    api, replica = flask_client()
    # stored before status times were checked (a write straight into the store)
    replica.store.put("pods", apply_defaults("pods", {
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "startTime": "garbage"}}))
    ok = api.patch(PODS + "/p/status", content_type=MERGE, json={"status": {"conditions": [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert ok.status_code == 200, ok.get_json()                 # the agent's post goes on
    assert api.patch(PODS + "/p", content_type=MERGE, json={"metadata": {"labels": {"a": "b"}}}).status_code == 200
    bad = api.patch(PODS + "/p/status", content_type=MERGE, json={"status": {"startTime": "junk"}})
    assert bad.status_code == 422 and "status.startTime" in bad.get_json()["message"]
    fixed = api.patch(PODS + "/p/status", content_type=MERGE, json={"status": {"startTime": "2026-01-01T00:00:00Z"}})
    assert fixed.status_code == 200
    again = api.patch(PODS + "/p/status", content_type=MERGE, json={"status": {"startTime": "garbage"}})
    assert again.status_code == 422, "once fixed, the old value is as new as any other"


def test_empty_service_policies_are_unset_as_kubernetes_reads_them():
    api, _ = flask_client()
    resp = api.post(SERVICES, json={"metadata": {"name": "s"}, "spec": {
        "ports": [{"port": 80}], "sessionAffinity": "", "externalTrafficPolicy": "", "ipFamilyPolicy": ""}})
    assert resp.status_code == 201, resp.get_json()


def test_a_deletion_grace_period_a_client_stored_before_goes_on_the_next_update():
    api, replica = flask_client()
    replica.store.put("pods", apply_defaults("pods", {
        "metadata": {"name": "p", "namespace": "default", "deletionGracePeriodSeconds": "abc"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}}))
    resp = api.patch(PODS + "/p", content_type=MERGE, json={"metadata": {"labels": {"a": "b"}}})
    assert resp.status_code == 200 and "deletionGracePeriodSeconds" not in resp.get_json()["metadata"]
    deleted = api.delete(PODS + "/p?gracePeriodSeconds=5")       # the store compares it: no TypeError
    assert deleted.status_code == 200 and deleted.get_json()["metadata"]["deletionGracePeriodSeconds"] == 5
