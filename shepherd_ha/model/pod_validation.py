"""Validation of pod specs, shared by pods and deployment templates."""
import re

from ._checks import is_int, join
from .names import (DNS_LABEL_RULE, DNS_SUBDOMAIN_RULE, PORT_NAME_RULE, is_dns1123_label,
                    is_dns1123_subdomain, is_port_name, show)
from .pod_dns_validation import validate_pod_dns
from .quantity import QuantityError, parse_cpu, parse_memory
from .security_context import validate_container_security_context, validate_pod_security_context

RESTART_POLICIES = ("Always", "OnFailure", "Never")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("TCP", "UDP", "SCTP")
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")
_HANDLERS = ("exec", "httpGet", "tcpSocket")
_QUANTITIES = {"cpu": parse_cpu, "memory": parse_memory}
VOLUME_SOURCES = ("configMap", "secret", "emptyDir", "hostPath")
HOST_PATH_TYPES = ("", "Directory", "DirectoryOrCreate", "File")
_CONFIG_KEY = re.compile(r"[-._a-zA-Z0-9]+")
_CONFIG_KEY_RULE = "letters, digits, '-', '_' and '.'"


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
    volumes = _volumes(causes, join(prefix, "volumes"), spec.get("volumes"))
    containers = causes.list(join(prefix, "containers"), spec.get("containers"),
                             required=True, non_empty=True)
    names = set()
    for i, c in enumerate(containers or []):
        _container(causes, "%s.containers[%d]" % (prefix, i), c, names, volumes, join(prefix, "volumes"))
    causes.enum(join(prefix, "restartPolicy"), spec.get("restartPolicy"), RESTART_POLICIES)
    causes.labels(join(prefix, "nodeSelector"), spec.get("nodeSelector"))
    node = causes.string(join(prefix, "nodeName"), spec.get("nodeName"))
    if node and not is_dns1123_subdomain(node):
        causes.add(join(prefix, "nodeName"),
                   "%s is not a valid node name: %s" % (show(node), DNS_SUBDOMAIN_RULE))
    causes.integer(join(prefix, "terminationGracePeriodSeconds"),
                   spec.get("terminationGracePeriodSeconds"), 0)
    causes.integer(join(prefix, "activeDeadlineSeconds"), spec.get("activeDeadlineSeconds"), 1)
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        causes.boolean(join(prefix, key), spec.get(key))
    validate_pod_security_context(causes, join(prefix, "securityContext"), spec.get("securityContext"),
                                  host_network=spec.get("hostNetwork") is True)
    validate_pod_dns(causes, prefix, spec)


def _container(causes, f, c, names, volumes=None, volumes_field="spec.volumes"):
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
    _env_from(causes, f + ".envFrom", c.get("envFrom"))
    _volume_mounts(causes, f + ".volumeMounts", c.get("volumeMounts"), volumes or {}, volumes_field)
    _ports(causes, f + ".ports", c.get("ports"))
    _resources(causes, f + ".resources", c.get("resources"))
    validate_container_security_context(causes, f + ".securityContext", c.get("securityContext"))
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
        value_from = causes.dict(fi + ".valueFrom", var.get("valueFrom"))
        if value_from is None:
            continue
        if var.get("value") not in (None, ""):
            causes.add(fi + ".valueFrom", "may not be set with value: keep one of them")
        others = sorted(k for k in value_from if k not in _KEY_REFS)
        present = [k for k in _KEY_REFS if k in value_from]
        if others:
            causes.add(fi + ".valueFrom", "%s is not supported: use configMapKeyRef or secretKeyRef {name, key}"
                       % " and ".join(others))
        elif not present:
            causes.add(fi + ".valueFrom", "needs configMapKeyRef or secretKeyRef {name, key} (fieldRef and "
                       "resourceFieldRef are not supported)")
        elif len(present) > 1:
            causes.add(fi + ".valueFrom", "has configMapKeyRef and secretKeyRef: keep one of them")
        for kind in present:
            fr = "%s.valueFrom.%s" % (fi, kind)
            ref = causes.dict(fr, value_from.get(kind))
            if ref is None:
                continue
            what = _KEY_REFS[kind]
            _configmap_name(causes, fr + ".name", ref.get("name"), what)
            key = causes.string(fr + ".key", ref.get("key"), required=True, non_empty=True)
            if key is not None and not _CONFIG_KEY.fullmatch(key):
                causes.add(fr + ".key", "%s is not a valid %s key: %s" % (show(key), what, _CONFIG_KEY_RULE))
            causes.boolean(fr + ".optional", ref.get("optional"))


