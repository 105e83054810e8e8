"""Namespace deletion through the real API over a real FSM (tests/unit/real_api.py), with
the namespace controller reconciling over the same store: DELETE answers with the
Terminating namespace, new content is refused as Kubernetes refuses it, the built-in
namespaces cannot be deleted, and /finalize finishes (or forces) a deletion."""
import pytest

from real_api import flask_client

from shepherd_ha.controllers.controller import Retry
from shepherd_ha.controllers.namespaces import NamespaceController

NS = "/api/v1/namespaces"


@pytest.fixture
def api():
    client, replica = flask_client()
    assert client.post(NS, json={"metadata": {"name": "team"}}).status_code == 201
    assert client.post(NS + "/team/configmaps", json={"metadata": {"name": "c"}}).status_code == 201
    client.controller = NamespaceController(replica.store)
    return client


def test_a_new_namespace_carries_the_kubernetes_finalizer(api):
    ns = api.get(NS + "/team").get_json()
    assert ns["spec"]["finalizers"] == ["kubernetes"] and ns["status"]["phase"] == "Active"


def test_delete_answers_with_the_terminating_namespace_and_refuses_new_content(api):
    resp = api.delete(NS + "/team")
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    assert body["kind"] == "Namespace" and body["status"]["phase"] == "Terminating"
    assert body["metadata"]["deletionTimestamp"]
    assert api.get(NS + "/team/configmaps/c").status_code == 200, "contents wait for the controller"

    refused = api.post(NS + "/team/configmaps", json={"metadata": {"name": "d"}})
    assert refused.status_code == 403
    status = refused.get_json()
    assert status["reason"] == "Forbidden"
    assert status["message"] == ('configmaps "d" is forbidden: unable to create new content in namespace team '
                                 'because it is being terminated')
    assert status["details"]["causes"] == [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                            "message": "unable to create new content in namespace team because "
                                                       "it is being terminated"}]
    dry = api.post(NS + "/team/configmaps?dryRun=All", json={"metadata": {"name": "d"}})
    assert dry.status_code == 403 and "being terminated" in dry.get_json()["message"]
    again = api.delete(NS + "/team")
    assert again.status_code == 409 and "ensuring all content is removed" in again.get_json()["message"]

    # What goes at once goes, and the emptied namespace with it, in one look.
    assert api.controller.reconcile("team") == "namespace team: empty, deleted"
    assert api.get(NS + "/team/configmaps/c").status_code == 404
    assert api.get(NS + "/team").status_code == 404


@pytest.mark.parametrize("name", ["default", "kube-node-lease", "kube-system", "kube-public"])
def test_the_built_in_namespaces_may_not_be_deleted(api, name):
    resp = api.delete(NS + "/" + name)
    assert resp.status_code == 403, resp.get_json()
    assert resp.get_json()["message"] == 'namespaces "%s" is forbidden: this namespace may not be deleted' % name


def test_finalize_forces_a_stuck_namespace_and_takes_only_its_finalizers(api):
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    assert api.post(NS + "/team/configmaps", json=held).status_code == 201
    api.delete(NS + "/team")
    with pytest.raises(Retry):
        api.controller.reconcile("team")   # the held ConfigMap keeps it Terminating
    ns = api.get(NS + "/team").get_json()
    conditions = {c["type"]: c["status"] for c in ns["status"]["conditions"]}
    assert conditions["NamespaceFinalizersRemaining"] == "True"

    bad = api.put(NS + "/team/finalize", json={"metadata": {"name": "team"}, "spec": {"finalizers": ["no way!"]}})
    assert bad.status_code == 422 and "spec.finalizers[0]" in bad.get_json()["message"]
    more = api.put(NS + "/team/finalize", json={"metadata": {"name": "team"},
                                                "spec": {"finalizers": ["kubernetes", "example.com/more"]}})
    assert more.status_code == 422 and "cannot be added" in more.get_json()["message"]
    dry_more = api.put(NS + "/team/finalize?dryRun=All",
                       json={"metadata": {"name": "team"}, "spec": {"finalizers": ["kubernetes", "example.com/x"]}})
    assert dry_more.status_code == 422 and "cannot be added" in dry_more.get_json()["message"], \
        "a dry run refuses what the store would"
    held_more = api.put(NS + "/team/configmaps/held?dryRun=All",
                        json={"metadata": {"name": "held", "finalizers": ["example.com/hold", "example.com/x"]}})
    assert held_more.status_code == 422, held_more.get_json()
    assert held_more.get_json()["message"] == ('metadata.finalizers: example.com/x cannot be added: configmaps '
                                               '"held" in namespace team is being deleted')
    dry_done = api.put(NS + "/team/finalize?dryRun=All", json={"metadata": {"name": "team"}, "spec": {"finalizers": []}})
    assert dry_done.status_code == 200 and dry_done.get_json()["spec"]["finalizers"] == []
    other = api.put(NS + "/team/finalize", json={"metadata": {"name": "other"}, "spec": {"finalizers": []}})
    assert other.status_code == 400
    assert api.get(NS + "/team").status_code == 200, "refusals changed nothing"

    # What an operator does with a namespace stuck on someone's finalizer: finalize it by hand.
    labels = {"metadata": {"name": "team", "labels": {"ignored": "yes"}}, "spec": {"finalizers": []}}
    resp = api.put(NS + "/team/finalize", json=labels)
    assert resp.status_code == 200, resp.get_json()
    assert api.get(NS + "/team").status_code == 404
    assert api.get(NS + "/team/configmaps/held").status_code == 404, "nothing outlives its namespace"


