"""sheepctl delete RESOURCE NAME... | delete -f PATH | delete RESOURCE -l SEL | --all [--wait]"""
import time

from shepherd_ha.client import ApiError

from .. import manifests, printers
from ..context import UserError, parse_targets

CASCADE = {"background": "Background", "true": "Background", "orphan": "Orphan", "false": "Orphan",
           "foreground": "Foreground"}


def register(sub, common):
    p = sub.add_parser("delete", parents=[common], help="delete resources by name, file or selector")
    p.add_argument("resource", nargs="?", metavar="RESOURCE")
    p.add_argument("names", nargs="*", metavar="NAME")
    p.add_argument("-f", "--filename", action="append", metavar="PATH",
                   help="delete the objects of these manifests")
    p.add_argument("-R", "--recursive", action="store_true")
    p.add_argument("-l", "--selector", help="delete every object matching this label selector")
    p.add_argument("--all", action="store_true", help="delete every object of the type in the namespace")
    p.add_argument("--cascade", default=None, metavar="background|foreground|orphan",
                   help="background (default): dependents are deleted too, after the object; foreground: "
                        "the object stays (marked deleted) until its dependents are gone; orphan: they are kept")
    p.add_argument("--ignore-not-found", action="store_true")
    p.add_argument("--grace-period", type=int, default=None, metavar="SECONDS",
                   help="seconds a pod's containers get between SIGTERM and SIGKILL (default: the pod's "
                        "terminationGracePeriodSeconds); 0 needs --force")
    p.add_argument("--force", action="store_true",
                   help="with --grace-period=0: delete at once, without waiting for the agent to stop the pod")
    p.add_argument("--wait", action="store_true",
                   help="return only once the objects are gone: pods stopped by their agents, namespaces "
                        "emptied, finalizers done (kubectl's default)")
    p.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="with --wait: give up (exit 1) after this long (default 300)")
    p.set_defaults(func=run)


POLL = 0.5       # seconds between two looks at an object being deleted


def _targets(args, ctx):
    if args.filename:
        if args.resource or args.names:
            raise UserError("pass either -f PATH or RESOURCE NAME..., not both")
        objs = manifests.load(args.filename, recursive=args.recursive,
                              stdin=getattr(ctx, "stdin", None))
        out = []
        for m in objs:
            ns = None
            if m.resource.namespaced:
                ns = m.namespace or ctx.namespace
            out.append((m.resource, m.name, ns))
        # namespaces last: their contents then go by name (a namespace deleted first would
        # refuse nothing, but its controller's deletes would race ours into NotFounds)
        return [t for t in out if t[0].plural != "namespaces"] + \
               [t for t in out if t[0].plural == "namespaces"]
    if not args.resource:
        raise UserError("you must specify the type of resource to delete, or -f PATH")
    r, pairs = parse_targets(args.resource, args.names)
    if args.selector or args.all:
        if pairs:
            raise UserError("names cannot be combined with --selector or --all")
        namespace = None if (ctx.all_namespaces or not r.namespaced) else ctx.namespace
        items = (ctx.client.list(r, namespace, args.selector) or {}).get("items") or []
        if not items:
            ctx.error("No resources found")
        return [(r, printers.meta(o).get("name"), printers.meta(o).get("namespace"))
                for o in printers.sort_objects(r, items)]
    if not pairs:
        raise UserError("resource(s) were provided, but no name was specified "
                        "(give NAME..., -l SELECTOR or --all)")
    return [(tr, name, ctx.namespace if tr.namespaced else None) for tr, name in pairs]


def run(args, ctx):
    policy = None
    if args.cascade is not None:
        key = args.cascade.lower()
        if key not in CASCADE:
            raise UserError("invalid --cascade %r: use background, foreground or orphan" % args.cascade)
        policy = CASCADE[key]
    grace = args.grace_period
    if grace is not None and grace < 0:
        raise UserError("--grace-period must be 0 or more seconds")
    if grace == 0 and not args.force:
        raise UserError("--grace-period=0 deletes without waiting for the pod to stop: add --force")
    if args.force and grace is None:
        grace = 0
    failed = False
    deleted = []
    for r, name, namespace in _targets(args, ctx):
        try:
            obj = ctx.client.delete(r, name, namespace, propagation_policy=policy, grace_period_seconds=grace)
        except ApiError as exc:
            if exc.code == 404 and args.ignore_not_found:
                continue
            ctx.error("Error from server (%s): %s" % (exc.reason, exc.message))
            failed = True
            continue
        ctx.print('%s "%s" deleted' % (printers.type_name(r), name))
        deleted.append((r, name, namespace, printers.meta(obj or {}).get("uid")))
    if args.wait:
        deadline = time.monotonic() + args.timeout
        for r, name, namespace, uid in deleted:
            if not _wait_gone(ctx, r, name, namespace, uid, deadline):
                ctx.error('error: timed out waiting for %s "%s" to be deleted (--timeout %gs)'
                          % (printers.type_name(r), name, args.timeout))
                return 1
    return 1 if failed else 0


def _wait_gone(ctx, r, name, namespace, uid, deadline):
    """Poll until the object is gone (or replaced by a namesake); print what it waits
    for when that changes. False when `deadline` passes first."""
    said = None
    while True:
        try:
            obj = ctx.client.get(r, name, namespace)
        except ApiError as exc:
            if exc.code == 404:
                return True
            if exc.code < 500 and exc.code != 429:
                raise
            obj = None            # an election, an overloaded replica: look again until the deadline
        if obj is not None and uid and printers.meta(obj).get("uid") != uid:
            return True
        why = _waiting_for(r, name, obj) if obj is not None else said
        if why != said:
            ctx.error(why)
            said = why
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL)


def _waiting_for(r, name, obj):
    """One line on what the deletion of `obj` waits for."""
    what = '%s "%s"' % (printers.type_name(r), name)
    meta = printers.meta(obj)
    if r.plural == "namespaces":
        conditions = {c.get("type"): c for c in printers.status(obj).get("conditions") or [] if isinstance(c, dict)}
        for kind in ("NamespaceFinalizersRemaining", "NamespaceContentRemaining"):
            if (conditions.get(kind) or {}).get("status") == "True":
                return "waiting for %s: %s" % (what, conditions[kind].get("message"))
    if r.plural == "pods" and meta.get("deletionGracePeriodSeconds") is not None:
        return "waiting for %s: its agent is stopping it (grace period %ss)" % (what, meta["deletionGracePeriodSeconds"])
    if meta.get("finalizers"):
        return "waiting for %s: finalizers %s" % (what, ", ".join(map(str, meta["finalizers"])))
    return "waiting for %s to be deleted" % what
