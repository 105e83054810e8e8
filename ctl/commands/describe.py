"""sheepctl describe RESOURCE NAME: a readable multi-section text."""
from datetime import datetime, timezone

from shepherd_ha.client import ApiError
from shepherd_ha.model.resources import RESOURCES

from .. import printers
from ..context import UserError, parse_targets
from ..printers import meta, spec, status


def register(sub, common):
    p = sub.add_parser("describe", parents=[common], help="show details of a resource and its events")
    p.add_argument("resource", metavar="RESOURCE")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-l", "--selector", help="describe every object matching this label selector")
    p.set_defaults(func=run)


class Text:
    def __init__(self):
        self.lines = []

    def field(self, key, value, indent=0):
        pad = "  " * indent
        key = key + ":"
        if len(key) >= 16:
            key += " "
        if isinstance(value, (list, tuple)):
            if not value:
                self.lines.append("%s%-16s<none>" % (pad, key))
                return
            self.lines.append("%s%-16s%s" % (pad, key, value[0]))
            for v in value[1:]:
                self.lines.append("%s%-16s%s" % (pad, "", v))
            return
        if value is None or value == "":
            value = "<none>"
        self.lines.append("%s%-16s%s" % (pad, key, value))

    def heading(self, text, indent=0):
        self.lines.append("  " * indent + text + ":")

    def line(self, text="", indent=0):
        self.lines.append("  " * indent + text if text else "")

    def table(self, headers, rows, indent=1):
        underline = ["-" * len(h) for h in headers]
        for line in printers.format_table(headers, [underline] + rows):
            self.lines.append("  " * indent + line)

    def block(self, value, indent=1):
        """Nested data as indented YAML."""
        for line in printers.to_yaml(value).rstrip("\n").splitlines():
            self.lines.append("  " * indent + line)

    def render(self):
        return "\n".join(self.lines)


def _pairs(mapping):
    return ["%s=%s" % (k, v) for k, v in (mapping or {}).items()]


def _conditions(t, obj):
    conds = status(obj).get("conditions") or []
    t.heading("Conditions")
    if not conds:
        t.line("<none>", 1)
        return
    t.table(["Type", "Status", "Reason", "Message"],
            [[c.get("type", ""), c.get("status", ""), c.get("reason") or "",
              c.get("message") or ""] for c in conds])


def _resources_text(res):
    parts = []
    for section in ("requests", "limits"):
        vals = (res or {}).get(section) or {}
        if vals:
            parts.append("%s: %s" % (section, ", ".join("%s=%s" % kv for kv in vals.items())))
    return "; ".join(parts) or "<none>"


def _containers(t, containers, statuses=None, indent=0):
    by_name = {s.get("name"): s for s in statuses or []}
    t.heading("Containers", indent)
    if not containers:
        t.line("<none>", indent + 1)
    for c in containers:
        t.line("%s:" % c.get("name"), indent + 1)
        t.field("Image", c.get("image"), indent + 2)
        ports = ["%s/%s" % (p.get("containerPort"), p.get("protocol") or "TCP")
                 for p in c.get("ports") or []]
        t.field("Ports", ", ".join(ports) or None, indent + 2)
        if c.get("command"):
            t.field("Command", " ".join(map(str, c["command"])), indent + 2)
        if c.get("args"):
            t.field("Args", " ".join(map(str, c["args"])), indent + 2)
        t.field("Resources", _resources_text(c.get("resources")), indent + 2)
        env = ["%s=%s" % (e.get("name"), _env_value(e)) for e in c.get("env") or [] if isinstance(e, dict)]
        if env:
            t.field("Environment", env, indent + 2)
        sources = [_env_source(s) for s in c.get("envFrom") or [] if isinstance(s, dict)]
        if sources:
            t.field("Environment Variables from", sources, indent + 2)
        mounts = ["%s from %s (%s)%s" % (m.get("mountPath"), m.get("name"), "ro" if m.get("readOnly") else "rw",
                                         " subpath %s" % m["subPath"] if m.get("subPath") else "")
                  for m in c.get("volumeMounts") or [] if isinstance(m, dict)]
        if mounts:
            t.field("Mounts", mounts, indent + 2)
        for probe in ("livenessProbe", "readinessProbe"):
            if c.get(probe):
                t.field(probe[0].upper() + probe[1:-5] + " probe", _probe(c[probe]), indent + 2)
        s = by_name.get(c.get("name"))
        if s is not None:
            state = s.get("state") or {}
            if state:
                kind = next(iter(state))
                detail = state[kind] or {}
                extra = detail.get("reason") or detail.get("startedAt") or ""
                if kind == "terminated" and "exitCode" in detail:
                    extra = "%s (exit code %s)" % (detail.get("reason") or "", detail["exitCode"])
                t.field("State", ("%s %s" % (kind.capitalize(), extra)).strip(), indent + 2)
            t.field("Ready", str(bool(s.get("ready"))), indent + 2)
            t.field("Restart Count", str(s.get("restartCount") or 0), indent + 2)
            if s.get("containerID"):
                t.field("Container ID", s["containerID"], indent + 2)


