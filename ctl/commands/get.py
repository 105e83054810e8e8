"""sheepctl get RESOURCE [NAME...] [-o wide|yaml|json|name] [-l SEL] [--field-selector S] [-w]"""
from shepherd_ha.client import ApiError, WatchExpired

from .. import printers
from ..context import UserError, parse_targets, resolve_resource

OUTPUTS = ("wide", "yaml", "json", "name")


def register(sub, common):
    p = sub.add_parser(
        "get", parents=[common], help="show one or many resources",
        description="Show resources as a table (or wide, yaml, json, name). RESOURCE is a plural, "
                    "singular or short name: pods/po, deployments/deploy, services/svc, nodes/no, "
                    "namespaces/ns, endpoints/ep, events/ev; TYPE/NAME works too.")
    p.add_argument("resource", metavar="RESOURCE")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-o", "--output", choices=OUTPUTS, help="output format")
    p.add_argument("-l", "--selector", help="label selector, e.g. app=web,tier!=db")
    p.add_argument("--field-selector", help="field selector, e.g. spec.nodeName=n1")
    p.add_argument("-w", "--watch", action="store_true",
                   help="after listing, watch for changes")
    p.add_argument("--stale", action="store_true",
                   help="read the answering replica's local state (resourceVersion=0): works "
                        "without a quorum, may be slightly behind")
    p.set_defaults(func=run)


def no_resources_message(r, namespace):
    if namespace and r.namespaced:
        return "No resources found in %s namespace." % namespace
    return "No resources found"


def with_kind(r, obj):
    """The object with apiVersion and kind filled in and first (list items
    may come without them)."""
    if not isinstance(obj, dict):
        return obj
    out = {"apiVersion": obj.get("apiVersion") or r.api_version, "kind": obj.get("kind") or r.kind}
    for key in ("metadata", "spec"):
        if key in obj:
            out[key] = obj[key]
    for key, value in obj.items():
        out.setdefault(key, value)
    return out


def print_objects(ctx, pairs, output, single, with_namespace=False, prefix=None):
    """pairs: [(Resource, object)]; prefix: show type/name in the NAME column
    (default: when there are several resource types)."""
    if prefix is None:
        prefix = len({r.plural for r, _o in pairs}) > 1
    objs = [o for _r, o in pairs]
    if output == "json":
        ctx.print(printers.to_json(objs[0] if single and len(objs) == 1 else printers.as_list(objs)))
    elif output == "yaml":
        ctx.out.write(printers.to_yaml(objs[0] if single and len(objs) == 1 else printers.as_list(objs)))
    elif output == "name":
        for r, o in pairs:
            ctx.print(printers.object_name(r, printers.meta(o).get("name")))
    else:
        groups = []
        for r, o in pairs:
            if groups and groups[-1][0] is r:
                groups[-1][1].append(o)
            else:
                groups.append((r, [o]))
        for i, (r, items) in enumerate(groups):
            if i:
                ctx.print()
            for line in printers.render_table(r, items, output == "wide",
                                              with_namespace and r.namespaced, prefix=prefix):
                ctx.print(line)


def _types(arg):
    """`deploy,svc` -> [Resource, ...] (no duplicates)."""
    out = []
    for part in arg.split(","):
        if not part.strip():
            continue
        r = resolve_resource(part.strip())
        if r not in out:
            out.append(r)
    if not out:
        raise UserError("no resource type given")
    return out


