"""Validation of objects sent to the API; each problem becomes a Cause(field, message).

Validators never raise on JSON-shaped input: a wrong type is a cause like any other,
because the API turns causes into a 422 and anything else into a 500.
"""
import ipaddress
import re

from ._checks import Cause, Causes, is_int, join
from .names import (DNS_LABEL_RULE, DNS_SUBDOMAIN_RULE, is_dns1123_label,
                    is_dns1123_subdomain, show)
from .pod_security import level_label_problem
from .pod_validation import PROTOCOLS, port_ref, validate_pod_spec
from .rbac_validation import VALIDATORS as RBAC_VALIDATORS
from .resources import RESOURCES
from .secret_validation import decode as decode_base64, validate_secret
from .selectors import LabelSelector, SelectorError
from .service_network import parse_ipv4
from .status_validation import validate_status
from .update_validation import validate_update

__all__ = ["Cause", "validate_object", "validate_update", "validate_scale", "describe_causes"]

# Names that become DNS labels (a namespace, a service's host name) follow the stricter rule.
_LABEL_NAMED = ("namespaces", "services")
_MAX_ANNOTATIONS = 256 * 1024
# One Deployment asks for at most this many pods: the cluster is measured to 30,000 pods in
# all (bench/bench_scale.py). Unbounded, replicas 2^31 made the controller create pods at
# 1,000 a second until the replicas fell over (found by the API fuzz campaign).
MAX_REPLICAS = 30000
POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_FINALIZER = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_CONFIG_KEY_RULE = "keys are 1-253 characters of letters, digits, '-', '_' or '.'"


def describe_causes(causes):
    """One line for a Status message: 'field: message; field: message'."""
    return "; ".join("%s: %s" % (c.field, c.message) if c.field else c.message for c in causes)


def validate_object(resource_plural, obj):
    """Causes that make obj invalid as a resource_plural object; [] when it is valid.

    Raises ValueError only for an unknown resource_plural (a programming error).
    """
    resource = RESOURCES.get(resource_plural)
    if resource is None:
        raise ValueError("unknown resource %r" % (resource_plural,))
    causes = Causes()
    if not isinstance(obj, dict):
        causes.add("", "a %s must be a JSON object, got %s" % (resource.kind, show(obj)))
        return list(causes)
    for field, expected in (("kind", resource.kind), ("apiVersion", resource.api_version)):
        value = obj.get(field)
        if value is not None and value != expected:
            causes.add(field, "%s does not match %s: use %s"
                       % (show(value), resource_plural, expected))
    _metadata(causes, resource, obj.get("metadata"))
    _VALIDATORS[resource_plural](causes, obj)
    validate_status(causes, resource_plural, obj)
    return list(causes)


def _metadata(causes, resource, meta):
    meta = causes.dict("metadata", meta, required=True)
    if meta is None:
        return
    name = causes.string("metadata.name", meta.get("name"), required=True)
    if name is not None:
        if resource.plural in _LABEL_NAMED:
            ok, rule = is_dns1123_label(name), DNS_LABEL_RULE
        else:
            ok, rule = is_dns1123_subdomain(name), DNS_SUBDOMAIN_RULE
        if not ok:
            causes.add("metadata.name", "%s is not a valid name: %s" % (show(name), rule))
    namespace = causes.string("metadata.namespace", meta.get("namespace"))
    if namespace and not resource.namespaced:
        causes.add("metadata.namespace", "must be empty: %s are not namespaced" % resource.plural)
    elif namespace and not is_dns1123_label(namespace):
        causes.add("metadata.namespace", "%s is not a valid namespace name: %s"
                   % (show(namespace), DNS_LABEL_RULE))
    causes.labels("metadata.labels", meta.get("labels"))
    annotations = causes.labels("metadata.annotations", meta.get("annotations"),
                                values_are_labels=False)
    if annotations and sum(len(k) + len(v) for k, v in annotations.items()) > _MAX_ANNOTATIONS:
        causes.add("metadata.annotations", "total size must be at most 256 KiB")
    _finalizers(causes, "metadata.finalizers", meta.get("finalizers"))
    for i, ref in enumerate(causes.list("metadata.ownerReferences",
                                        meta.get("ownerReferences")) or []):
        f = "metadata.ownerReferences[%d]" % i
        if not isinstance(ref, dict):
            causes.add(f, "must be an object with kind and name, got %s" % show(ref))
            continue
        for key in ("kind", "name"):
            causes.string("%s.%s" % (f, key), ref.get(key), required=True, non_empty=True)
        for key in ("apiVersion", "uid"):
            causes.string("%s.%s" % (f, key), ref.get(key))
        causes.boolean(f + ".controller", ref.get("controller"))
        causes.boolean(f + ".blockOwnerDeletion", ref.get("blockOwnerDeletion"))


