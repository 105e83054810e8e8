"""API discovery, derived from the registry (model/resources.py) and nothing else.

Legacy shapes: /api (APIVersions), /api/v1 and /apis/{group}/{version}
(APIResourceList), /apis (APIGroupList), /apis/{group} (APIGroup). Aggregated
discovery (apidiscovery.k8s.io/v2, and v2beta1 for older clients) on /api and /apis
when the Accept header asks for it, as kubectl 1.32 does first: one request then
describes every resource of every group.
"""
from flask import Response, request

from shepherd_ha.model.resources import RESOURCES

from . import pod_metrics, resource_metrics

from .bodies import dumps
from .errors import ApiError
from .media import accepts

# What api/objects.py serves: a collection takes GET (list, watch) and POST; an item
# GET, PUT, PATCH and DELETE. There is no DELETE on a collection (deletecollection).
RESOURCE_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
SUBRESOURCE_VERBS = {"status": ("get", "patch", "update"), "scale": ("get", "patch", "update"),
                     "log": ("get",), "eviction": ("create",), "finalize": ("update",)}
# The kind a subresource answers with, when it is not the resource's own kind.
SUBRESOURCE_KINDS = {"scale": ("autoscaling", "v1", "Scale"), "eviction": ("policy", "v1", "Eviction")}

DISCOVERY_GROUP = "apidiscovery.k8s.io"
# What discovery lists: the stored kinds, and the read-only metrics.k8s.io ones.
SERVED = dict(RESOURCES, **resource_metrics.RESOURCES, **pod_metrics.RESOURCES)
AGGREGATED_VERSIONS = ("v2", "v2beta1")


def _scope(r):
    return "Namespaced" if r.namespaced else "Cluster"


def group_versions(resources=None):
    """{group: [version, ...]} of the served resources; "" is the core group."""
    out = {}
    for r in (resources or SERVED).values():
        versions = out.setdefault(r.group, [])
        if r.version not in versions:
            versions.append(r.version)
    return out


def _of(group, version, resources=None):
    return sorted((r for r in (resources or SERVED).values() if r.group == group and r.version == version),
                  key=lambda r: r.plural)


def api_resource_list(group, version, resources=None):
    """APIResourceList of one group version (legacy discovery), None if not served."""
    served = _of(group, version, resources)
    if not served:
        return None
    entries = []
    for r in served:
        entry = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
                 "verbs": list(r.verbs or RESOURCE_VERBS)}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        if r.categories:
            entry["categories"] = list(r.categories)
        entries.append(entry)
        for sub in r.subresources:
            sub_entry = {"name": "%s/%s" % (r.plural, sub), "singularName": "", "namespaced": r.namespaced,
                         "kind": r.kind, "verbs": list(SUBRESOURCE_VERBS[sub])}
            if sub in SUBRESOURCE_KINDS:
                sub_group, sub_version, sub_kind = SUBRESOURCE_KINDS[sub]
                sub_entry.update(group=sub_group, version=sub_version, kind=sub_kind)
            entries.append(sub_entry)
    group_version = "%s/%s" % (group, version) if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries}


def api_versions(server_address):
    return {"kind": "APIVersions", "versions": group_versions().get("", []),
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group(name, resources=None):
    versions = group_versions(resources).get(name)
    if not name or not versions:
        return None
    entries = [{"groupVersion": "%s/%s" % (name, v), "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": entries,
            "preferredVersion": entries[0]}


def api_group_list(resources=None):
    names = sorted(g for g in group_versions(resources) if g)
    groups = []
    for name in names:
        group = api_group(name, resources)
        del group["kind"], group["apiVersion"]
        groups.append(group)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _aggregated_resource(r):
    entry = {"resource": r.plural, "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
             "scope": _scope(r), "singularResource": r.singular, "verbs": list(r.verbs or RESOURCE_VERBS)}
    if r.short_names:
        entry["shortNames"] = list(r.short_names)
    if r.categories:
        entry["categories"] = list(r.categories)
    subs = []
    for sub in r.subresources:
        group, version, kind = SUBRESOURCE_KINDS.get(sub, (r.group, r.version, r.kind))
        subs.append({"subresource": sub, "responseKind": {"group": group, "version": version, "kind": kind},
                     "verbs": list(SUBRESOURCE_VERBS[sub])})
    if subs:
        entry["subresources"] = subs
    return entry


def aggregated_discovery(legacy, version="v2", resources=None):
    """APIGroupDiscoveryList: the core group (legacy=True, for /api) or every named
    group (for /apis)."""
    items = []
    for group, versions in sorted(group_versions(resources).items()):
        if (group == "") != legacy:
            continue
        items.append({"metadata": {"name": group} if group else {},
                      "versions": [{"version": v, "freshness": "Current",
                                    "resources": [_aggregated_resource(r) for r in _of(group, v, resources)]}
                                   for v in versions]})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "%s/%s" % (DISCOVERY_GROUP, version),
            "metadata": {}, "items": items}


def _json(body, content_type="application/json"):
    return Response(dumps(body), content_type=content_type)


def _aggregated_version():
    """The aggregated discovery version the Accept header asks for first, or None."""
    for media in accepts(request.headers.get("Accept")):
        params = media.params
        if media.type in ("application/json", "*/*", "application/*") and params.get("as") == "APIGroupDiscoveryList" \
                and params.get("g") == DISCOVERY_GROUP and params.get("v") in AGGREGATED_VERSIONS:
            return params["v"]
        if media.type in ("application/json", "*/*", "application/*") and "as" not in params:
            return None     # plain JSON preferred before any aggregated form
    return None


def _discovery(legacy, plain):
    version = _aggregated_version()
    if version is None:
        return _json(plain())
    return _json(aggregated_discovery(legacy, version),
                 "application/json;g=%s;v=%s;as=APIGroupDiscoveryList" % (DISCOVERY_GROUP, version))


def register(app):
    # Each path with a trailing slash too, as Kubernetes serves them: the typed Python client's
    # discovery calls (CoreApi, ApisApi, AppsApi.get_api_group, get_api_resources) add one.
    @app.get("/api")
    @app.get("/api/")
    def core_versions():
        return _discovery(True, lambda: api_versions(request.host))

    @app.get("/apis")
    @app.get("/apis/")
    def groups():
        return _discovery(False, api_group_list)

    @app.get("/api/v1")
    @app.get("/api/v1/")
    def core_resources():
        return _json(api_resource_list("", "v1"))

    @app.get("/apis/<group>")
    @app.get("/apis/<group>/")
    def one_group(group):
        body = api_group(group)
        if body is None:
            raise ApiError(404, "the server does not serve the API group %r (it serves: %s)"
                           % (group, ", ".join(sorted(g for g in group_versions() if g))))
        return _json(body)

    @app.get("/apis/<group>/<version>")
    @app.get("/apis/<group>/<version>/")
    def group_resources(group, version):
        body = api_resource_list(group, version)
        if body is None:
            raise ApiError(404, "the server does not serve %s/%s (it serves: %s)"
                           % (group, version, ", ".join(sorted(r.api_version for r in SERVED.values()
                                                               if r.group))))
        return _json(body)
