"""Server-side defaults, as Kubernetes fills them in before validation.

Defaulting runs on unvalidated input, so every step skips values of the wrong shape
and leaves them for validation to report.
"""
import copy

from .secret_validation import default_secret

_PROBE_DEFAULTS = {"initialDelaySeconds": 0, "timeoutSeconds": 1, "periodSeconds": 10,
                   "successThreshold": 1, "failureThreshold": 3}


def _dict_at(obj, key):
    """obj[key], created as {} when absent; None when present but not an object."""
    if obj.get(key) is None:
        obj[key] = {}
    value = obj[key]
    return value if isinstance(value, dict) else None


def _dicts(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def image_pull_policy(image):
    """Always for ':latest' or untagged images (they move); IfNotPresent for pinned ones."""
    if not isinstance(image, str):
        return "IfNotPresent"
    if "@" in image:            # pinned by digest
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]     # a registry's ':port' is not a tag
    tag = last.partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _default_probe(probe):
    if not isinstance(probe, dict):
        return
    for key, value in _PROBE_DEFAULTS.items():
        probe.setdefault(key, value)
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("path", "/")
        http.setdefault("scheme", "HTTP")


def _default_container(c):
    if c.get("imagePullPolicy") is None:
        c["imagePullPolicy"] = image_pull_policy(c.get("image"))
    for port in _dicts(c.get("ports")):
        if port.get("protocol") is None:
            port["protocol"] = "TCP"
    for name in ("livenessProbe", "readinessProbe", "startupProbe"):
        _default_probe(c.get(name))


def default_pod_spec(spec):
    """Fill a pod spec in place (also used for deployment templates)."""
    if not isinstance(spec, dict):
        return
    if spec.get("restartPolicy") is None:
        spec["restartPolicy"] = "Always"
    if spec.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30
    for c in _dicts(spec.get("containers")):
        _default_container(c)


def _pod(obj):
    default_pod_spec(obj.get("spec"))
    if obj.get("status") is None:
        obj["status"] = {"phase": "Pending"}


def _deployment(obj):
    spec = _dict_at(obj, "spec")
    if spec is None:
        return
    for key, value in (("replicas", 1), ("revisionHistoryLimit", 10),
                       ("progressDeadlineSeconds", 600), ("minReadySeconds", 0)):
        if spec.get(key) is None:
            spec[key] = value
    strategy = _dict_at(spec, "strategy")
    if strategy is not None:
        if strategy.get("type") is None:
            strategy["type"] = "RollingUpdate"
        # Recreate takes no rollingUpdate block; validation rejects one if sent.
        if strategy["type"] == "RollingUpdate":
            rolling = _dict_at(strategy, "rollingUpdate")
            if rolling is not None:
                for key in ("maxSurge", "maxUnavailable"):
                    if rolling.get(key) is None:
                        rolling[key] = "25%"
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(template.get("spec"))


def _replica_set(obj):
    spec = _dict_at(obj, "spec")
    if spec is None:
        return
    for key, value in (("replicas", 1), ("minReadySeconds", 0)):
        if spec.get(key) is None:
            spec[key] = value
    template = spec.get("template")
    if isinstance(template, dict):
        default_pod_spec(template.get("spec"))


def _service(obj):
    spec = _dict_at(obj, "spec")
    if spec is None:
        return
    if spec.get("type") is None:
        spec["type"] = "ClusterIP"
    for port in _dicts(spec.get("ports")):
        if port.get("protocol") is None:
            port["protocol"] = "TCP"
        if port.get("targetPort") is None and port.get("port") is not None:
            port["targetPort"] = port["port"]


def _node(obj):
    spec = _dict_at(obj, "spec")
    if spec is not None and spec.get("unschedulable") is None:
        spec["unschedulable"] = False


def _namespace(obj):
    spec = _dict_at(obj, "spec")
    if spec is not None and spec.get("finalizers") is None:
        spec["finalizers"] = ["kubernetes"]     # the namespace controller's (controllers/namespaces.py)
    status = _dict_at(obj, "status")
    if status is not None and status.get("phase") is None:
        status["phase"] = "Active"


_DEFAULTERS = {"pods": _pod, "deployments": _deployment, "replicasets": _replica_set, "services": _service,
               "nodes": _node, "namespaces": _namespace, "secrets": default_secret}


def apply_defaults(resource_plural, obj):
    """A defaulted deep copy of obj; obj itself is never modified.

    metadata.namespace is left to the API, which knows the request path.
    """
    obj = copy.deepcopy(obj)
    if isinstance(obj, dict):
        fill = _DEFAULTERS.get(resource_plural)
        if fill:
            fill(obj)
    return obj
