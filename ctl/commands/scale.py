"""sheepctl scale deployment NAME --replicas N"""
from .. import printers
from ..context import UserError, parse_targets


def register(sub, common):
    p = sub.add_parser("scale", parents=[common], help="set the number of replicas of a deployment")
    p.add_argument("resource", metavar="RESOURCE")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("--replicas", type=int, required=True)
    p.set_defaults(func=run)


def run(args, ctx):
    if args.replicas < 0:
        raise UserError("--replicas must be 0 or more")
    _r, targets = parse_targets(args.resource, args.names)
    if not targets:
        raise UserError("scale needs a NAME")
    for r, name in targets:
        if "scale" not in r.subresources:
            raise UserError("%s cannot be scaled (only deployments)" % r.plural)
    for r, name in targets:
        ctx.client.scale(r, name, args.replicas, ctx.namespace if r.namespaced else None)
        ctx.print("%s scaled" % printers.object_name(r, name))
    return 0
