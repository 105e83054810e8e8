"""sheepctl top nodes [NAME...] [-l SELECTOR] [--sort-by cpu|memory|disk|load|pods]
sheepctl top pods [NAME...] [-n NS | -A] [-l SELECTOR] [--containers] [--sort-by cpu|memory]

Nodes: usage as the agents post it in each Node's status.usage (psutil samples, every
30 s by default or on a large change); AGE is how old the sample is. Pods: the
metrics.k8s.io PodMetrics the API asks the pods' agents for (api/pod_metrics.py), in
kubectl's columns: CPU in millicores, memory (the working set) in Mi.
"""
from datetime import datetime, timezone

from shepherd_ha.model.quantity import QuantityError, parse_memory, usage_millicores

from .. import printers
from ..context import UserError

HEADERS = ["NAME", "CPU%", "MEMORY(bytes)", "MEMORY%", "DISK%", "LOAD", "PODS", "CONTAINERS", "AGE"]
TERMINAL = ("Succeeded", "Failed")
UNKNOWN = "<unknown>"
SORT_KEYS = ("cpu", "memory", "disk", "load", "pods", "name")


def register(sub, common):
    p = sub.add_parser("top", parents=[common], help="resource usage of nodes (from their agents)")
    p.add_argument("what", metavar="nodes|pods", help="nodes, or pods (their containers' usage, from their agents)")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-l", "--selector", help="label selector of the nodes or pods")
    p.add_argument("--sort-by", choices=SORT_KEYS, help="sort by this column (largest first; pods: cpu or memory)")
    p.add_argument("--containers", action="store_true", help="pods: one row per container")
    p.set_defaults(func=run)


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _percent(part, whole):
    if part is None or not whole:
        return None
    return 100.0 * part / whole