def _pod(causes, obj):
    validate_pod_spec(causes, "spec", obj.get("spec"))
    status = obj.get("status")
    if isinstance(status, dict):
        causes.enum("status.phase", status.get("phase"), POD_PHASES)


def _deployment(causes, obj):
    spec = causes.dict("spec", obj.get("spec"), required=True)
    if spec is None:
        return
    causes.integer("spec.replicas", spec.get("replicas"), 0, MAX_REPLICAS)
    for key in ("revisionHistoryLimit", "minReadySeconds"):
        causes.integer("spec." + key, spec.get(key), 0)
    deadline = causes.integer("spec.progressDeadlineSeconds",
                              spec.get("progressDeadlineSeconds"), 1)
    ready = spec.get("minReadySeconds")
    if deadline is not None and is_int(ready) and deadline <= ready:
        causes.add("spec.progressDeadlineSeconds", "must be greater than minReadySeconds (%d)"
                   % ready)
    causes.boolean("spec.paused", spec.get("paused"))
    selector = _deployment_selector(causes, spec.get("selector"))
    template = _selected_template(causes, spec, selector, "deployment")
    if template is not None:
        pod_spec = template.get("spec")
        policy = pod_spec.get("restartPolicy") if isinstance(pod_spec, dict) else None
        # Deployment pods are replaced, never left finished, so only Always makes sense.
        if policy in ("OnFailure", "Never"):
            causes.add("spec.template.spec.restartPolicy",
                       "%s is not allowed in a deployment: use Always" % show(policy))
    _strategy(causes, spec.get("strategy"))


def _replica_set(causes, obj):
    """A ReplicaSet: replicas, selector and a template whose labels it selects."""
    spec = causes.dict("spec", obj.get("spec"), required=True)
    if spec is None:
        return
    causes.integer("spec.replicas", spec.get("replicas"), 0, MAX_REPLICAS)
    causes.integer("spec.minReadySeconds", spec.get("minReadySeconds"), 0)
    selector = _deployment_selector(causes, spec.get("selector"))
    _selected_template(causes, spec, selector, "replica set")


def _selected_template(causes, spec, selector, owner):
    """spec.template of a Deployment or ReplicaSet: a valid pod spec with labels its
    selector matches (or its owner could not find its own pods); the template or None."""
    template = causes.dict("spec.template", spec.get("template"), required=True)
    if template is None:
        return None
    meta = causes.dict("spec.template.metadata", template.get("metadata"))
    labels = causes.labels("spec.template.metadata.labels", (meta or {}).get("labels"))
    if selector is not None and not selector.matches(labels or {}):
        causes.add("spec.template.metadata.labels",
                   "do not match spec.selector %s: give the template the selector's "
                   "labels, or the %s cannot find its own pods" % (show(str(selector)), owner))
    validate_pod_spec(causes, "spec.template.spec", template.get("spec"))
    return template


def _deployment_selector(causes, spec):
    if spec is None:
        causes.add("spec.selector", "is required: e.g. {matchLabels: {app: web}}")
        return None
    try:
        selector = LabelSelector.from_spec(spec)
    except SelectorError as e:
        causes.add("spec.selector", str(e))
        return None
    if selector.empty:
        causes.add("spec.selector", "must not be empty: an empty selector would adopt every "
                   "pod in the namespace; use e.g. {matchLabels: {app: web}}")
        return None
    return selector