def _env_value(e):
    """An env var's value as kubectl describe shows it: where a reference points, not what it holds."""
    source = e.get("valueFrom")
    if not isinstance(source, dict):
        return e.get("value", "")
    for key, what in (("secretKeyRef", "in secret"), ("configMapKeyRef", "of config map")):
        ref = source.get(key)
        if isinstance(ref, dict):
            return "<set to the key '%s' %s '%s'>%s" % (ref.get("key"), what, ref.get("name"),
                                                        " (optional)" if ref.get("optional") else "")
    ref = source.get("fieldRef")
    if isinstance(ref, dict):
        return "(%s:%s)" % (ref.get("apiVersion") or "v1", ref.get("fieldPath"))
    ref = source.get("resourceFieldRef")
    if isinstance(ref, dict):
        return "%s (%s)" % (ref.get("resource"), ref.get("containerName") or "this container")
    return "<set from %s>" % ", ".join(sorted(source))


def _env_source(s):
    for key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
        ref = s.get(key)
        if isinstance(ref, dict):
            return "%s %s%s%s" % (ref.get("name"), kind, " (optional)" if ref.get("optional") else "",
                                  " with prefix %s" % s["prefix"] if s.get("prefix") else "")
    return "<unknown source>"


def _volume_source(v):
    for key, show in (("configMap", lambda s: "ConfigMap %s" % s.get("name")),
                      ("secret", lambda s: "Secret %s" % s.get("secretName")),
                      ("emptyDir", lambda s: "EmptyDir%s" % (" (%s)" % s["medium"] if s.get("medium") else "")),
                      ("hostPath", lambda s: "HostPath %s%s" % (s.get("path"), " (%s)" % s["type"] if s.get("type")
                                                              else "")),
                      ("projected", lambda s: "Projected")):
        if isinstance(v.get(key), dict):
            return show(v[key])
    return "<unknown source>"


def _probe(p):
    if p.get("httpGet"):
        g = p["httpGet"]
        what = "http-get :%s%s" % (g.get("port"), g.get("path") or "/")
    elif p.get("tcpSocket"):
        what = "tcp-socket :%s" % p["tcpSocket"].get("port")
    elif p.get("exec"):
        what = "exec %s" % " ".join(map(str, p["exec"].get("command") or []))
    else:
        what = "?"
    return "%s delay=%ss period=%ss" % (what, p.get("initialDelaySeconds", 0), p.get("periodSeconds", 10))


