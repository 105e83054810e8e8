"""sheepctl cordon/uncordon NODE, api-resources"""
from shepherd_ha.model.resources import RESOURCES

from .. import printers


def register(sub, common):
    for verb, flag in (("cordon", True), ("uncordon", False)):
        p = sub.add_parser(verb, parents=[common],
                           help="mark a node %sschedulable" % ("un" if flag else ""))
        p.add_argument("nodes", nargs="+", metavar="NODE")
        p.set_defaults(func=run_cordon, unschedulable=flag, verb=verb)
    a = sub.add_parser("api-resources", parents=[common], help="the resource types the API serves")
    a.set_defaults(func=run_api_resources)


def run_cordon(args, ctx):
    r = RESOURCES["nodes"]
    for name in args.nodes:
        ctx.client.patch(r, name, {"spec": {"unschedulable": True if args.unschedulable else None}})
        ctx.print("%s %sed" % (printers.object_name(r, name), args.verb))
    return 0


def run_api_resources(args, ctx):
    rows = [[r.plural, ",".join(r.short_names), r.api_version, str(r.namespaced).lower(), r.kind]
            for r in sorted(RESOURCES.values(), key=lambda r: r.plural)]
    for line in printers.format_table(["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"], rows):
        ctx.print(line)
    return 0