_KEY_REFS = {"configMapKeyRef": "ConfigMap", "secretKeyRef": "Secret"}
_SOURCE_REFS = {"configMapRef": "ConfigMap", "secretRef": "Secret"}


def _configmap_name(causes, f, name, what="ConfigMap"):
    name = causes.string(f, name, required=True, non_empty=True)
    if name is not None and not is_dns1123_subdomain(name):
        causes.add(f, "%s is not a valid %s name: %s" % (show(name), what, DNS_SUBDOMAIN_RULE))


def _env_from(causes, f, sources):
    for i, source in enumerate(causes.list(f, sources) or []):
        fi = "%s[%d]" % (f, i)
        if not isinstance(source, dict):
            causes.add(fi, "must be an object with a configMapRef or secretRef, got %s" % show(source))
            continue
        others = sorted(k for k in source if k not in ("configMapRef", "secretRef", "prefix"))
        present = [k for k in _SOURCE_REFS if k in source]
        if others:
            causes.add(fi, "%s is not supported: use configMapRef or secretRef {name} (and prefix)"
                       % " and ".join(others))
        elif not present:
            causes.add(fi, "needs configMapRef or secretRef {name}")
        elif len(present) > 1:
            causes.add(fi, "has configMapRef and secretRef: use one per envFrom entry")
        for kind in present:
            ref = causes.dict("%s.%s" % (fi, kind), source.get(kind), required=True)
            if ref is not None:
                _configmap_name(causes, "%s.%s.name" % (fi, kind), ref.get("name"), _SOURCE_REFS[kind])
                causes.boolean("%s.%s.optional" % (fi, kind), ref.get("optional"))
        prefix = causes.string(fi + ".prefix", source.get("prefix"))
        if prefix and "=" in prefix:
            causes.add(fi + ".prefix", "%s must not contain '='" % show(prefix))


def _relative_path(causes, f, path, what):
    """A path inside a volume: relative, no '..' element."""
    if path is None:
        return
    if path.startswith("/"):
        causes.add(f, "%s must be a relative %s path, got %s: drop the leading '/'" % (show(path), what, show(path)))
    elif ".." in path.split("/"):
        causes.add(f, "%s must not contain '..': a %s stays inside its volume" % (show(path), what))