def run(args, ctx):
    if "," in args.resource and "/" not in args.resource:
        types = _types(args.resource)
        if args.watch:
            raise UserError("you may only specify a single resource type with --watch")
        if args.names:
            r, targets = None, [(t, n) for t in types for n in args.names]
        else:
            return run_lists(args, ctx, types)
    else:
        r, targets = parse_targets(args.resource, args.names)
    client = ctx.client
    if targets:
        if args.selector or args.field_selector:
            raise UserError("NAME and a selector (-l/--field-selector) cannot be combined")
        if ctx.all_namespaces:
            raise UserError("a resource cannot be retrieved by name across all namespaces")
        if args.watch and len(targets) != 1:
            raise UserError("watch is only supported on individual resources and resource "
                            "collections, but %d resources were found" % len(targets))
        pairs, failed = [], False
        for tr, name in targets:
            try:
                pairs.append((tr, with_kind(tr, client.get(tr, name, ctx.namespace, consistent=not args.stale))))
            except ApiError as exc:
                if exc.code != 404:
                    raise
                ctx.error("Error from server (%s): %s" % (exc.reason, exc.message))
                failed = True
        if pairs:
            print_objects(ctx, pairs, args.output, single=len(targets) == 1)
        if args.watch and not failed:
            tr, name = targets[0]
            rv = printers.meta(pairs[0][1]).get("resourceVersion")
            return follow(ctx, tr, ctx.namespace if tr.namespaced else None, args, rv,
                          "metadata.name=%s" % name, False, header_printed=True)
        return 1 if failed else 0

    if r is None:
        raise UserError("no names given for the resource(s)")
    namespace = None if (ctx.all_namespaces or not r.namespaced) else ctx.namespace
    with_ns = ctx.all_namespaces and r.namespaced
    listed = client.list(r, namespace, args.selector, args.field_selector,
                         consistent=not args.stale) or {}
    items = printers.sort_objects(r, [with_kind(r, o) for o in listed.get("items") or []])
    table = args.output in (None, "wide")
    printer = printers.TablePrinter(printers.table_headers(r, args.output == "wide", with_ns),
                                    ctx.out)
    if args.watch and table:
        if items:
            printer.print_rows([printers.table_row(r, o, args.output == "wide", with_ns)
                                for o in items])
    elif items or not table and args.output != "name":
        print_objects(ctx, [(r, o) for o in items], args.output, single=False,
                      with_namespace=with_ns)
    if not items and not args.watch and args.output not in ("json", "yaml"):
        ctx.error(no_resources_message(r, namespace))
    if args.watch:
        rv = (listed.get("metadata") or {}).get("resourceVersion")
        return follow(ctx, r, namespace, args, rv, args.field_selector, with_ns,
                      printer, header_printed=bool(items))
    return 0


def run_lists(args, ctx, types):
    """get TYPE1,TYPE2: one table per type that has objects; one List for json/yaml."""
    pairs = []
    for r in types:
        namespace = None if (ctx.all_namespaces or not r.namespaced) else ctx.namespace
        listed = ctx.client.list(r, namespace, args.selector, args.field_selector,
                                 consistent=not args.stale) or {}
        pairs.extend((r, with_kind(r, o)) for o in printers.sort_objects(r, listed.get("items") or []))
    if pairs or args.output in ("json", "yaml"):
        print_objects(ctx, pairs, args.output, single=False, with_namespace=ctx.all_namespaces,
                      prefix=True)
    else:
        namespaced = any(r.namespaced for r in types) and not ctx.all_namespaces
        ctx.error("No resources found in %s namespace." % ctx.namespace if namespaced
                  else "No resources found")
    return 0


def follow(ctx, r, namespace, args, rv, field_selector, with_ns, printer=None,
           header_printed=False):
    """Print every change after revision rv until interrupted."""
    if printer is None:
        printer = printers.TablePrinter(printers.table_headers(r, args.output == "wide", with_ns),
                                        ctx.out)
    state = {"header": header_printed}

    def emit(obj):
        obj = with_kind(r, obj)
        if args.output == "json":
            ctx.print(printers.to_json(obj))
        elif args.output == "yaml":
            ctx.out.write("---\n" + printers.to_yaml(obj))
            ctx.out.flush()
        elif args.output == "name":
            ctx.print(printers.object_name(r, printers.meta(obj).get("name")))
        else:
            row = printers.table_row(r, obj, args.output == "wide", with_ns)
            printer.print_rows([row], header=not state["header"])
            state["header"] = True

    try:
        while True:
            try:
                for event in ctx.client.watch(r, namespace, resource_version=rv or None,
                                              label_selector=args.selector,
                                              field_selector=field_selector):
                    if event.get("type") == "BOOKMARK":
                        rv = printers.meta(event.get("object")).get("resourceVersion") or rv
                        continue
                    obj = event.get("object") or {}
                    rv = printers.meta(obj).get("resourceVersion") or rv
                    emit(obj)
                return 0
            except WatchExpired:
                # the replica's history no longer reaches our revision: list again
                listed = ctx.client.list(r, namespace, args.selector, field_selector) or {}
                for obj in printers.sort_objects(r, listed.get("items") or []):
                    emit(obj)
                rv = (listed.get("metadata") or {}).get("resourceVersion")
    except KeyboardInterrupt:
        return 0
