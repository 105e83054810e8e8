"""Validation of pod specs, shared by pods and deployment templates."""
from ._checks import is_int, join
from .names import (DNS_LABEL_RULE, DNS_SUBDOMAIN_RULE, PORT_NAME_RULE, is_dns1123_label,
                    is_dns1123_subdomain, is_port_name, show)
from .quantity import QuantityError, parse_cpu, parse_memory

RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HANDLERS = ("exec", "httpGet", "tcpSocket")
_QUANTITIES = {"cpu": parse_cpu, "memory": parse_memory}


def port_ref(causes, field, value, required=False):
    """A port given by number or by the name of a container port."""
    if value is None:
        if required:
            causes.add(field, "is required")
    elif is_int(value):
        causes.integer(field, value, 1, 65535)
    elif isinstance(value, str) and value.isdigit():
        causes.add(field, "%s is a string: write the port number without quotes" % show(value))
    elif not is_port_name(value):
        causes.add(field, "must be a port number from 1 to 65535 or a port name (%s), got %s"
                   % (PORT_NAME_RULE, show(value)))


def validate_pod_spec(causes, prefix, spec):
    """Add causes for a pod spec found at field path prefix (e.g. 'spec')."""
    spec = causes.dict(prefix, spec, required=True)
    if spec is None:
        return
    containers = causes.list(join(prefix, "containers"), spec.get("containers"),
                             required=True, non_empty=True)
    names = set()
    for i, c in enumerate(containers or []):
        _container(causes, "%s.containers[%d]" % (prefix, i), c, names)
    causes.enum(join(prefix, "restartPolicy"), spec.get("restartPolicy"), RESTART_POLICIES)
    causes.labels(join(prefix, "nodeSelector"), spec.get("nodeSelector"))
    node = causes.string(join(prefix, "nodeName"), spec.get("nodeName"))
    if node and not is_dns1123_subdomain(node):
        causes.add(join(prefix, "nodeName"),
                   "%s is not a valid node name: %s" % (show(node), DNS_SUBDOMAIN_RULE))
    causes.integer(join(prefix, "terminationGracePeriodSeconds"),
                   spec.get("terminationGracePeriodSeconds"), 0)
    causes.integer(join(prefix, "activeDeadlineSeconds"), spec.get("activeDeadlineSeconds"), 1)
    causes.boolean(join(prefix, "hostNetwork"), spec.get("hostNetwork"))


def _container(causes, f, c, names):
    if not isinstance(c, dict):
        causes.add(f, "must be an object with a name and an image, got %s" % show(c))
        return
    name = causes.string(f + ".name", c.get("name"), required=True)
    if name is not None:
        if not is_dns1123_label(name):
            causes.add(f + ".name", "%s is not a valid container name: %s"
                       % (show(name), DNS_LABEL_RULE))
        elif name in names:
            causes.add(f + ".name", "duplicate container name %s: each container in a pod "
                       "needs its own name" % show(name))
        names.add(name)
    causes.string(f + ".image", c.get("image"), required=True, non_empty=True)
    causes.string_list(f + ".command", c.get("command"))
    causes.string_list(f + ".args", c.get("args"))
    causes.string(f + ".workingDir", c.get("workingDir"))
    causes.enum(f + ".imagePullPolicy", c.get("imagePullPolicy"), PULL_POLICIES)
    _env(causes, f + ".env", c.get("env"))
    _ports(causes, f + ".ports", c.get("ports"))
    _resources(causes, f + ".resources", c.get("resources"))
    for probe in PROBES:
        _probe(causes, "%s.%s" % (f, probe), c.get(probe), probe != "readinessProbe")


