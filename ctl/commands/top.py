"""sheepctl top nodes [NAME...] [-l SELECTOR] [--sort-by cpu|memory|disk|load|pods]

Usage as the agents post it in each Node's status.usage (psutil samples, every 30 s by
default or on a large change); AGE is how old the sample is.  Per-pod usage is not
collected, so `top pods` says so.
"""
from datetime import datetime, timezone

from shepherd_ha.model.quantity import QuantityError, parse_memory

from .. import printers
from ..context import UserError

HEADERS = ["NAME", "CPU%", "MEMORY(bytes)", "MEMORY%", "DISK%", "LOAD", "PODS", "CONTAINERS", "AGE"]
TERMINAL = ("Succeeded", "Failed")
UNKNOWN = "<unknown>"
SORT_KEYS = ("cpu", "memory", "disk", "load", "pods", "name")


def register(sub, common):
    p = sub.add_parser("top", parents=[common], help="resource usage of nodes (from their agents)")
    p.add_argument("what", metavar="nodes|pods", help="nodes (pods: not collected)")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-l", "--selector", help="label selector of the nodes")
    p.add_argument("--sort-by", choices=SORT_KEYS, help="sort by this column (largest first)")
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


def run(args, ctx):
    what = args.what.lower()
    if what in ("pod", "pods", "po"):
        raise UserError("per-pod usage is not collected by the agents; `sheepctl top nodes` shows each node's "
                        "usage and `sheepctl describe node NAME` its pods")
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