def _volumes(causes, f, volumes):
    """Check spec.volumes; returns {name: volume} of the well-formed names."""
    out = {}
    for i, v in enumerate(causes.list(f, volumes) or []):
        fi = "%s[%d]" % (f, i)
        if not isinstance(v, dict):
            causes.add(fi, "must be an object with a name and one of %s, got %s" % (", ".join(VOLUME_SOURCES), show(v)))
            continue
        name = causes.string(fi + ".name", v.get("name"), required=True, non_empty=True)
        if name is not None:
            if not is_dns1123_label(name):
                causes.add(fi + ".name", "%s is not a valid volume name: %s" % (show(name), DNS_LABEL_RULE))
            elif name in out:
                causes.add(fi + ".name", "duplicate volume name %s: each volume of a pod needs its own name"
                           % show(name))
            out.setdefault(name, v)
        sources = [k for k in v if k != "name"]
        unsupported = sorted(k for k in sources if k not in VOLUME_SOURCES)
        if unsupported:
            causes.add(fi, "%s is not a supported volume source: use one of %s"
                       % (" and ".join(unsupported), ", ".join(VOLUME_SOURCES)))
        known = [k for k in VOLUME_SOURCES if k in v]
        if not known and not unsupported:
            causes.add(fi, "needs a source: one of %s" % ", ".join(VOLUME_SOURCES))
        elif len(known) > 1:
            causes.add(fi, "has %s: a volume has exactly one source, split it into %d volumes"
                       % (" and ".join(known), len(known)))
        _config_map_volume(causes, fi + ".configMap", v.get("configMap"))
        _config_map_volume(causes, fi + ".secret", v.get("secret"), "secretName", "Secret")
        empty = causes.dict(fi + ".emptyDir", v.get("emptyDir"))
        if empty is not None:
            medium = empty.get("medium")
            if medium not in (None, ""):
                causes.add(fi + ".emptyDir.medium", "%s is not supported: leave it empty (a directory on the "
                           "node's disk)" % show(medium))
            if empty.get("sizeLimit") is not None:
                try:
                    parse_memory(empty["sizeLimit"])
                except QuantityError as e:
                    causes.add(fi + ".emptyDir.sizeLimit", str(e))
        host = causes.dict(fi + ".hostPath", v.get("hostPath"))
        if host is not None:
            path = causes.string(fi + ".hostPath.path", host.get("path"), required=True, non_empty=True)
            if path is not None and not path.startswith("/"):
                causes.add(fi + ".hostPath.path", "%s must be an absolute path on the node (start with '/')"
                           % show(path))
            causes.enum(fi + ".hostPath.type", host.get("type"), HOST_PATH_TYPES)
    return out


def _config_map_volume(causes, f, src, name_field="name", what="ConfigMap"):
    """A configMap volume, or a secret volume (its name in secretName)."""
    src = causes.dict(f, src)
    if src is None:
        return
    _configmap_name(causes, join(f, name_field), src.get(name_field), what)
    causes.boolean(f + ".optional", src.get("optional"))
    causes.integer(f + ".defaultMode", src.get("defaultMode"), 0, 0o777)
    paths = set()
    for j, item in enumerate(causes.list(f + ".items", src.get("items")) or []):
        fj = "%s.items[%d]" % (f, j)
        if not isinstance(item, dict):
            causes.add(fj, "must be an object with key and path, got %s" % show(item))
            continue
        causes.string(fj + ".key", item.get("key"), required=True, non_empty=True)
        path = causes.string(fj + ".path", item.get("path"), required=True, non_empty=True)
        _relative_path(causes, fj + ".path", path, "file")
        causes.integer(fj + ".mode", item.get("mode"), 0, 0o777)
        if path is not None:
            if path in paths:
                causes.add(fj + ".path", "duplicate path %s: two items would write the same file" % show(path))
            paths.add(path)


def _volume_mounts(causes, f, mounts, volumes, volumes_field):
    targets = set()
    for i, m in enumerate(causes.list(f, mounts) or []):
        fi = "%s[%d]" % (f, i)
        if not isinstance(m, dict):
            causes.add(fi, "must be an object with name and mountPath, got %s" % show(m))
            continue
        name = causes.string(fi + ".name", m.get("name"), required=True, non_empty=True)
        if name is not None and name not in volumes:
            known = ", ".join(sorted(volumes)) or "none"
            causes.add(fi + ".name", "%s is not a volume of this pod (%s: %s): add it to %s or fix the name"
                       % (show(name), volumes_field, known, volumes_field))
        path = causes.string(fi + ".mountPath", m.get("mountPath"), required=True, non_empty=True)
        if path is not None:
            if not path.startswith("/"):
                causes.add(fi + ".mountPath", "%s must be an absolute path in the container (start with '/')"
                           % show(path))
            elif ":" in path:
                causes.add(fi + ".mountPath", "%s must not contain ':'" % show(path))
            norm = path.rstrip("/") or "/"
            if norm in targets:
                causes.add(fi + ".mountPath", "%s is mounted twice in this container: use one mountPath per "
                           "volume mount" % show(path))
            targets.add(norm)
        causes.boolean(fi + ".readOnly", m.get("readOnly"))
        sub = causes.string(fi + ".subPath", m.get("subPath"))
        _relative_path(causes, fi + ".subPath", sub, "subPath")


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
