"""Output of sheepctl: kubectl-like tables, wide tables, YAML, JSON, names."""
import json
from datetime import datetime, timezone

import yaml

from shepherd_ha.model.durations import age, human_duration  # noqa: F401 - re-exported
from shepherd_ha.model.times import parse_time


# -- small helpers ----------------------------------------------------------

def meta(obj):
    return (obj or {}).get("metadata") or {}


def spec(obj):
    return (obj or {}).get("spec") or {}


def status(obj):
    return (obj or {}).get("status") or {}


def kv(mapping, none="<none>"):
    if not mapping:
        return none
    return ",".join("%s=%s" % (k, v) for k, v in mapping.items())


def type_name(r):
    """kubectl's name of a resource type: pod, deployment.apps."""
    group = r.api_version.split("/")[0] if "/" in r.api_version else ""
    return r.singular + ("." + group if group else "")


def object_name(r, name):
    return "%s/%s" % (type_name(r), name)


# -- tables -----------------------------------------------------------------

def format_table(headers, rows):
    """Left-aligned columns separated by 3 spaces (kubectl style)."""
    table = [list(map(str, headers))] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    return ["   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table]


class TablePrinter:
    """Prints rows as they come (for --watch), keeping column widths of the
    first batch (growing them when a later cell is wider)."""

    def __init__(self, headers, out):
        self.headers = [str(h) for h in headers]
        self.out = out
        self.widths = None

    def print_rows(self, rows, header=True):
        rows = [[str(c) for c in row] for row in rows]
        table = ([self.headers] if header else []) + rows
        if not table:
            return
        widths = [max([len(r[i]) for r in table] + [len(self.headers[i])])
                  for i in range(len(self.headers))]
        if self.widths is None:
            self.widths = widths
        else:
            self.widths = [max(a, b) for a, b in zip(self.widths, widths)]
        for r in table:
            self.out.write("   ".join(c.ljust(w) for c, w in zip(r, self.widths)).rstrip() + "\n")
        self.out.flush()


# Column definitions: resource plural -> (headers, row fn, wide headers, wide row fn)

def _pod_ready(pod):
    containers = spec(pod).get("containers") or []
    statuses = status(pod).get("containerStatuses") or []
    total = max(len(containers), len(statuses))
    ready = sum(1 for s in statuses if s.get("ready"))
    return "%d/%d" % (ready, total)


def pod_status(pod):
    """Like kubectl: the phase, or the reason of the first container that
    is waiting or terminated, or Terminating."""
    st = status(pod)
    reason = st.get("reason") or st.get("phase") or "Pending"
    for cs in reversed(st.get("containerStatuses") or []):
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            if terminated.get("signal"):
                reason = "Signal:%s" % terminated["signal"]
            else:
                reason = "ExitCode:%s" % terminated.get("exitCode", "?")
    if meta(pod).get("deletionTimestamp"):
        reason = "Unknown" if st.get("reason") == "NodeLost" else "Terminating"
    return reason


def _pod_restarts(pod):
    return str(sum(int(cs.get("restartCount") or 0)
                   for cs in status(pod).get("containerStatuses") or []))


def _pod_row(pod, now):
    return [meta(pod).get("name"), _pod_ready(pod), pod_status(pod), _pod_restarts(pod),
            age(meta(pod).get("creationTimestamp"), now)]


def _pod_wide(pod, now):
    return _pod_row(pod, now) + [status(pod).get("podIP") or "<none>",
                                 spec(pod).get("nodeName") or "<none>"]


def _deploy_row(d, now):
    sp, st = spec(d), status(d)
    replicas = sp.get("replicas", 1)
    return [meta(d).get("name"), "%d/%d" % (st.get("readyReplicas") or 0, replicas or 0),
            str(st.get("updatedReplicas") or 0), str(st.get("availableReplicas") or 0),
            age(meta(d).get("creationTimestamp"), now)]


def _deploy_wide(d, now):
    containers = (spec(spec(d).get("template")).get("containers")) or []
    sel = (spec(d).get("selector") or {}).get("matchLabels") or {}
    return _deploy_row(d, now) + [",".join(c.get("name", "") for c in containers) or "<none>",
                                  ",".join(c.get("image", "") for c in containers) or "<none>",
                                  kv(sel)]


def service_ports(svc):
    out = []
    for p in spec(svc).get("ports") or []:
        proto = p.get("protocol") or "TCP"
        if p.get("nodePort"):
            out.append("%s:%s/%s" % (p.get("port"), p["nodePort"], proto))
        else:
            out.append("%s/%s" % (p.get("port"), proto))
    return ",".join(out) or "<none>"


def external_ips(svc):
    """kubectl's EXTERNAL-IP: externalIPs, a LoadBalancer's ingress or <pending>, else <none>."""
    addresses = [a for a in spec(svc).get("externalIPs") or [] if isinstance(a, str)]
    if spec(svc).get("type") == "LoadBalancer":
        ingress = (status(svc).get("loadBalancer") or {}).get("ingress") or []
        addresses += [i.get("ip") or i.get("hostname") for i in ingress if isinstance(i, dict)]
        return ",".join(a for a in addresses if a) or "<pending>"
    return ",".join(addresses) or "<none>"


def _svc_row(s, now):
    # kubectl's columns, in its order (SELECTOR with -o wide)
    return [meta(s).get("name"), spec(s).get("type") or "ClusterIP", spec(s).get("clusterIP") or "<none>",
            external_ips(s), service_ports(s), age(meta(s).get("creationTimestamp"), now)]


def _svc_wide(s, now):
    return _svc_row(s, now) + [kv(spec(s).get("selector"))]


def _rs_row(r, now):
    return [meta(r).get("name"), str(spec(r).get("replicas", 1) or 0), str(status(r).get("replicas") or 0),
            str(status(r).get("readyReplicas") or 0), age(meta(r).get("creationTimestamp"), now)]


def _rs_wide(r, now):
    containers = (spec(spec(r).get("template")).get("containers")) or []
    sel = (spec(r).get("selector") or {}).get("matchLabels") or {}
    return _rs_row(r, now) + [",".join(c.get("name", "") for c in containers) or "<none>",
                              ",".join(c.get("image", "") for c in containers) or "<none>", kv(sel)]


def node_ready(node):
    """As kubectl prints it: Ready only when the Ready condition is True, NotReady when it is
    False or Unknown (the lifecycle controller's "stopped posting"), Unknown without one."""
    for c in status(node).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == "Ready":
            return "Ready" if str(c.get("status")) == "True" else "NotReady"
    return "Unknown"


def node_status(node):
    s = node_ready(node)
    if spec(node).get("unschedulable"):
        s += ",SchedulingDisabled"
    return s


def node_roles(node):
    roles = []
    for k, v in (meta(node).get("labels") or {}).items():
        for prefix in ("node-role.kubernetes.io/", "node-role.shepherd.io/"):
            if k.startswith(prefix) and k[len(prefix):]:
                roles.append(k[len(prefix):])
        if k == "kubernetes.io/role" and v:
            roles.append(v)
    return ",".join(sorted(set(roles))) or "<none>"


def node_version(node):
    info = status(node).get("nodeInfo") or {}
    return (info.get("agentVersion") or info.get("shepherdVersion") or info.get("kubeletVersion")
            or info.get("version") or "<unknown>")


def node_address(node, kind="InternalIP"):
    for a in status(node).get("addresses") or []:
        if a.get("type") == kind:
            return a.get("address") or "<none>"
    return "<none>"


def _node_row(n, now):
    return [meta(n).get("name"), node_status(n), node_roles(n),
            age(meta(n).get("creationTimestamp"), now), node_version(n)]


def _node_wide(n, now):
    alloc = status(n).get("allocatable") or status(n).get("capacity") or {}
    return _node_row(n, now) + [node_address(n), str(alloc.get("cpu", "<none>")),
                                str(alloc.get("memory", "<none>"))]


def _ns_row(n, now):
    return [meta(n).get("name"), status(n).get("phase") or "Active",
            age(meta(n).get("creationTimestamp"), now)]


def endpoint_addresses(ep, limit=3):
    out = []
    for subset in ep.get("subsets") or []:
        ports = subset.get("ports") or []
        for a in subset.get("addresses") or []:
            ip = a.get("ip")
            if ports:
                out.extend("%s:%s" % (ip, p.get("port")) for p in ports)
            else:
                out.append(str(ip))
    if not out:
        return "<none>"
    if limit and len(out) > limit:
        return ",".join(out[:limit]) + " + %d more..." % (len(out) - limit)
    return ",".join(out)


def _ep_row(e, now):
    return [meta(e).get("name"), endpoint_addresses(e), age(meta(e).get("creationTimestamp"), now)]


def event_time(ev):
    return (ev.get("lastTimestamp") or ev.get("eventTime") or ev.get("firstTimestamp")
            or meta(ev).get("creationTimestamp"))


def event_object(ev):
    io = ev.get("involvedObject") or ev.get("regarding") or {}
    return "%s/%s" % ((io.get("kind") or "").lower(), io.get("name") or "")


def event_last_seen(ev, now):
    last = age(event_time(ev), now)
    count = ev.get("count") or (ev.get("series") or {}).get("count")
    if count and int(count) > 1 and ev.get("firstTimestamp"):
        return "%s (x%s over %s)" % (last, count, age(ev.get("firstTimestamp"), now))
    return last


def _ev_row(e, now):
    return [event_last_seen(e, now), e.get("type") or "Normal", e.get("reason") or "",
            event_object(e), (e.get("message") or e.get("note") or "").replace("\n", " ")]


def _cm_row(c, now):
    data = sum(len(c.get(f) or {}) for f in ("data", "binaryData") if isinstance(c.get(f), dict))
    return [meta(c).get("name"), str(data), age(meta(c).get("creationTimestamp"), now)]


def _generic_row(o, now):
    return [meta(o).get("name"), age(meta(o).get("creationTimestamp"), now)]


COLUMNS = {
    "pods": (["NAME", "READY", "STATUS", "RESTARTS", "AGE"], _pod_row, ["IP", "NODE"], _pod_wide),
    "deployments": (["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], _deploy_row,
                    ["CONTAINERS", "IMAGES", "SELECTOR"], _deploy_wide),
    "replicasets": (["NAME", "DESIRED", "CURRENT", "READY", "AGE"], _rs_row,
                    ["CONTAINERS", "IMAGES", "SELECTOR"], _rs_wide),
    "services": (["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"], _svc_row, ["SELECTOR"], _svc_wide),
    "nodes": (["NAME", "STATUS", "ROLES", "AGE", "VERSION"], _node_row,
              ["INTERNAL-IP", "CPU", "MEMORY"], _node_wide),
    "namespaces": (["NAME", "STATUS", "AGE"], _ns_row, [], None),
    "endpoints": (["NAME", "ENDPOINTS", "AGE"], _ep_row, [], None),
    "configmaps": (["NAME", "DATA", "AGE"], _cm_row, [], None),
    "secrets": (["NAME", "TYPE", "DATA", "AGE"], lambda o, now: [meta(o).get("name"), o.get("type") or "Opaque"]
                + _cm_row(o, now)[1:], [], None),
    "events": (["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], _ev_row, [], None),
}


def table_headers(r, wide=False, with_namespace=False):
    headers, _row, wide_headers, _wide = COLUMNS.get(r.plural, (["NAME", "AGE"], None, [], None))
    out = list(headers) + (list(wide_headers) if wide else [])
    if with_namespace:
        out = ["NAMESPACE"] + out
    return out


def table_row(r, obj, wide=False, with_namespace=False, now=None):
    now = now or datetime.now(timezone.utc)
    _h, row, _wh, wide_row = COLUMNS.get(r.plural, (None, _generic_row, [], None))
    cells = (wide_row if (wide and wide_row) else row)(obj, now)
    cells = ["<none>" if c is None else c for c in cells]
    if with_namespace:
        cells = [meta(obj).get("namespace") or ""] + cells
    return cells


def sort_objects(r, items):
    if r.plural == "events":
        return sorted(items, key=lambda e: (parse_time(event_time(e)) or datetime.min.replace(
            tzinfo=timezone.utc)))
    return sorted(items, key=lambda o: (meta(o).get("namespace") or "", meta(o).get("name") or ""))


def render_table(r, items, wide=False, with_namespace=False, now=None, prefix=False):
    """Lines of a table; prefix: NAME cells as type/name (several types shown)."""
    now = now or datetime.now(timezone.utc)
    rows = [table_row(r, o, wide, with_namespace, now) for o in items]
    headers = table_headers(r, wide, with_namespace)
    if prefix and "NAME" in headers:
        i = headers.index("NAME")
        for row in rows:
            row[i] = object_name(r, row[i])
    return format_table(table_headers(r, wide, with_namespace), rows)


# -- structured output ------------------------------------------------------

def as_list(items):
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
            "items": list(items)}


def to_json(obj):
    return json.dumps(obj, indent=4, sort_keys=False, default=str)


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper, value):
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _str_representer)


def to_yaml(obj):
    return yaml.dump(obj, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True)