def _describe_pod(t, pod):
    sp, st = spec(pod), status(pod)
    t.field("Node", sp.get("nodeName"))
    t.field("Status", printers.pod_status(pod))
    t.field("Phase", st.get("phase"))
    if st.get("reason") or st.get("message"):
        t.field("Reason", st.get("reason"))
        t.field("Message", st.get("message"))
    t.field("IP", st.get("podIP"))
    if st.get("startTime"):
        t.field("Start Time", st.get("startTime"))
    if sp.get("restartPolicy"):
        t.field("Restart Policy", sp.get("restartPolicy"))
    owners = ["%s/%s" % (o.get("kind"), o.get("name")) for o in meta(pod).get("ownerReferences") or []]
    t.field("Controlled By", owners)
    _containers(t, sp.get("containers") or [], st.get("containerStatuses"))
    _conditions(t, pod)
    volumes = [v for v in sp.get("volumes") or [] if isinstance(v, dict)]
    if volumes:
        t.heading("Volumes")
        t.table(["Name", "Source"], [[v.get("name") or "", _volume_source(v)] for v in volumes])
    if sp.get("nodeSelector"):
        t.field("Node-Selectors", _pairs(sp["nodeSelector"]))


def _describe_deployment(t, d):
    sp, st = spec(d), status(d)
    t.field("Selector", ",".join(_pairs((sp.get("selector") or {}).get("matchLabels"))))
    t.field("Replicas", "%s desired | %s updated | %s total | %s available | %s unavailable" % (
        sp.get("replicas", 1), st.get("updatedReplicas") or 0, st.get("replicas") or 0,
        st.get("availableReplicas") or 0, st.get("unavailableReplicas") or 0))
    strategy = sp.get("strategy") or {}
    t.field("StrategyType", strategy.get("type") or "RollingUpdate")
    ru = strategy.get("rollingUpdate")
    if ru:
        t.field("RollingUpdateStrategy", "%s max unavailable, %s max surge" % (
            ru.get("maxUnavailable", "25%"), ru.get("maxSurge", "25%")))
    t.field("Observed Gen", st.get("observedGeneration"))
    template = sp.get("template") or {}
    t.heading("Pod Template")
    t.field("Labels", _pairs(meta(template).get("labels")), 1)
    _containers(t, spec(template).get("containers") or [], indent=1)
    _conditions(t, d)


def _describe_service(t, s):
    sp = spec(s)
    t.field("Selector", ",".join(_pairs(sp.get("selector"))))
    t.field("Type", sp.get("type") or "ClusterIP")
    if sp.get("clusterIP"):
        t.field("IP", sp["clusterIP"])
    for p in sp.get("ports") or []:
        name = p.get("name") or "<unset>"
        t.field("Port", "%s  %s/%s" % (name, p.get("port"), p.get("protocol") or "TCP"))
        t.field("TargetPort", "%s/%s" % (p.get("targetPort", p.get("port")), p.get("protocol") or "TCP"))
        if p.get("nodePort"):
            t.field("NodePort", "%s  %s/%s" % (name, p["nodePort"], p.get("protocol") or "TCP"))


def _describe_node(t, n):
    sp, st = spec(n), status(n)
    t.field("Roles", printers.node_roles(n))
    t.field("Status", printers.node_status(n))
    t.field("Unschedulable", str(bool(sp.get("unschedulable"))).lower())
    if sp.get("taints"):
        t.field("Taints", ["%s=%s:%s" % (x.get("key"), x.get("value", ""), x.get("effect"))
                           for x in sp["taints"]])
    _conditions(t, n)
    t.heading("Addresses")
    addrs = st.get("addresses") or []
    if not addrs:
        t.line("<none>", 1)
    for a in addrs:
        t.field(a.get("type", "?"), a.get("address"), 1)
    for section in ("capacity", "allocatable"):
        t.heading(section.capitalize())
        vals = st.get(section) or {}
        if not vals:
            t.line("<none>", 1)
        for k, v in vals.items():
            t.field(k, str(v), 1)
    if st.get("nodeInfo"):
        t.heading("System Info")
        for k, v in st["nodeInfo"].items():
            t.field(k, str(v), 1)
    _node_usage(t, n)