def _env(causes, f, env):
    for i, var in enumerate(causes.list(f, env) or []):
        fi = "%s[%d]" % (f, i)
        if not isinstance(var, dict):
            causes.add(fi, "must be an object with name and value, got %s" % show(var))
            continue
        name = causes.string(fi + ".name", var.get("name"), required=True, non_empty=True)
        if name and "=" in name:
            causes.add(fi + ".name", "%s must not contain '='" % show(name))
        causes.string(fi + ".value", var.get("value"))
        if var.get("valueFrom") is not None:
            causes.add(fi + ".valueFrom", "is not supported: give the value directly")


def _ports(causes, f, ports):
    names = set()
    for i, port in enumerate(causes.list(f, ports) or []):
        fi = "%s[%d]" % (f, i)
        if not isinstance(port, dict):
            causes.add(fi, "must be an object with a containerPort, got %s" % show(port))
            continue
        causes.integer(fi + ".containerPort", port.get("containerPort"), 1, 65535, required=True)
        causes.integer(fi + ".hostPort", port.get("hostPort"), 0, 65535)
        causes.enum(fi + ".protocol", port.get("protocol"), PROTOCOLS)
        name = port.get("name")
        if name is None:
            continue
        if not is_port_name(name):
            causes.add(fi + ".name", "%s is not a valid port name: %s"
                       % (show(name), PORT_NAME_RULE))
            continue
        if name in names:
            causes.add(fi + ".name", "duplicate port name %s in this container" % show(name))
        names.add(name)


def _resources(causes, f, resources):
    resources = causes.dict(f, resources)
    if resources is None:
        return
    amounts = {}
    for group in ("requests", "limits"):
        fg = join(f, group)
        for name, value in (causes.dict(fg, resources.get(group)) or {}).items():
            parse = _QUANTITIES.get(name)
            if parse is None:
                causes.add(join(fg, name), "%s is not a supported resource: use cpu or memory"
                           % show(name))
                continue
            try:
                amounts[group, name] = parse(value)
            except QuantityError as e:
                causes.add(join(fg, name), str(e))
    for name in _QUANTITIES:
        request, limit = amounts.get(("requests", name)), amounts.get(("limits", name))
        if request is not None and limit is not None and request > limit:
            causes.add(join(f, "requests." + name),
                       "%s is more than the limit %s: lower the request or raise the limit"
                       % (show(resources["requests"][name]), show(resources["limits"][name])))


def _probe(causes, f, probe, needs_single_success):
    probe = causes.dict(f, probe)
    if probe is None:
        return
    handlers = [h for h in _HANDLERS if probe.get(h) is not None]
    if not handlers:
        causes.add(f, "needs one of exec, httpGet or tcpSocket")
    elif len(handlers) > 1:
        causes.add(f, "has %s: use exactly one of exec, httpGet or tcpSocket"
                   % " and ".join(handlers))
    exec_ = causes.dict(f + ".exec", probe.get("exec"))
    if exec_ is not None:
        causes.string_list(f + ".exec.command", exec_.get("command"), required=True,
                           non_empty=True)
    http = causes.dict(f + ".httpGet", probe.get("httpGet"))
    if http is not None:
        port_ref(causes, f + ".httpGet.port", http.get("port"), required=True)
        path = causes.string(f + ".httpGet.path", http.get("path"))
        if path is not None and not path.startswith("/"):
            causes.add(f + ".httpGet.path", "%s must start with '/'" % show(path))
        causes.enum(f + ".httpGet.scheme", http.get("scheme"), ("HTTP", "HTTPS"))
    tcp = causes.dict(f + ".tcpSocket", probe.get("tcpSocket"))
    if tcp is not None:
        port_ref(causes, f + ".tcpSocket.port", tcp.get("port"), required=True)
    causes.integer(f + ".initialDelaySeconds", probe.get("initialDelaySeconds"), 0)
    for key in ("timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        causes.integer("%s.%s" % (f, key), probe.get(key), 1)
    # A liveness or startup probe that needs several successes only delays restarts.
    success = probe.get("successThreshold")
    if needs_single_success and is_int(success) and success > 1:
        causes.add(f + ".successThreshold", "must be 1 for liveness and startup probes")
