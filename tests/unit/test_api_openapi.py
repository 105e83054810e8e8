"""The OpenAPI documents (api/openapi.py, model/openapi_schema.py): valid OpenAPI 3.0
and Swagger 2.0 by the spec validators, every kind served with its GVK, the PATCH
operation kubectl's validation probe looks for, the patch/list extensions from
model/patch_strategies.py, and the HTTP side (index hashes, ETag, 406, 404)."""
import json

import pytest
from openapi_spec_validator import validate

from shepherd_ha.api import openapi
from shepherd_ha.model import known_fields
from shepherd_ha.model.resources import RESOURCES
from real_api import flask_client as api_client


def document(gv):
    return json.loads(openapi.v3_documents()[gv][0])


@pytest.mark.parametrize("gv", sorted(openapi.v3_documents()))
def test_each_v3_document_is_valid_openapi_3(gv):
    validate(document(gv))


def test_v2_is_valid_swagger_2():
    validate(json.loads(openapi.v2_document()[0]))


def test_every_kind_has_its_schema_with_gvk_and_a_patch_taking_field_validation():
    for r in RESOURCES.values():
        doc = document("api/v1" if r.api_version == "v1" else "apis/" + r.api_version)
        gvk = {"group": r.group, "version": r.version, "kind": r.kind}
        schemas = [s for s in doc["components"]["schemas"].values()
                   if gvk in s.get("x-kubernetes-group-version-kind", [])]
        assert len(schemas) == 1, r.kind
        assert set(schemas[0]["properties"]) == set(known_fields.SCHEMAS[r.plural]), r.kind
        patches = [p["patch"] for p in doc["paths"].values()
                   if "patch" in p and p["patch"]["x-kubernetes-group-version-kind"] == gvk]
        assert patches, r.kind
        assert "fieldValidation" in {p["name"] for p in patches[0]["parameters"]}
        assert "application/strategic-merge-patch+json" in patches[0]["requestBody"]["content"]


def test_lists_carry_their_merge_keys_and_list_types():
    pod = document("api/v1")["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
    containers = pod["properties"]["spec"]["properties"]["containers"]
    assert containers["x-kubernetes-patch-merge-key"] == "name"
    assert containers["x-kubernetes-patch-strategy"] == "merge"
    assert containers["x-kubernetes-list-type"] == "map" and containers["x-kubernetes-list-map-keys"] == ["name"]
    ports = containers["items"]["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    finalizers = pod["properties"]["metadata"]["properties"]["finalizers"]
    assert finalizers["type"] == "array" and finalizers["x-kubernetes-list-type"] == "set"
    command = containers["items"]["properties"]["command"]
    assert command == {"type": "array", "items": {"type": "string"},
                       "description": command["description"]}     # atomic: no strategy
    assert containers["items"]["properties"]["image"]["type"] == "string"
    spec = document("apis/apps/v1")["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"]
    assert spec["properties"]["replicas"]["type"] == "integer"
    assert spec["properties"]["strategy"]["properties"]["rollingUpdate"]["properties"]["maxSurge"] == {
        "allOf": [{"$ref": "#/components/schemas/" + openapi.INT_OR_STRING}]}


def test_the_index_names_each_document_by_its_hash_and_etags_work():
    client, _ = api_client()
    index = client.get("/openapi/v3").get_json()
    assert set(index["paths"]) == set(openapi.v3_documents())
    url = index["paths"]["apis/apps/v1"]["serverRelativeURL"]
    resp = client.get(url)
    assert resp.status_code == 200 and "immutable" in resp.headers["Cache-Control"]
    assert client.get(url, headers={"If-None-Match": resp.headers["ETag"]}).status_code == 304
    assert client.get("/openapi/v3/apis/nope/v1").status_code == 404
    proto = client.get("/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"})
    assert proto.status_code == 406 and "application/json" in proto.get_json()["message"]
    assert client.get("/openapi/v2", headers={"Accept": "application/json"}).get_json()["swagger"] == "2.0"