def _node_usage(t, n):
    """status.usage, as the agent last posted it."""
    from .top import node_usage
    figures = node_usage(n, None)
    t.heading("Usage")
    if figures is None:
        t.line("metrics not available yet (the agent has not posted usage)", 1)
        return
    usage = status(n).get("usage") or {}

    def show(value, fmt):
        return "<unknown>" if value is None else fmt % value
    t.field("CPU", show(figures["cpu"], "%.1f%%"), 1)
    memory = show(figures["memory"] and figures["memory"] // (1024 * 1024), "%dMi used")
    if figures["memory%"] is not None:
        memory += " (%.0f%%)" % figures["memory%"]
    if isinstance(usage.get("memoryAvailableBytes"), (int, float)):
        memory += ", %dMi available" % (usage["memoryAvailableBytes"] // (1024 * 1024))
    t.field("Memory", memory, 1)
    disk = show(figures["disk"], "%.0f%%")
    if isinstance(usage.get("diskUsedBytes"), (int, float)) and isinstance(usage.get("diskTotalBytes"), (int, float)):
        disk += " (%dGi of %dGi)" % (usage["diskUsedBytes"] // 2 ** 30, usage["diskTotalBytes"] // 2 ** 30)
    t.field("Disk", disk, 1)
    loads = [usage.get(k) for k in ("load1", "load5", "load15")]
    t.field("Load", " ".join("%.2f" % v if isinstance(v, (int, float)) else "?" for v in loads), 1)
    t.field("Containers", show(figures["containers"], "%d"), 1)
    t.field("Sampled", "%s (%s ago)" % (usage.get("timestamp"), printers.age(usage.get("timestamp")))
            if usage.get("timestamp") else None, 1)


def _node_pods(t, client, n, now):
    """The pods bound to the node (not finished)."""
    name = meta(n).get("name")
    items = (client.list("pods", None, field_selector="spec.nodeName=%s" % name, consistent=False)
             or {}).get("items") or []
    items = [p for p in items if status(p).get("phase") not in ("Succeeded", "Failed")]
    t.heading("Non-terminated Pods (%d)" % len(items))
    if not items:
        t.line("<none>", 1)
        return
    rows = [[meta(p).get("namespace") or "", meta(p).get("name") or "", printers.pod_status(p),
             printers.age(meta(p).get("creationTimestamp"), now)]
            for p in printers.sort_objects(RESOURCES["pods"], items)]
    t.table(["Namespace", "Name", "Status", "Age"], rows)


def _describe_namespace(t, ns):
    t.field("Status", status(ns).get("phase") or "Active")
    if status(ns).get("conditions"):        # a Terminating namespace: what its deletion waits for
        _conditions(t, ns)


def _describe_endpoints(t, ep):
    t.heading("Subsets")
    subsets = ep.get("subsets") or []
    if not subsets:
        t.line("<none>", 1)
    for s in subsets:
        t.field("Addresses", ",".join(a.get("ip", "") for a in s.get("addresses") or []) or None, 1)
        t.field("NotReadyAddresses",
                ",".join(a.get("ip", "") for a in s.get("notReadyAddresses") or []) or None, 1)
        t.field("Ports", ["%s %s/%s" % (p.get("name") or "<unset>", p.get("port"), p.get("protocol") or "TCP")
                          for p in s.get("ports") or []], 1)


def _describe_event(t, ev):
    t.field("Type", ev.get("type"))
    t.field("Reason", ev.get("reason"))
    t.field("Object", printers.event_object(ev))
    t.field("Message", ev.get("message") or ev.get("note"))
    t.field("Count", ev.get("count"))
    t.field("First Seen", ev.get("firstTimestamp"))
    t.field("Last Seen", printers.event_time(ev))
    src = ev.get("source") or {}
    t.field("Source", src.get("component") or ev.get("reportingComponent"))


DESCRIBERS = {
    "pods": _describe_pod,
    "deployments": _describe_deployment,
    "services": _describe_service,
    "nodes": _describe_node,
    "namespaces": _describe_namespace,
    "endpoints": _describe_endpoints,
    "events": _describe_event,
}


def object_events(client, r, obj):
    """Events about obj, oldest first.  Uses the involvedObject field
    selector; falls back to filtering locally if the server refuses it."""
    m = meta(obj)
    name, kind = m.get("name"), obj.get("kind") or r.kind
    namespace = m.get("namespace") if r.namespaced else None
    selector = "involvedObject.name=%s,involvedObject.kind=%s" % (name, kind)
    try:
        items = (client.list("events", namespace, field_selector=selector) or {}).get("items") or []
    except ApiError as exc:
        if exc.code != 400:
            raise
        items = (client.list("events", namespace) or {}).get("items") or []
    # A node's agent names its Node by its name as uid (as the kubelet does), the control
    # plane by the Node's uid: kubectl describe node shows both.
    uids = {m.get("uid"), name} if kind == "Node" else {m.get("uid")}
    out = []
    for ev in items:
        io = ev.get("involvedObject") or ev.get("regarding") or {}
        if io.get("name") == name and (io.get("kind") or kind) == kind and \
                (not io.get("uid") or not m.get("uid") or io.get("uid") in uids):
            out.append(ev)
    return printers.sort_objects(RESOURCES["events"], out)


def describe(client, r, obj, now=None):
    now = now or datetime.now(timezone.utc)
    m = meta(obj)
    t = Text()
    t.field("Name", m.get("name"))
    if r.namespaced:
        t.field("Namespace", m.get("namespace"))
    t.field("Labels", _pairs(m.get("labels")))
    t.field("Annotations", _pairs(m.get("annotations")))
    t.field("CreationTimestamp", "%s (%s ago)" % (m.get("creationTimestamp"),
                                                  printers.age(m.get("creationTimestamp"), now))
            if m.get("creationTimestamp") else None)
    if m.get("deletionTimestamp"):
        t.field("DeletionTimestamp", m["deletionTimestamp"])
    t.field("UID", m.get("uid"))
    t.field("ResourceVersion", m.get("resourceVersion"))
    if m.get("generation") is not None and r.plural in ("deployments", "pods", "services", "nodes"):
        t.field("Generation", m.get("generation"))
    fn = DESCRIBERS.get(r.plural)
    if fn is not None:
        fn(t, obj)
        if r.plural == "nodes":
            _node_pods(t, client, obj, now)
    else:
        if obj.get("spec"):
            t.heading("Spec")
            t.block(obj["spec"])
        if obj.get("status"):
            t.heading("Status")
            t.block(obj["status"])
    if r.plural != "events":
        events = object_events(client, r, obj)
        if not events:
            t.field("Events", None)
        else:
            t.heading("Events")
            rows = []
            for ev in events:
                src = (ev.get("source") or {}).get("component") or ev.get("reportingComponent") or ""
                rows.append([ev.get("type") or "Normal", ev.get("reason") or "",
                             printers.event_last_seen(ev, now), src,
                             (ev.get("message") or ev.get("note") or "").replace("\n", " ")])
            t.table(["Type", "Reason", "Age", "From", "Message"], rows)
    return t.render()


def run(args, ctx):
    r, targets = parse_targets(args.resource, args.names)
    client = ctx.client
    failed = False
    pairs = []
    if not targets:
        if r is None:
            raise UserError("describe needs a RESOURCE")
        namespace = None if (ctx.all_namespaces or not r.namespaced) else ctx.namespace
        items = (client.list(r, namespace, args.selector) or {}).get("items") or []
        if not items:
            ctx.error("No resources found" + (" in %s namespace." % namespace if namespace else ""))
            return 0
        pairs = [(r, o) for o in printers.sort_objects(r, items)]
    else:
        for tr, name in targets:
            try:
                pairs.append((tr, client.get(tr, name, ctx.namespace)))
            except ApiError as exc:
                if exc.code != 404:
                    raise
                ctx.error("Error from server (%s): %s" % (exc.reason, exc.message))
                failed = True
    for i, (tr, obj) in enumerate(pairs):
        if i:
            ctx.print()
            ctx.print()
        ctx.print(describe(client, tr, obj))
    return 1 if failed else 0
