"""sheepctl cluster status [-o json]; add-replica, remove-replica (cluster_members.py); snapshot save FILE
(snapshot.py)"""
from .. import printers
from . import cluster_members, snapshot


def register(sub, common):
    p = sub.add_parser("cluster", parents=[common], help="the control plane replicas")
    csub = p.add_subparsers(dest="cluster_command", metavar="COMMAND")
    s = csub.add_parser("status", parents=[common],
                        help="each replica's role, term, commit and applied index, reachability")
    s.add_argument("-o", "--output", choices=("json", "yaml"))
    s.set_defaults(func=run_status)
    cluster_members.register(csub, common)
    snapshot.register(csub, common)
    p.set_defaults(func=run_status, output=None)


def _cell(value):
    return "-" if value is None or value == "" else str(value)


def run_status(args, ctx):
    info = ctx.client.cluster() or {}
    if args.output == "json":
        ctx.print(printers.to_json(info))
        return 0
    if args.output == "yaml":
        ctx.out.write(printers.to_yaml(info))
        return 0
    leader = info.get("leader")
    rows = []
    for rep in info.get("replicas") or []:
        rid = _cell(rep.get("id"))
        if leader and rep.get("id") == leader:
            rid += "*"
        reachable = rep.get("reachable")
        rows.append([rid, _cell(rep.get("role")), _cell(rep.get("term")), _cell(rep.get("commitIndex")),
                     _cell(rep.get("appliedIndex")), _cell(rep.get("revision")),
                     "yes" if reachable else ("no" if reachable is False else "-"),
                     _cell(rep.get("api"))])
    for line in printers.format_table(
            ["ID", "ROLE", "TERM", "COMMIT", "APPLIED", "REVISION", "REACHABLE", "API"], rows):
        ctx.print(line)
    if info.get("membership"):
        cluster_members.print_membership(ctx, info["membership"])
    seen_by = info.get("self")
    via = " (as seen by %s)" % seen_by if seen_by else ""
    if leader:
        ctx.print()
        ctx.print("* leader: %s%s" % (leader, via))
    else:
        ctx.print()
        ctx.print("no leader%s: the cluster has no quorum; writes and consistent reads answer 503"
                  % via)
    return 0
