"""Discovery documents and /version (shepherd_ha/api/discovery.py, version.py): every
kind of the registry appears once, with the names, verbs, scope and subresources the
API really serves; the Accept header picks the aggregated or the legacy shape."""
import pytest
from flask import Flask

from shepherd_ha.api import discovery
from shepherd_ha.api.errors import ApiError, error_response
from shepherd_ha.api.media import accepts
from shepherd_ha.api.version import version_info
from shepherd_ha.api.discovery import SERVED as RESOURCES  # the stored kinds and metrics.k8s.io
from shepherd_ha.model.resources import Resource

KUBECTL_DISCOVERY_ACCEPT = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                            "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
                            "application/json")


@pytest.fixture
def client():
    app = Flask("t")
    app.register_error_handler(ApiError, error_response)     # as api/app.py does
    discovery.register(app)
    return app.test_client()


def _legacy_entries():
    out = {}
    for group, versions in discovery.group_versions().items():
        for v in versions:
            doc = discovery.api_resource_list(group, v)
            for entry in doc["resources"]:
                out[(doc["groupVersion"], entry["name"])] = entry
    return out


def test_every_registered_kind_and_subresource_is_listed_once_in_its_group_version():
    entries = _legacy_entries()
    expected = set()
    for r in RESOURCES.values():
        expected.add((r.api_version, r.plural))
        expected.update((r.api_version, "%s/%s" % (r.plural, s)) for s in r.subresources)
    assert set(entries) == expected
    pods = entries[("v1", "pods")]
    assert pods == {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod",
                    "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                    "shortNames": ["po"], "categories": ["all"]}
    assert entries[("v1", "pods/log")]["verbs"] == ["get"]
    assert entries[("apps/v1", "deployments/scale")]["kind"] == "Scale"
    assert entries[("apps/v1", "deployments/scale")]["group"] == "autoscaling"
    assert entries[("v1", "nodes")]["namespaced"] is False
    # kubectl's short names and the `all` category
    short = {name: e.get("shortNames") for (gv, name), e in entries.items() if not gv.startswith("metrics.")}
    assert short["deployments"] == ["deploy"] and short["services"] == ["svc"] and short["nodes"] == ["no"]
    assert short["namespaces"] == ["ns"] and short["configmaps"] == ["cm"] and short["endpoints"] == ["ep"]
    assert short["events"] == ["ev"]
    in_all = sorted(name for (_, name), e in entries.items() if "all" in e.get("categories", ()))
    assert in_all == ["deployments", "pods", "replicasets", "services"]


def test_a_new_kind_in_the_registry_appears_everywhere_without_more_code():
    extra = dict(RESOURCES, widgets=Resource("widgets", "Widget", "example.io/v2", False, ("status",), ("wd",)))
    assert discovery.group_versions(extra)["example.io"] == ["v2"]
    doc = discovery.api_resource_list("example.io", "v2", extra)
    assert [e["name"] for e in doc["resources"]] == ["widgets", "widgets/status"]
    assert doc["groupVersion"] == "example.io/v2"
    assert "example.io" in [g["name"] for g in discovery.api_group_list(extra)["groups"]]
    agg = discovery.aggregated_discovery(False, resources=extra)
    group = [i for i in agg["items"] if i["metadata"]["name"] == "example.io"][0]
    res = group["versions"][0]["resources"][0]
    assert res["scope"] == "Cluster" and res["shortNames"] == ["wd"]
    assert res["subresources"] == [{"subresource": "status", "verbs": ["get", "patch", "update"],
                                    "responseKind": {"group": "example.io", "version": "v2", "kind": "Widget"}}]


def test_aggregated_discovery_holds_the_core_group_on_api_and_the_others_on_apis():
    core = discovery.aggregated_discovery(True)
    assert core["apiVersion"] == "apidiscovery.k8s.io/v2" and core["kind"] == "APIGroupDiscoveryList"
    assert [i["metadata"] for i in core["items"]] == [{}]
    core_resources = {r["resource"]: r for r in core["items"][0]["versions"][0]["resources"]}
    assert set(core_resources) == {r.plural for r in RESOURCES.values() if r.api_version == "v1"}
    assert core_resources["pods"]["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert core_resources["pods"]["scope"] == "Namespaced"
    assert [s["subresource"] for s in core_resources["pods"]["subresources"]] == ["status", "log", "eviction"]
    # kubectl drain evicts (rather than deletes) only when discovery shows pods/eviction as policy/v1 Eviction
    assert core_resources["pods"]["subresources"][2] == {
        "subresource": "eviction", "verbs": ["create"],
        "responseKind": {"group": "policy", "version": "v1", "kind": "Eviction"}}
    legacy = {r["name"]: r for r in discovery.api_resource_list("", "v1")["resources"]}
    assert (legacy["pods/eviction"]["group"], legacy["pods/eviction"]["version"], legacy["pods/eviction"]["kind"]) \
        == ("policy", "v1", "Eviction")
    named = discovery.aggregated_discovery(False)
    assert sorted(i["metadata"]["name"] for i in named["items"]) == sorted(
        {r.api_version.split("/")[0] for r in RESOURCES.values() if "/" in r.api_version})
    apps = [i for i in named["items"] if i["metadata"]["name"] == "apps"][0]
    assert apps["versions"][0]["freshness"] == "Current"
    assert {r["resource"] for r in apps["versions"][0]["resources"]} == {"deployments", "replicasets",
                                                                          "controllerrevisions"}


def test_the_accept_header_chooses_the_shape_and_the_content_type_says_which(client):
    agg = client.get("/api", headers={"Accept": KUBECTL_DISCOVERY_ACCEPT})
    assert agg.status_code == 200
    assert agg.headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    assert agg.get_json()["kind"] == "APIGroupDiscoveryList"
    older = client.get("/apis", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2beta1;"
                                                   "as=APIGroupDiscoveryList,application/json"})
    assert older.get_json()["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert "v=v2beta1" in older.headers["Content-Type"]
    for accept in (None, "application/json", "application/json,application/json;g=apidiscovery.k8s.io;v=v2;"
                   "as=APIGroupDiscoveryList", "application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList"):
        legacy = client.get("/api", headers={"Accept": accept} if accept else {})
        assert legacy.headers["Content-Type"] == "application/json"
        body = legacy.get_json()
        assert body["kind"] == "APIVersions" and body["versions"] == ["v1"]
        assert body["serverAddressByClientCIDRs"][0]["clientCIDR"] == "0.0.0.0/0"
    groups = client.get("/apis").get_json()
    assert groups["kind"] == "APIGroupList"
    assert {g["name"]: g["preferredVersion"]["groupVersion"] for g in groups["groups"]} == \
        {"apps": "apps/v1", "coordination.k8s.io": "coordination.k8s.io/v1",
         "rbac.authorization.k8s.io": "rbac.authorization.k8s.io/v1", "metrics.k8s.io": "metrics.k8s.io/v1beta1"}


def test_group_and_group_version_documents_and_their_404s(client):
    assert client.get("/api/v1").get_json()["groupVersion"] == "v1"
    apps = client.get("/apis/apps").get_json()
    assert apps["kind"] == "APIGroup" and apps["versions"] == [{"groupVersion": "apps/v1", "version": "v1"}]
    assert client.get("/apis/apps/v1").get_json()["kind"] == "APIResourceList"
    missing = client.get("/apis/batch")
    assert missing.status_code == 404 and "apps" in missing.get_json()["message"]
    missing = client.get("/apis/apps/v2")
    assert missing.status_code == 404 and "apps/v1" in missing.get_json()["message"]


def test_accept_parsing_keeps_order_and_honours_q():
    ranges = accepts("application/yaml;q=0.5, application/json;as=Table;v=v1;g=meta.k8s.io, */*;q=0")
    assert [m.type for m in ranges] == ["application/json", "application/yaml"]
    assert ranges[0].params == {"as": "Table", "v": "v1", "g": "meta.k8s.io"}
    assert accepts(None) == [] and accepts("") == []


def test_version_is_what_kubectl_parses():
    info = version_info("r2")
    assert info["major"] == "1" and info["minor"] == "32"
    assert info["gitVersion"].startswith("v1.32.0-shepherd.")
    for key in ("gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"):
        assert isinstance(info[key], str)
    assert info["platform"].count("/") == 1
    assert info["replica"] == "r2" and info["version"]


def test_version_with_a_trailing_slash_is_served_to_anyone_as_kubernetes_does():
    """The typed Python client's VersionApi.get_code() asks for /version/ (Kubernetes serves both)."""
    from real_api import flask_client
    app, _ = flask_client(users={"admin": ["system:masters"]})
    for path in ("/version", "/version/"):
        reply = app.get(path)                      # no token: version info is public
        assert reply.status_code == 200, (path, reply.data)
        assert reply.get_json()["gitVersion"].startswith("v1.32.0-shepherd."), path
    assert app.get("/versions").status_code == 401


def test_every_discovery_path_is_served_with_a_trailing_slash_too(client):
    """The typed Python client asks for /api/, /apis/, /api/v1/, /apis/apps/ and /apis/apps/v1/."""
    paths = ["/api", "/apis", "/api/v1"] + ["/apis/" + g for g in discovery.group_versions() if g]
    paths += ["/apis/%s/%s" % (g, v) for g, versions in discovery.group_versions().items() if g for v in versions]
    for path in paths:
        plain, slashed = client.get(path), client.get(path + "/")
        assert plain.status_code == slashed.status_code == 200, (path, slashed.status_code, slashed.data)
        assert plain.get_json() == slashed.get_json(), path
    assert client.get("/apis/nope.example.com/").status_code == 404
    assert client.get("/apis/apps/v9/").status_code == 404
