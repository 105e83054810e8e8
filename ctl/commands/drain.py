"""sheepctl drain NODE: cordon the node, then evict (delete) its pods, like kubectl drain.

Pods with an owner (a controller ownerReference, e.g. a Deployment) are evicted and
their owner re-creates them elsewhere. A pod without an owner would be gone for
good, so drain refuses (listing them) unless --force; the node stays cordoned
either way, as with kubectl. Finished pods (Succeeded, Failed) are deleted
without asking.
"""
from shepherd_ha.client import ApiError
from shepherd_ha.model.resources import RESOURCES

from .. import printers

FINISHED = ("Succeeded", "Failed")


def register(sub, common):
    p = sub.add_parser("drain", parents=[common],
                       help="cordon a node and evict its pods (their owners re-create them elsewhere)")
    p.add_argument("node", metavar="NODE")
    p.add_argument("--force", action="store_true",
                   help="also delete pods that have no owner (they are not re-created)")
    p.set_defaults(func=run)


def _owned(pod):
    return bool(printers.meta(pod).get("ownerReferences"))


def _label(pod):
    meta = printers.meta(pod)
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def run(args, ctx):
    nodes, pods_r = RESOURCES["nodes"], RESOURCES["pods"]
    node = ctx.client.get(nodes, args.node)
    if printers.spec(node).get("unschedulable"):
        ctx.print("%s already cordoned" % printers.object_name(nodes, args.node))
    else:
        ctx.client.patch(nodes, args.node, {"spec": {"unschedulable": True}})
        ctx.print("%s cordoned" % printers.object_name(nodes, args.node))
    listed = ctx.client.list(pods_r, None, field_selector="spec.nodeName=%s" % args.node) or {}
    pods = sorted(listed.get("items") or [], key=_label)
    unowned = [p for p in pods if not _owned(p) and (p.get("status") or {}).get("phase") not in FINISHED]
    if unowned and not args.force:
        ctx.error("error: unable to drain node \"%s\": cannot delete pods that have no owner (use --force to "
                  "override): %s" % (args.node, ", ".join(_label(p) for p in unowned)))
        ctx.error("The node stays cordoned; `sheepctl uncordon %s` makes it schedulable again." % args.node)
        return 1
    if unowned:
        ctx.error("Warning: deleting pods that have no owner (they will not be re-created): %s"
                  % ", ".join(_label(p) for p in unowned))
    failed = False
    for p in pods:
        meta = printers.meta(p)
        ctx.print("evicting pod %s" % _label(p))
        try:
            ctx.client.delete(pods_r, meta.get("name"), meta.get("namespace"),
                              preconditions={"uid": meta["uid"]} if meta.get("uid") else None)
        except ApiError as exc:
            if exc.code == 404:         # already gone: that is what we wanted
                ctx.print("%s evicted" % printers.object_name(pods_r, meta.get("name")))
                continue
            if exc.code == 409:         # deleted and re-created under the same name: not ours to evict
                ctx.error("pod %s was re-created meanwhile; left alone" % _label(p))
                continue
            ctx.error("error evicting pod %s: %s" % (_label(p), exc.message))
            failed = True
            continue
        ctx.print("%s evicted" % printers.object_name(pods_r, meta.get("name")))
    if failed:
        ctx.error("error: node \"%s\" was not fully drained" % args.node)
        return 1
    ctx.print("%s drained" % printers.object_name(nodes, args.node))
    return 0
