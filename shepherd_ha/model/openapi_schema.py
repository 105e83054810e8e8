"""OpenAPI schemas of our kinds, generated from the one table of their fields
(model/known_fields.py) plus how their lists merge (model/patch_strategies.py).

known_fields.py says which fields exist; this module adds what a schema needs
beyond that: each scalar's type (from the field's name, tables below) and a
description for the fields a person is most likely to `kubectl explain`. The
descriptions are our own wording, written for this project (none copied from
upstream). The result is an OpenAPI 3 schema object per kind, with
`x-kubernetes-group-version-kind` and the patch/list extensions kubectl's
strategic-merge patch builder and server-side apply read.
"""
from . import known_fields as kf
from .patch_strategies import STRATEGIES

_STRING_LISTS = {"command", "args", "finalizers", "clusterIPs", "ipFamilies", "externalIPs", "podCIDRs",
                 "nameservers", "searches", "values", "apiGroups", "resources", "verbs", "resourceNames",
                 "nonResourceURLs", "add", "drop"}
_INT_LISTS = {"supplementalGroups"}
_INTEGERS = {"replicas", "revisionHistoryLimit", "minReadySeconds", "progressDeadlineSeconds", "containerPort",
             "hostPort", "nodePort", "generation", "deletionGracePeriodSeconds", "terminationGracePeriodSeconds",
             "activeDeadlineSeconds", "initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
             "failureThreshold", "runAsUser", "runAsGroup", "fsGroup", "defaultMode", "mode", "restartCount",
             "observedGeneration", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas",
             "collisionCount", "count", "leaseDurationSeconds", "leaseTransitions", "revision", "Port", "port"}
_INT_OR_STRING = {"targetPort", "maxSurge", "maxUnavailable"}
_BOOLEANS = {"controller", "blockOwnerDeletion", "optional", "runAsNonRoot", "privileged",
             "allowPrivilegeEscalation", "readOnlyRootFilesystem", "readOnly", "hostNetwork", "hostPID", "hostIPC",
             "ready", "started", "paused", "unschedulable", "immutable", "publishNotReadyAddresses"}
_TIMES = {"creationTimestamp", "deletionTimestamp", "lastTransitionTime", "lastHeartbeatTime", "lastProbeTime",
          "lastUpdateTime", "startTime", "firstTimestamp", "lastTimestamp", "eventTime", "acquireTime",
          "renewTime", "time"}
# MAP fields whose values are strings (the others hold anything: fieldRef, targetRef...).
_STRING_MAPS = {"labels", "annotations", "data", "stringData", "binaryData", "nodeSelector", "requests", "limits",
                "capacity", "allocatable", "nodeInfo", "matchLabels", "selector"}
# A port of a probe may be a name: the only place `port` is not a plain integer.
_PROBE_PORTS = (".httpGet.port", ".tcpSocket.port")

# Own descriptions, keyed by dotted path (list items transparent) or by field name.
_BY_PATH = {
    "metadata": "Standard object metadata: name, namespace, labels, annotations, owners, and what the server "
                "sets (uid, resourceVersion, generation, creationTimestamp, managedFields).",
    "spec": "The desired state of the object, as its owner asks for it.",
    "status": "The observed state of the object, written by the cluster's controllers and agents. Read-only "
              "for users.",
    "spec.containers": "The containers of the pod. There must be at least one; each has a unique name.",
    "spec.template.spec.containers": "The containers of each pod. There must be at least one; each has a unique "
                                     "name.",
    "spec.template": "The pod template: the metadata and spec every pod of this deployment is made from.",
    "spec.selector": "The label query picking the objects this one manages.",
    "spec.replicas": "How many pods are wanted. Defaults to 1.",
    "spec.strategy": "How pods are replaced with new ones when the template changes (RollingUpdate or Recreate).",
    "spec.volumes": "Volumes the pod's containers can mount: configMap, secret, emptyDir, hostPath.",
    "spec.nodeName": "The node the pod runs on: set by the scheduler, or by the user to bypass it.",
    "spec.restartPolicy": "Always, OnFailure or Never. Defaults to Always.",
    "spec.ports": "The ports the service exposes.",
    "spec.type": "ClusterIP (the default), NodePort, or Headless by clusterIP None.",
    "data": "Key/value data.",
}
_BY_NAME = {
    "apiVersion": "The versioned schema of this representation of the object (group/version).",
    "kind": "The kind of this object, in CamelCase.",
    "name": "The name: unique within its namespace (or cluster, for cluster-scoped kinds) per kind.",
    "namespace": "The namespace the object lives in.",
    "labels": "String keys and values to organize and select objects.",
    "annotations": "String keys and values for tools to store data on the object; not used to select.",
    "image": "The container image to run, e.g. nginx:1.27.",
    "env": "Environment variables of the container, by name.",
    "ports": "Ports to expose.",
    "command": "The entrypoint, replacing the image's ENTRYPOINT. Not run in a shell.",
    "args": "Arguments to the entrypoint, replacing the image's CMD.",
    "resources": "Compute resources: requests (what scheduling reserves) and limits (what the runtime caps).",
    "volumeMounts": "Volumes to mount into the container's filesystem.",
    "livenessProbe": "A periodic check; the container is restarted when it fails.",
    "readinessProbe": "A periodic check; the pod receives service traffic only while it passes.",
    "containerPort": "The port number the container listens on.",
    "uid": "The unique id the server gives the object at creation.",
    "resourceVersion": "The object's version in the store, for optimistic concurrency and watches.",
    "conditions": "The latest observations of the object's state.",
}


