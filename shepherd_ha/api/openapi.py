"""GET /openapi/v3 (the index), /openapi/v3/<group-version> and /openapi/v2.

What kubectl 1.32 does with them:
- create/apply/replace/edit validate by default (fieldValidation=Strict). kubectl
  first asks the v3 document of the object's group version whether the PATCH
  operation of its kind takes a `fieldValidation` parameter; ours does, so kubectl
  leaves validation to the server (api/write_options.py) and never downloads v2.
- client-side apply computes its strategic merge patch from the v3 schema of the
  kind when the PATCH operation accepts application/strategic-merge-patch+json,
  reading x-kubernetes-patch-merge-key/-strategy (model/patch_strategies.py).
- explain reads the v3 schemas (types, descriptions).
- v2 is only ever asked for as protobuf (gnostic's OpenAPIv2 Document) by client-go;
  we serve v2 as JSON and answer a protobuf-only Accept with 406, which kubectl only
  meets when v3 failed first.

The documents are generated once per process (they only change with the code) and
served with an ETag; the index names each document by the hash of its content, as
Kubernetes does, so clients may cache them for good.
"""
import functools
import hashlib
import json

from flask import Response, request

from shepherd_ha.model.openapi_schema import (INT_OR_STRING, INT_OR_STRING_SCHEMA, definition_name, kind_schema,
                                              list_schema)
from shepherd_ha.model.resources import RESOURCES

from .errors import ApiError
from .media import accepts
from .version import KUBERNETES_VERSION

_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json", "application/apply-patch+yaml")
_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_LIST_PARAMS = ("labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "resourceVersionMatch",
                "watch", "allowWatchBookmarks", "sendInitialEvents", "timeoutSeconds")
_PARAM_TEXT = {
    "dryRun": "All: validate, default and admit the request, store nothing.",
    "fieldManager": "The name of the actor making the change, recorded in managedFields.",
    "fieldValidation": "Ignore, Warn or Strict (the default for kubectl): what an unknown or duplicate field "
                       "does.",
    "force": "Server-side apply: take the fields another manager owns instead of a conflict.",
    "limit": "The most items to return; the rest come with metadata.continue.",
    "continue": "The token of the previous page's metadata.continue.",
}


def _param(name, where="query", schema_type="string"):
    param = {"name": name, "in": where, "schema": {"type": schema_type, "uniqueItems": True}}
    if name in _PARAM_TEXT:
        param["description"] = _PARAM_TEXT[name]
    if where == "path":
        param["required"] = True
    return param


def _ref(name):
    return {"$ref": "#/components/schemas/" + name}


def _body(ref, types=("application/json", "application/yaml")):
    return {"content": {t: {"schema": ref} for t in types}, "required": True}


def _answer(ref):
    return {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}


def _operations(r):
    gvk = {"group": r.group, "version": r.version, "kind": r.kind}
    item, items = _ref(definition_name(r)), _ref(definition_name(r, r.list_kind))
    path_params = [_param("namespace", "path")] if r.namespaced else []

    def op(action, verb, params, answer, body=None):
        out = {"operationId": "%s%s" % (verb, r.kind), "x-kubernetes-action": action,
               "x-kubernetes-group-version-kind": gvk, "parameters": path_params + params, "responses": answer}
        if body:
            out["requestBody"] = body
        return out

    writes = [_param(p) for p in _WRITE_PARAMS]
    collection = {"get": op("list", "list", [_param(p) for p in _LIST_PARAMS], _answer(items)),
                  "post": op("post", "create", writes, _answer(item), _body(item))}
    named = [_param("name", "path")]
    one = {"get": op("get", "read", named, _answer(item)),
           "put": op("put", "replace", named + writes, _answer(item), _body(item)),
           "patch": op("patch", "patch", named + writes + [_param("force", schema_type="boolean")], _answer(item),
                       _body({"type": "object"}, _PATCH_TYPES)),
           "delete": op("delete", "delete", named + [_param("dryRun")], _answer(item))}
    base = r.collection_path("{namespace}" if r.namespaced else None)
    paths = {base: collection, base + "/{name}": one}
    for sub in r.subresources:
        if sub == "status":
            paths[base + "/{name}/status"] = {k: dict(v, operationId=v["operationId"] + "Status")
                                              for k, v in one.items() if k != "delete"}
    return paths


def _gv_key(api_version):
    return "api/v1" if api_version == "v1" else "apis/" + api_version