def _pods_or_percent(causes, field, value, max_percent=None):
    """An IntOrString rollout bound: a count, or 'N%'. Returns 0 when it means zero."""
    if value is None:
        return None
    if is_int(value) and value >= 0:
        return value
    if isinstance(value, str) and value.endswith("%") and value[:-1].isdigit():
        percent = int(value[:-1])
        if max_percent is not None and percent > max_percent:
            causes.add(field, "%s must be at most %d%%" % (show(value), max_percent))
        return percent
    causes.add(field, "must be a number of pods such as 1 or a percentage such as 25%%, got %s"
               % show(value))
    return None


def _strategy(causes, strategy):
    strategy = causes.dict("spec.strategy", strategy)
    if strategy is None:
        return
    kind = causes.enum("spec.strategy.type", strategy.get("type"), ("RollingUpdate", "Recreate"))
    rolling = causes.dict("spec.strategy.rollingUpdate", strategy.get("rollingUpdate"))
    if rolling is None:
        return
    if kind == "Recreate":
        causes.add("spec.strategy.rollingUpdate", "must not be set when type is Recreate")
        return
    f = "spec.strategy.rollingUpdate."
    surge = _pods_or_percent(causes, f + "maxSurge", rolling.get("maxSurge"))
    unavailable = _pods_or_percent(causes, f + "maxUnavailable", rolling.get("maxUnavailable"),
                                   max_percent=100)
    if surge == 0 and unavailable == 0:
        causes.add(f + "maxUnavailable", "maxSurge and maxUnavailable cannot both be 0: "
                   "the rollout could never replace a pod")


def _service(causes, obj):
    spec = causes.dict("spec", obj.get("spec"), required=True)
    if spec is None:
        return
    causes.labels("spec.selector", spec.get("selector"))
    causes.enum("spec.type", spec.get("type"),
                ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"))
    cluster_ip = causes.string("spec.clusterIP", spec.get("clusterIP"))
    if cluster_ip not in (None, "", "None") and parse_ipv4(cluster_ip) is None:
        causes.add("spec.clusterIP", "%s is not an IPv4 address: leave it out to get one allocated, or use None "
                   "for a headless service" % show(cluster_ip))
    # Enums and shapes Kubernetes checks: a typed client or the agent's proxy reads them back.
    # "" is unset, as Kubernetes reads it (charts render empty values)
    causes.enum("spec.sessionAffinity", spec.get("sessionAffinity") or None, ("None", "ClientIP"))
    affinity = causes.dict("spec.sessionAffinityConfig", spec.get("sessionAffinityConfig"))
    client_ip = causes.dict("spec.sessionAffinityConfig.clientIP", (affinity or {}).get("clientIP"))
    causes.integer("spec.sessionAffinityConfig.clientIP.timeoutSeconds", (client_ip or {}).get("timeoutSeconds"),
                   1, 86400)
    for policy in ("externalTrafficPolicy", "internalTrafficPolicy"):
        causes.enum("spec." + policy, spec.get(policy) or None, ("Cluster", "Local"))
    causes.enum("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy") or None, ("SingleStack", "PreferDualStack",
                                                                            "RequireDualStack"))
    for i, address in enumerate(causes.list("spec.externalIPs", spec.get("externalIPs")) or []):
        if not isinstance(address, str) or parse_ipv4(address) is None:
            causes.add("spec.externalIPs[%d]" % i, "%s is not an IPv4 address" % show(address))
    headless = spec.get("clusterIP") == "None"
    ports = causes.list("spec.ports", spec.get("ports"), required=not headless,
                        non_empty=not headless)
    names, seen = set(), set()
    for i, port in enumerate(ports or []):
        f = "spec.ports[%d]" % i
        if not isinstance(port, dict):
            causes.add(f, "must be an object with a port, got %s" % show(port))
            continue
        number = causes.integer(f + ".port", port.get("port"), 1, 65535, required=True)
        port_ref(causes, f + ".targetPort", port.get("targetPort"))
        causes.integer(f + ".nodePort", port.get("nodePort"), 1, 65535)
        protocol = causes.enum(f + ".protocol", port.get("protocol"), PROTOCOLS) or "TCP"
        causes.string(f + ".appProtocol", port.get("appProtocol"))
        if number is not None:
            if (number, protocol) in seen:
                causes.add(f + ".port", "duplicate port %d/%s" % (number, protocol))
            seen.add((number, protocol))
        # Names tell ports apart in endpoints, so they matter only when there are several.
        name = port.get("name")
        if name in (None, ""):
            if len(ports) > 1:
                causes.add(f + ".name", "is required when a service has more than one port")
            continue
        if causes.string(f + ".name", name) is None:
            continue
        if not is_dns1123_label(name):
            causes.add(f + ".name", "%s is not a valid port name: %s"
                       % (show(name), DNS_LABEL_RULE))
        elif name in names:
            causes.add(f + ".name", "duplicate port name %s" % show(name))
        names.add(name)