def _scalar(path, name):
    if name in _STRING_LISTS:
        return {"type": "array", "items": {"type": "string"}}
    if name in _INT_LISTS:
        return {"type": "array", "items": {"type": "integer", "format": "int64"}}
    if name in _INT_OR_STRING or path.endswith(_PROBE_PORTS):
        return {"allOf": [{"$ref": "#/components/schemas/" + INT_OR_STRING}]}
    if name in _INTEGERS:
        return {"type": "integer", "format": "int32"}
    if name in _BOOLEANS:
        return {"type": "boolean"}
    if name in _TIMES:
        return {"type": "string", "format": "date-time"}
    return {"type": "string"}


INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
INT_OR_STRING_SCHEMA = {"format": "int-or-string", "x-kubernetes-int-or-string": True,
                        "description": "A number or a string (a port name, a percentage)."}


def _list_extensions(strategy):
    if strategy is None:
        return {}
    if strategy.kind == "set":
        return {"x-kubernetes-list-type": "set", "x-kubernetes-patch-strategy": "merge"}
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(strategy.keys),
            "x-kubernetes-patch-merge-key": strategy.keys[0], "x-kubernetes-patch-strategy": "merge"}


def _describe(schema, path, name):
    text = _BY_PATH.get(path) or _BY_NAME.get(name)
    if text:
        schema["description"] = text
    return schema


def _convert(plural, schema, path, name):
    strategies = STRATEGIES.get(plural, {})
    if schema is kf.ANY:
        out = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    elif schema is kf.MAP:
        out = {"type": "object", "additionalProperties": {"type": "string"}} if name in _STRING_MAPS else \
            {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    elif isinstance(schema, list):
        out = {"type": "array", "items": _convert(plural, schema[0], path, name)}
        out["items"].pop("description", None)
        out.update(_list_extensions(strategies.get(path)))
    elif isinstance(schema, dict):
        out = {"type": "object", "properties": {
            key: _convert(plural, sub, "%s.%s" % (path, key) if path else key, key)
            for key, sub in sorted(schema.items())}}
    else:
        out = _scalar(path, name)
        if out.get("type") == "array":
            out.update(_list_extensions(strategies.get(path)))
    return _describe(out, path, name)


def kind_schema(resource):
    """The OpenAPI 3 schema of one kind (a model/resources.Resource)."""
    out = _convert(resource.plural, kf.SCHEMAS[resource.plural], "", "")
    out["description"] = "A %s (%s), as Shepherd HA serves it." % (resource.kind, resource.api_version)
    out["x-kubernetes-group-version-kind"] = [
        {"group": resource.group, "kind": resource.kind, "version": resource.version}]
    return out


def list_schema(resource, item_ref):
    return {"type": "object", "description": "A list of %s objects." % resource.kind,
            "required": ["items"],
            "properties": {"apiVersion": _convert("", kf.SCALAR, "apiVersion", "apiVersion"),
                           "kind": _convert("", kf.SCALAR, "kind", "kind"),
                           "metadata": {"type": "object", "properties": {
                               "resourceVersion": {"type": "string"}, "continue": {"type": "string"},
                               "remainingItemCount": {"type": "integer", "format": "int64"}}},
                           "items": {"type": "array", "items": {"$ref": item_ref}}},
            "x-kubernetes-group-version-kind": [
                {"group": resource.group, "kind": resource.list_kind, "version": resource.version}]}


def definition_name(resource, kind=None):
    """io.k8s.api.<group>.<version>.<Kind>, as Kubernetes names its definitions."""
    group = resource.group.split(".")[0] if resource.group else "core"
    return "io.k8s.api.%s.%s.%s" % (group, resource.version, kind or resource.kind)