@functools.lru_cache(maxsize=None)
def v3_documents():
    """{"api/v1": document, "apis/apps/v1": ...} (generated once)."""
    docs = {}
    for r in sorted(RESOURCES.values(), key=lambda r: r.plural):
        doc = docs.setdefault(_gv_key(r.api_version), {
            "openapi": "3.0.0", "info": {"title": "Shepherd HA", "version": "v%d.%d.%d" % KUBERNETES_VERSION},
            "paths": {}, "components": {"schemas": {}}})
        doc["paths"].update(_operations(r))
        schemas = doc["components"]["schemas"]
        schemas[INT_OR_STRING] = INT_OR_STRING_SCHEMA
        schemas[definition_name(r)] = kind_schema(r)
        schemas[definition_name(r, r.list_kind)] = list_schema(r, "#/components/schemas/" + definition_name(r))
    return {key: _encoded(doc) for key, doc in docs.items()}


def _encoded(doc):
    raw = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    return raw, hashlib.sha512(raw).hexdigest().upper()


@functools.lru_cache(maxsize=None)
def v3_index():
    return json.dumps({"paths": {key: {"serverRelativeURL": "/openapi/v3/%s?hash=%s" % (key, digest)}
                                 for key, (_, digest) in sorted(v3_documents().items())}}).encode()


@functools.lru_cache(maxsize=None)
def v2_document():
    """Swagger 2.0: the same schemas, with #/definitions references."""
    definitions, paths = {}, {}
    for key, (raw, _) in v3_documents().items():
        doc = json.loads(raw.decode().replace("#/components/schemas/", "#/definitions/"))
        definitions.update(doc["components"]["schemas"])
        for path, operations in doc["paths"].items():
            paths[path] = {verb: _v2_operation(op) for verb, op in operations.items()}
    swagger = {"swagger": "2.0", "info": {"title": "Shepherd HA", "version": "v%d.%d.%d" % KUBERNETES_VERSION},
               "paths": paths, "definitions": definitions}
    return _encoded(swagger)


def _v2_operation(op):
    out = {k: v for k, v in op.items() if k not in ("requestBody", "responses", "parameters")}
    params = []
    for p in op["parameters"]:
        params.append({"name": p["name"], "in": p["in"], "type": p["schema"]["type"],
                       "required": p.get("required", False), "description": p.get("description", "")})
    if "requestBody" in op:
        content = op["requestBody"]["content"]
        out["consumes"] = sorted(content)
        params.append({"name": "body", "in": "body", "required": True,
                       "schema": next(iter(content.values()))["schema"]})
    out["parameters"] = params
    out["produces"] = ["application/json"]
    out["responses"] = {"200": {"description": "OK", "schema": op["responses"]["200"]["content"]
                                ["application/json"]["schema"]}}
    return out


def _json_only():
    """406 unless the Accept header takes JSON (client-go asks v2 as protobuf only)."""
    ranges = accepts(request.headers.get("Accept"))
    if ranges and not any(m.type in ("application/json", "*/*", "application/*") for m in ranges):
        raise ApiError(406, "this server serves its OpenAPI documents as application/json only (asked for: %s)"
                       % request.headers.get("Accept"), "NotAcceptable")


def _serve(raw, digest, immutable):
    etag = '"%s"' % digest
    if request.headers.get("If-None-Match") == etag:
        return Response(status=304, headers={"ETag": etag})
    response = Response(raw, content_type="application/json")
    response.headers["ETag"] = etag
    response.headers["Cache-Control"] = "public, immutable" if immutable else "no-cache, private"
    return response


def register(app):
    @app.get("/openapi/v3")
    def openapi_v3_index():
        _json_only()
        raw = v3_index()
        return _serve(raw, hashlib.sha512(raw).hexdigest().upper(), False)

    @app.get("/openapi/v3/<path:group_version>")
    def openapi_v3_document(group_version):
        _json_only()
        docs = v3_documents()
        if group_version not in docs:
            raise ApiError(404, "no OpenAPI document for %r: GET /openapi/v3 lists them (%s)"
                           % (group_version, ", ".join(sorted(docs))))
        raw, digest = docs[group_version]
        # A URL carrying the current hash names content that never changes.
        return _serve(raw, digest, request.args.get("hash") == digest)

    @app.get("/openapi/v2")
    def openapi_v2():
        _json_only()
        raw, digest = v2_document()
        return _serve(raw, digest, False)