def _mebibytes(n):
    return "%dMi" % (n // (1024 * 1024))


def node_usage(node, pods_on_node):
    """The figures of one node: a dict (values None when unknown), or None without usage."""
    st = printers.status(node)
    usage = st.get("usage")
    if not isinstance(usage, dict) or not usage:
        return None
    used = _number(usage.get("memoryUsedBytes"))
    total = None
    try:
        total = parse_memory((st.get("capacity") or {}).get("memory"))
    except (QuantityError, TypeError, ValueError):
        total = None
    if not total and used is not None and _number(usage.get("memoryAvailableBytes")) is not None:
        total = used + usage["memoryAvailableBytes"]
    return {"cpu": _number(usage.get("cpuPercent")), "memory": used, "memory%": _percent(used, total),
            "disk": _percent(_number(usage.get("diskUsedBytes")), _number(usage.get("diskTotalBytes"))),
            "load": _number(usage.get("load1")), "pods": pods_on_node,
            "containers": _number(usage.get("containers")), "timestamp": usage.get("timestamp")}


def usage_row(name, figures, now):
    def pct(v):
        return UNKNOWN if v is None else "%d%%" % round(v)
    return [name, pct(figures["cpu"]),
            UNKNOWN if figures["memory"] is None else _mebibytes(int(figures["memory"])),
            pct(figures["memory%"]), pct(figures["disk"]),
            UNKNOWN if figures["load"] is None else "%.2f" % figures["load"],
            str(figures["pods"]), UNKNOWN if figures["containers"] is None else str(int(figures["containers"])),
            printers.age(figures["timestamp"], now)]


def pods_per_node(pods):
    counts = {}
    for p in pods:
        node = printers.spec(p).get("nodeName")
        if node and printers.status(p).get("phase") not in TERMINAL:
            counts[node] = counts.get(node, 0) + 1
    return counts


def top_nodes(client, names=(), selector=None, sort_by=None, now=None):
    """(rows, names of nodes without usage)."""
    now = now or datetime.now(timezone.utc)
    if names:
        nodes = [client.get("nodes", n) for n in names]
    else:
        nodes = (client.list("nodes", label_selector=selector) or {}).get("items") or []
    pods = (client.list("pods", None, consistent=False) or {}).get("items") or []
    counts = pods_per_node(pods)
    entries = []
    for n in nodes:
        name = printers.meta(n).get("name")
        figures = node_usage(n, counts.get(name, 0))
        entries.append((name, figures, counts.get(name, 0)))
    entries.sort(key=lambda e: e[0] or "")
    if sort_by and sort_by != "name":
        # largest first; nodes without usage last
        entries.sort(key=lambda e: -(e[1].get(sort_by) or 0) if e[1] else float("inf"))
    rows, missing = [], []
    for name, figures, count in entries:
        if figures is None:
            missing.append(name)
            rows.append([name] + [UNKNOWN] * 5 + [str(count)] + [UNKNOWN] * 2)
        else:
            rows.append(usage_row(name, figures, now))
    return rows, missing


def _millicores(value):
    """A metrics-server CPU quantity ("12345678n", "5m", "1") in millicores (rounded up, as
    kubectl prints it), or None."""
    try:
        return usage_millicores(value)
    except ValueError:
        return None


def _memory_bytes(value):
    try:
        return parse_memory(value)
    except (TypeError, QuantityError):
        return None


def pod_rows(items, containers=False, all_namespaces=False, sort_by=None):
    """Rows of `kubectl top pods` from PodMetrics items: per pod, or per container."""
    entries = []
    for item in items:
        meta = item.get("metadata") or {}
        for c in item.get("containers") or []:
            usage = c.get("usage") or {}
            entries.append((meta.get("namespace") or "", meta.get("name") or "", c.get("name") or "",
                            _millicores(usage.get("cpu")), _memory_bytes(usage.get("memory"))))
    if not containers:      # summed per pod
        summed = {}
        for ns, pod, _c, cpu, mem in entries:       # one unreadable figure makes the pod's unknown
            total = summed.setdefault((ns, pod), [0, 0])
            total[0] = None if cpu is None or total[0] is None else total[0] + cpu
            total[1] = None if mem is None or total[1] is None else total[1] + mem
        entries = [(ns, pod, None, cpu, mem) for (ns, pod), (cpu, mem) in summed.items()]
    entries.sort(key=lambda e: (e[0], e[1], e[2] or ""))
    if sort_by in ("cpu", "memory"):
        entries.sort(key=lambda e: -((e[3] if sort_by == "cpu" else e[4]) or 0))
    rows = []
    for ns, pod, container, cpu, mem in entries:
        row = ([ns] if all_namespaces else []) + [pod] + ([container] if containers else [])
        rows.append(row + [UNKNOWN if cpu is None else "%dm" % cpu,
                           UNKNOWN if mem is None else _mebibytes(mem)])
    headers = (["NAMESPACE"] if all_namespaces else []) + (["POD", "NAME"] if containers else ["NAME"]) \
        + ["CPU(cores)", "MEMORY(bytes)"]
    return headers, rows


def top_pods(args, ctx):
    if args.sort_by not in (None, "cpu", "memory"):
        raise UserError("top pods sorts by cpu or memory, not %s" % args.sort_by)
    if args.names and args.all_namespaces:
        raise UserError("a pod cannot be named across all namespaces: give -n NAMESPACE instead of -A")
    base = "/apis/metrics.k8s.io/v1beta1"
    params = {"labelSelector": args.selector} if args.selector else None
    if args.all_namespaces:
        items = (ctx.client.request("GET", base + "/pods", params=params) or {}).get("items") or []
    elif args.names:
        items = [ctx.client.request("GET", "%s/namespaces/%s/pods/%s" % (base, ctx.namespace, name))
                 for name in args.names]
    else:
        items = (ctx.client.request("GET", "%s/namespaces/%s/pods" % (base, ctx.namespace), params=params)
                 or {}).get("items") or []
    if not items:
        ctx.error("No resources found" + ("" if args.all_namespaces else " in %s namespace." % ctx.namespace))
        return 0
    headers, rows = pod_rows(items, args.containers, args.all_namespaces, args.sort_by)
    for line in printers.format_table(headers, rows):
        ctx.print(line)
    return 0


def run(args, ctx):
    what = args.what.lower()
    if what in ("pod", "pods", "po"):
        return top_pods(args, ctx)
    if what not in ("node", "nodes", "no"):
        raise UserError("top takes nodes (got %r)" % args.what)
    rows, missing = top_nodes(ctx.client, args.names, args.selector, args.sort_by)
    if not rows:
        ctx.error("No resources found")
        return 0
    if len(missing) == len(rows):
        ctx.error("error: metrics not available yet: no agent has posted usage (they do every 30 s by default)")
        return 1
    for line in printers.format_table(HEADERS, rows):
        ctx.print(line)
    for name in missing:
        ctx.error("node %s: metrics not available yet (its agent has not posted usage)" % name)
    return 0