def _node(causes, obj):
    spec = causes.dict("spec", obj.get("spec"))
    if spec is not None:
        causes.boolean("spec.unschedulable", spec.get("unschedulable"))
        _pod_cidrs(causes, spec)


def _pod_cidrs(causes, spec):
    cidr = spec.get("podCIDR")
    if causes.string("spec.podCIDR", cidr) and cidr and not _is_ipv4_network(cidr):
        causes.add("spec.podCIDR", "%s is not an IPv4 network such as 10.244.1.0/24" % show(cidr))
    cidrs = causes.list("spec.podCIDRs", spec.get("podCIDRs"))
    if cidrs is not None:
        if len(cidrs) > 1 or not all(isinstance(c, str) and _is_ipv4_network(c) for c in cidrs):
            causes.add("spec.podCIDRs", "holds at most one IPv4 network (no dual stack), got %s" % show(cidrs))
        elif cidrs and cidr and cidrs[0] != cidr:
            causes.add("spec.podCIDRs", "must start with spec.podCIDR %s, got %s" % (show(cidr), show(cidrs[0])))


def _is_ipv4_network(text):
    try:
        ipaddress.IPv4Network(text, strict=True)
    except ValueError:
        return False
    return True


def _event(causes, obj):
    ref = causes.dict("involvedObject", obj.get("involvedObject"), required=True)
    if ref is not None:
        for key in ("kind", "name"):
            causes.string("involvedObject." + key, ref.get(key), required=True, non_empty=True)
        for key in ("namespace", "uid", "apiVersion"):
            causes.string("involvedObject." + key, ref.get(key))
    causes.string("reason", obj.get("reason"))
    causes.string("message", obj.get("message"))
    causes.enum("type", obj.get("type"), ("Normal", "Warning"))
    causes.integer("count", obj.get("count"), 0)
    for key in ("firstTimestamp", "lastTimestamp", "eventTime"):
        causes.string(key, obj.get(key))
    source = causes.dict("source", obj.get("source"))
    for key in ("component", "host"):
        causes.string("source." + key, (source or {}).get(key))


def _endpoints(causes, obj):
    for i, subset in enumerate(causes.list("subsets", obj.get("subsets")) or []):
        f = "subsets[%d]" % i
        if not isinstance(subset, dict):
            causes.add(f, "must be an object with addresses and ports, got %s" % show(subset))
            continue
        for group in ("addresses", "notReadyAddresses"):
            for j, addr in enumerate(causes.list(join(f, group), subset.get(group)) or []):
                fa = "%s.%s[%d]" % (f, group, j)
                if isinstance(addr, dict):
                    causes.string(fa + ".ip", addr.get("ip"), required=True, non_empty=True)
                    for key in ("nodeName", "hostname"):
                        causes.string(fa + "." + key, addr.get(key))
                    ref = causes.dict(fa + ".targetRef", addr.get("targetRef"))
                    for key in ("kind", "name", "namespace", "uid"):
                        causes.string(fa + ".targetRef." + key, (ref or {}).get(key))
                else:
                    causes.add(fa, "must be an object with an ip, got %s" % show(addr))
        for j, port in enumerate(causes.list(f + ".ports", subset.get("ports")) or []):
            fp = "%s.ports[%d]" % (f, j)
            if isinstance(port, dict):
                causes.integer(fp + ".port", port.get("port"), 1, 65535, required=True)
                causes.enum(fp + ".protocol", port.get("protocol"), PROTOCOLS)
                causes.string(fp + ".name", port.get("name"))
            else:
                causes.add(fp, "must be an object with a port, got %s" % show(port))