def test_finalize_of_a_live_namespace_sets_only_its_spec_finalizers(api):
    resp = api.put(NS + "/team/finalize", json={"metadata": {"name": "team", "labels": {"x": "y"}},
                                                "spec": {"finalizers": []}})
    assert resp.status_code == 200
    ns = api.get(NS + "/team").get_json()
    assert ns["spec"]["finalizers"] == [] and "labels" not in ns["metadata"]
    # A later delete puts the controller's finalizer back: deletion still goes through it.
    assert api.delete(NS + "/team").get_json()["spec"]["finalizers"] == ["kubernetes"]


def test_discovery_names_the_finalize_subresource(api):
    resources = api.get("/api/v1").get_json()["resources"]
    assert {"name": "namespaces/finalize", "verbs": ["update"]}.items() <= \
        next(r for r in resources if r["name"] == "namespaces/finalize").items()


def test_a_put_of_a_terminating_namespace_keeps_its_phase_and_conditions(api):
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    assert api.post(NS + "/team/configmaps", json=held).status_code == 201
    api.delete(NS + "/team")
    with pytest.raises(Retry):
        api.controller.reconcile("team")
    before = api.get(NS + "/team").get_json()
    resp = api.put(NS + "/team", json={"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "team", "labels": {"owner": "ops"}}})
    assert resp.status_code == 200, resp.get_json()
    after = api.get(NS + "/team").get_json()
    assert after["status"] == before["status"] and after["status"]["phase"] == "Terminating"
    assert after["spec"]["finalizers"] == ["kubernetes"] and after["metadata"]["labels"] == {"owner": "ops"}
    dry = api.put(NS + "/team?dryRun=All", json={"metadata": {"name": "team"}, "spec": {"finalizers": []}})
    assert dry.get_json()["spec"]["finalizers"] == ["kubernetes"], "a dry run answers as the store would"


def test_a_new_namespace_starts_active_whatever_its_body_says(api):
    body = {"metadata": {"name": "odd"}, "status": {"phase": "Terminating", "conditions": [{"type": "Made"}]}}
    resp = api.post(NS, json=body)
    assert resp.status_code == 201, resp.get_json()
    assert api.get(NS + "/odd").get_json()["status"] == {"phase": "Active"}
    assert api.post(NS + "/odd/configmaps", json={"metadata": {"name": "c"}}).status_code == 201


def test_dry_run_deletes_answer_as_the_store_would(api):
    held = {"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}
    assert api.post(NS, json=held).status_code == 201
    for name, query in (("team", ""), ("team", "&propagationPolicy=Foreground"), ("held", "")):
        dry = api.delete(NS + "/%s?dryRun=All%s" % (name, query))
        assert dry.status_code == 200, (name, query, dry.get_json())
        answer = dry.get_json()
        assert answer["status"]["phase"] == "Terminating" and answer["spec"]["finalizers"] == ["kubernetes"]
        assert answer["metadata"]["deletionTimestamp"]
        assert "foregroundDeletion" not in (answer["metadata"].get("finalizers") or []), "not for namespaces"
        assert "deletionTimestamp" not in api.get(NS + "/" + name).get_json()["metadata"], "nothing stored"
    assert api.delete(NS + "/default?dryRun=All").status_code == 403
    assert api.delete(NS + "/team").status_code == 200
    again = api.delete(NS + "/team?dryRun=All")
    assert again.status_code == 409 and "ensuring all content is removed" in again.get_json()["message"]
    # Foreground on another kind: the store adds foregroundDeletion, and so does the dry run's answer
    assert api.post(NS + "/held/configmaps", json={"metadata": {"name": "fg"}}).status_code == 201
    fg = api.delete(NS + "/held/configmaps/fg?dryRun=All&propagationPolicy=Foreground")
    assert fg.status_code == 200 and fg.get_json()["metadata"]["finalizers"] == ["foregroundDeletion"]
    real = api.delete(NS + "/held/configmaps/fg?propagationPolicy=Foreground")
    assert real.get_json()["metadata"]["finalizers"] == ["foregroundDeletion"]
