"""The fields each kind has, as a schema the API checks bodies against
(fieldValidation=Strict|Warn|Ignore): an unknown field is refused, warned about or
dropped, and never stored. Mirrors what model/validation.py, pod_validation.py and
status_validation.py check and what our controllers and agents write; the OpenAPI
documents can be generated from the same tables.

A schema is one of: a dict of field name -> schema (an object with those fields);
a one-item list [schema] (a list of such items); MAP (an object with any keys whose
values are scalars: labels, data); ANY (anything: opaque data); SCALAR (a string,
number or bool, or a list of them).
"""
MAP = "map"
ANY = "any"
SCALAR = None

_OWNER_REF = {k: SCALAR for k in ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")}
_MANAGED = {k: SCALAR for k in ("manager", "operation", "apiVersion", "time", "fieldsType", "subresource")}
_MANAGED["fieldsV1"] = ANY
METADATA = {
    **{k: SCALAR for k in ("name", "generateName", "namespace", "uid", "resourceVersion", "generation",
                           "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                           "selfLink")},
    "labels": MAP, "annotations": MAP, "finalizers": SCALAR,
    "ownerReferences": [_OWNER_REF], "managedFields": [_MANAGED],
}

_KEY_REF = {"name": SCALAR, "key": SCALAR, "optional": SCALAR}
_PROFILE = {"type": SCALAR, "localhostProfile": SCALAR}
# Every Kubernetes securityContext field is known, so one the agent cannot enforce
# reaches validation and is refused there by name (model/security_context.py), never
# dropped with a warning as if it were a typo.
_SECURITY_COMMON = {
    **{k: SCALAR for k in ("runAsUser", "runAsGroup", "runAsNonRoot", "seLinuxChangePolicy")},
    "seccompProfile": _PROFILE, "appArmorProfile": _PROFILE, "seLinuxOptions": MAP, "windowsOptions": MAP,
}
_CONTAINER_SECURITY = dict(_SECURITY_COMMON, **{k: SCALAR for k in (
    "privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "procMount")},
    capabilities={"add": SCALAR, "drop": SCALAR})
_POD_SECURITY = dict(_SECURITY_COMMON, **{k: SCALAR for k in (
    "supplementalGroups", "fsGroup", "fsGroupChangePolicy", "supplementalGroupsPolicy")},
    sysctls=[{"name": SCALAR, "value": SCALAR}])
_PROBE = {
    "exec": {"command": SCALAR},
    "httpGet": {"path": SCALAR, "port": SCALAR, "scheme": SCALAR, "host": SCALAR,
                "httpHeaders": [{"name": SCALAR, "value": SCALAR}]},
    "tcpSocket": {"port": SCALAR, "host": SCALAR},
    **{k: SCALAR for k in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold",
                           "failureThreshold")},
}
CONTAINER = {
    **{k: SCALAR for k in ("name", "image", "command", "args", "workingDir", "imagePullPolicy")},
    "ports": [{k: SCALAR for k in ("name", "containerPort", "hostPort", "protocol", "hostIP")}],
    "env": [{"name": SCALAR, "value": SCALAR,
             # fieldRef and resourceFieldRef are known so validation refuses them by name
             "valueFrom": {"configMapKeyRef": _KEY_REF, "secretKeyRef": _KEY_REF, "fieldRef": MAP,
                           "resourceFieldRef": MAP}}],
    "envFrom": [{"prefix": SCALAR, "configMapRef": {"name": SCALAR, "optional": SCALAR},
                 "secretRef": {"name": SCALAR, "optional": SCALAR}}],
    "resources": {"requests": MAP, "limits": MAP},
    "volumeMounts": [{k: SCALAR for k in ("name", "mountPath", "subPath", "readOnly")}],
    "livenessProbe": _PROBE, "readinessProbe": _PROBE, "startupProbe": _PROBE,
    "securityContext": _CONTAINER_SECURITY,
}
_VOLUME = {
    "name": SCALAR,
    "configMap": {"name": SCALAR, "defaultMode": SCALAR, "optional": SCALAR,
                  "items": [{"key": SCALAR, "path": SCALAR, "mode": SCALAR}]},
    "emptyDir": {"medium": SCALAR, "sizeLimit": SCALAR},
    "hostPath": {"path": SCALAR, "type": SCALAR},
    "secret": {"secretName": SCALAR, "defaultMode": SCALAR, "optional": SCALAR,
               "items": [{"key": SCALAR, "path": SCALAR, "mode": SCALAR}]},
    # Known so that validation names them as unsupported sources instead of a silent drop.
    **{k: ANY for k in ("persistentVolumeClaim", "nfs", "projected", "downwardAPI", "csi", "ephemeral",
                        "iscsi", "image")},
}
POD_SPEC = {
    "containers": [CONTAINER], "volumes": [_VOLUME], "nodeSelector": MAP,
    **{k: SCALAR for k in ("restartPolicy", "nodeName", "terminationGracePeriodSeconds",
                           "activeDeadlineSeconds", "hostNetwork", "hostPID", "hostIPC", "dnsPolicy",
                           "hostname", "subdomain")},
    "dnsConfig": {"nameservers": SCALAR, "searches": SCALAR, "options": [{"name": SCALAR, "value": SCALAR}]},
    "securityContext": _POD_SECURITY,
}
_CONDITION = {k: SCALAR for k in ("type", "status", "reason", "message", "lastTransitionTime",
                                  "lastHeartbeatTime", "lastProbeTime", "lastUpdateTime")}
_CONTAINER_STATUS = {
    **{k: SCALAR for k in ("name", "image", "imageID", "containerID", "ready", "started", "restartCount")},
    "state": ANY, "lastState": ANY,
}
POD_STATUS = {
    **{k: SCALAR for k in ("phase", "podIP", "hostIP", "startTime", "reason", "message",
                           "nominatedNodeName", "qosClass")},
    "conditions": [_CONDITION], "podIPs": [{"ip": SCALAR}], "hostIPs": [{"ip": SCALAR}],
    "containerStatuses": [_CONTAINER_STATUS], "initContainerStatuses": [_CONTAINER_STATUS],
}
_TEMPLATE = {"metadata": METADATA, "spec": POD_SPEC}
_LABEL_SELECTOR = {"matchLabels": MAP,
                   "matchExpressions": [{"key": SCALAR, "operator": SCALAR, "values": SCALAR}]}
_TOP = {"apiVersion": SCALAR, "kind": SCALAR, "metadata": METADATA}
_RULE = {k: SCALAR for k in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")}
_SUBJECT = {k: SCALAR for k in ("kind", "name", "namespace", "apiGroup")}
_ROLE_REF = {k: SCALAR for k in ("apiGroup", "kind", "name")}

SCHEMAS = {
    "pods": dict(_TOP, spec=POD_SPEC, status=POD_STATUS),
    "deployments": dict(_TOP, spec={
        **{k: SCALAR for k in ("replicas", "revisionHistoryLimit", "minReadySeconds",
                               "progressDeadlineSeconds", "paused")},
        "selector": _LABEL_SELECTOR, "template": _TEMPLATE,
        "strategy": {"type": SCALAR, "rollingUpdate": {"maxSurge": SCALAR, "maxUnavailable": SCALAR}},
    }, status={
        **{k: SCALAR for k in ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                               "availableReplicas", "unavailableReplicas", "collisionCount")},
        "conditions": [_CONDITION],
    }),
    "replicasets": dict(_TOP, spec={
        "replicas": SCALAR, "minReadySeconds": SCALAR, "selector": _LABEL_SELECTOR, "template": _TEMPLATE,
    }, status={
        **{k: SCALAR for k in ("observedGeneration", "replicas", "readyReplicas", "availableReplicas",
                               "fullyLabeledReplicas")},
        "conditions": [_CONDITION],
    }),
    "services": dict(_TOP, spec={
        **{k: SCALAR for k in ("type", "clusterIP", "clusterIPs", "sessionAffinity", "externalName",
                               "externalTrafficPolicy", "internalTrafficPolicy", "ipFamilies",
                               "ipFamilyPolicy", "externalIPs", "publishNotReadyAddresses")},
        "selector": MAP,
        "ports": [{k: SCALAR for k in ("name", "port", "targetPort", "nodePort", "protocol", "appProtocol")}],
    }, status={"loadBalancer": {"ingress": [{"ip": SCALAR, "hostname": SCALAR}]}}),
    "nodes": dict(_TOP, spec={"unschedulable": SCALAR, "podCIDR": SCALAR, "podCIDRs": SCALAR,
                              "providerID": SCALAR},
                  status={"conditions": [_CONDITION], "capacity": MAP, "allocatable": MAP,
                          "addresses": [{"type": SCALAR, "address": SCALAR}], "nodeInfo": MAP,
                          "daemonEndpoints": {"kubeletEndpoint": {"Port": SCALAR}},
                          "usage": ANY, "phase": SCALAR}),
    "namespaces": dict(_TOP, spec={"finalizers": SCALAR}, status={"phase": SCALAR, "conditions": [_CONDITION]}),
    "endpoints": dict(_TOP, subsets=[{
        "addresses": [{"ip": SCALAR, "hostname": SCALAR, "nodeName": SCALAR, "targetRef": MAP}],
        "notReadyAddresses": [{"ip": SCALAR, "hostname": SCALAR, "nodeName": SCALAR, "targetRef": MAP}],
        "ports": [{"name": SCALAR, "port": SCALAR, "protocol": SCALAR, "appProtocol": SCALAR}],
    }]),
    "events": dict(_TOP, involvedObject=MAP, related=MAP, source=MAP, series=MAP,
                   **{k: SCALAR for k in ("reason", "message", "type", "count", "firstTimestamp",
                                          "lastTimestamp", "eventTime", "action", "reportingComponent",
                                          "reportingInstance")}),
    "configmaps": dict(_TOP, data=MAP, binaryData=MAP, immutable=SCALAR),
    "leases": dict(_TOP, spec={k: SCALAR for k in ("holderIdentity", "leaseDurationSeconds", "acquireTime",
                                                   "renewTime", "leaseTransitions", "strategy",
                                                   "preferredHolder")}),
    "controllerrevisions": dict(_TOP, data=ANY, revision=SCALAR),
    "secrets": dict(_TOP, data=MAP, stringData=MAP, type=SCALAR, immutable=SCALAR),
    "roles": dict(_TOP, rules=[_RULE]),
    "clusterroles": dict(_TOP, rules=[_RULE], aggregationRule={"clusterRoleSelectors": [_LABEL_SELECTOR]}),
    "rolebindings": dict(_TOP, subjects=[_SUBJECT], roleRef=_ROLE_REF),
    "clusterrolebindings": dict(_TOP, subjects=[_SUBJECT], roleRef=_ROLE_REF),
}


def prune_unknown(plural, obj):
    """(obj without the fields its kind does not have, [their paths]); obj is not modified.

    Paths are Kubernetes-style: "spec.containers[0].foo".
    """
    unknown = []
    return _prune(SCHEMAS[plural], obj, "", unknown), unknown


def _prune(schema, value, path, unknown):
    if schema is ANY or schema is MAP or value is None:
        return value
    if isinstance(schema, list):
        if not isinstance(value, list):
            return value            # a wrong type is validation's to report
        return [_prune(schema[0], item, "%s[%d]" % (path, i), unknown) for i, item in enumerate(value)]
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            return value
        kept = {}
        for key, item in value.items():
            field = "%s.%s" % (path, key) if path else key
            if key in schema:
                kept[key] = _prune(schema[key], item, field, unknown)
            else:
                unknown.append(field)
        return kept
    return value