def _finalizers(causes, field, value):
    for i, item in enumerate(causes.list(field, value) or []):
        if not (isinstance(item, str) and _FINALIZER.fullmatch(item)):
            causes.add("%s[%d]" % (field, i), "%s is not a valid finalizer: use a name like "
                       "example.com/cleanup (letters, digits, '-', '_', '.', one optional '/')" % show(item))


def _namespace(causes, obj):
    problem = level_label_problem((obj.get("metadata") or {}).get("labels")
                                  if isinstance(obj.get("metadata"), dict) else None)
    if problem:
        causes.add("metadata.labels[%s]" % problem[0], problem[1])
    spec = causes.dict("spec", obj.get("spec"))
    if spec is not None:
        _finalizers(causes, "spec.finalizers", spec.get("finalizers"))


def _lease(causes, obj):
    spec = causes.dict("spec", obj.get("spec"))
    if spec is not None:
        causes.string("spec.holderIdentity", spec.get("holderIdentity"))
        causes.integer("spec.leaseDurationSeconds", spec.get("leaseDurationSeconds"), low=1)
        causes.string("spec.renewTime", spec.get("renewTime"))
        causes.integer("spec.leaseTransitions", spec.get("leaseTransitions"), low=0)


def _config_map(causes, obj):
    for field in ("data", "binaryData"):
        data = causes.dict(field, obj.get(field))
        for key, value in (data or {}).items():
            if not (len(key) <= 253 and _CONFIG_KEY.fullmatch(key)) or key in (".", ".."):
                causes.add(join(field, key), "%s is not a valid key: %s" % (show(key), _CONFIG_KEY_RULE))
            text = causes.string(join(field, key), value, required=True)
            if field == "binaryData" and text is not None:
                try:
                    decode_base64(text)
                except ValueError:
                    causes.add(join(field, key), "is not base64: encode the bytes (base64 -w0), or put text "
                               "in data instead")
    seen = set(obj.get("data") or {}) if isinstance(obj.get("data"), dict) else set()
    if isinstance(obj.get("binaryData"), dict):
        for key in sorted(seen & set(obj["binaryData"])):
            causes.add(join("binaryData", key), "duplicates data.%s: a key lives in data or binaryData, not both" % key)
    causes.boolean("immutable", obj.get("immutable"))


def _controller_revision(causes, obj):
    causes.integer("revision", obj.get("revision"), 0, required=True)
    causes.dict("data", obj.get("data"))


_VALIDATORS = {"pods": _pod, "deployments": _deployment, "replicasets": _replica_set,
               "services": _service, "nodes": _node, "events": _event, "endpoints": _endpoints,
               "namespaces": _namespace, "leases": _lease,
               "controllerrevisions": _controller_revision, "configmaps": _config_map,
               "secrets": validate_secret, **RBAC_VALIDATORS}


def validate_scale(obj):
    """Causes for a Scale subresource body: {"spec": {"replicas": N}} with N >= 0."""
    causes = Causes()
    if not isinstance(obj, dict):
        causes.add("", "a Scale must be a JSON object, got %s" % show(obj))
        return list(causes)
    if obj.get("kind") is not None and obj.get("kind") != "Scale":
        causes.add("kind", "%s does not match the scale subresource: use Scale"
                   % show(obj.get("kind")))
    spec = causes.dict("spec", obj.get("spec"), required=True)
    if spec is not None:
        causes.integer("spec.replicas", spec.get("replicas"), 0, MAX_REPLICAS, required=True)
    return list(causes)
