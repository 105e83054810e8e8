"""sheepctl apply -f PATH / create -f PATH / create namespace NAME / create deployment NAME --image I"""
import copy

from shepherd_ha.client import ApiError
from shepherd_ha.model.merge_patch import merge_patch

from .. import manifests, printers
from ..context import UserError

SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
                   "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds")


def register(sub, common):
    p = sub.add_parser(
        "apply", parents=[common], help="create or update resources from files",
        description="Create each object of the manifests, or update it when it exists and the "
                    "manifest differs from the live object (fields absent from the manifest are "
                    "kept; set a field to null to remove it).")
    _file_options(p, required=True)
    p.set_defaults(func=run_apply)

    c = sub.add_parser("create", parents=[common], help="create resources from files or arguments")
    _file_options(c, required=False)
    csub = c.add_subparsers(dest="create_what", metavar="KIND")
    ns = csub.add_parser("namespace", aliases=["ns"], parents=[common], help="create a namespace")
    ns.add_argument("name", metavar="NAME")
    ns.set_defaults(func=run_create_namespace)
    d = csub.add_parser("deployment", aliases=["deploy"], parents=[common],
                        help="create a deployment running one image")
    d.add_argument("name", metavar="NAME")
    d.add_argument("--image", required=True)
    d.add_argument("--replicas", type=int, default=1)
    d.add_argument("--port", type=int, help="container port to expose")
    d.set_defaults(func=run_create_deployment)
    c.set_defaults(func=run_create)


def _file_options(p, required):
    p.add_argument("-f", "--filename", action="append", required=required, default=None,
                   metavar="PATH", help="file, directory or - (stdin); YAML or JSON; repeatable")
    p.add_argument("-R", "--recursive", action="store_true",
                   help="read directories given with -f recursively")


def load(args, ctx):
    objs = manifests.load(args.filename, recursive=args.recursive, stdin=getattr(ctx, "stdin", None))
    # namespaces first so that objects in a new namespace can be created
    return [m for m in objs if m.resource.plural == "namespaces"] + \
           [m for m in objs if m.resource.plural != "namespaces"]


def target_namespace(ctx, m):
    if not m.resource.namespaced:
        return None
    if m.namespace:
        if ctx.namespace_given and ctx.args.namespace != m.namespace:
            raise UserError("%s: the namespace from the provided object %r does not match the "
                            "namespace %r. You must pass '--namespace=%s' to perform this operation."
                            % (m.where, m.namespace, ctx.args.namespace, m.namespace))
        return m.namespace
    return ctx.namespace


def desired_state(m, namespace):
    obj = copy.deepcopy(m.obj)
    obj.pop("status", None)
    meta = obj.setdefault("metadata", {})
    for k in SERVER_METADATA:
        meta.pop(k, None)
    if namespace:
        meta["namespace"] = namespace
    return obj


def contained(want, have):
    """True when applying `want` as a merge patch would not change `have`,
    tolerating fields the server added inside list items (defaults)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return False
        for k, v in want.items():
            if v is None:
                if have.get(k) is not None:
                    return False
            elif k not in have or not contained(v, have[k]):
                return False
        return True
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and \
            all(contained(a, b) for a, b in zip(want, have))
    if isinstance(want, bool) or isinstance(have, bool):
        return type(want) is type(have) and want == have
    return want == have


def _report_error(ctx, exc, verb, m):
    ctx.error('Error from server (%s): error when %s "%s": %s'
              % (exc.reason, verb, m.source, exc.message))


def apply_one(client, m, namespace):
    """-> "created" | "configured" | "unchanged"; raises ApiError."""
    r = m.resource
    want = desired_state(m, namespace)
    name = want["metadata"]["name"]
    try:
        live = client.get(r, name, namespace)
    except ApiError as exc:
        if exc.code != 404:
            raise
        client.create(r, want, namespace)
        return "created"
    if contained(want, live):
        return "unchanged"
    merged = merge_patch(live, want)
    merged.setdefault("metadata", {})["resourceVersion"] = (live.get("metadata") or {}).get(
        "resourceVersion")
    client.replace(r, merged)
    return "configured"


def run_apply(args, ctx):
    objs = load(args, ctx)
    client = ctx.client
    failed = False
    for m in objs:
        try:
            namespace = target_namespace(ctx, m)
            result = apply_one(client, m, namespace)
        except UserError as exc:
            ctx.error("error: %s" % exc)
            failed = True
            continue
        except ApiError as exc:
            failed = True
            if exc.code == 409 and exc.reason == "Conflict":
                ctx.error("%s %s changed since you read it; re-run apply"
                          % (m.resource.singular, m.name))
            else:
                _report_error(ctx, exc, "applying", m)
            continue
        ctx.print("%s %s" % (printers.object_name(m.resource, m.name), result))
    return 1 if failed else 0


def run_create(args, ctx):
    if not args.filename:
        raise UserError("create needs -f PATH, or one of: create namespace NAME, "
                        "create deployment NAME --image IMAGE")
    objs = load(args, ctx)
    client = ctx.client
    failed = False
    for m in objs:
        try:
            namespace = target_namespace(ctx, m)
            client.create(m.resource, desired_state(m, namespace), namespace)
        except UserError as exc:
            ctx.error("error: %s" % exc)
            failed = True
            continue
        except ApiError as exc:
            _report_error(ctx, exc, "creating", m)
            failed = True
            continue
        ctx.print("%s created" % printers.object_name(m.resource, m.name))
    return 1 if failed else 0


def run_create_namespace(args, ctx):
    from shepherd_ha.model.resources import RESOURCES
    ctx.client.create("namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                     "metadata": {"name": args.name}})
    ctx.print("%s created" % printers.object_name(RESOURCES["namespaces"], args.name))
    return 0


def run_create_deployment(args, ctx):
    from shepherd_ha.model.resources import RESOURCES
    labels = {"app": args.name}
    container = {"name": args.name, "image": args.image}
    if args.port:
        container["ports"] = [{"containerPort": args.port}]
    obj = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": args.name, "namespace": ctx.namespace, "labels": dict(labels)},
           "spec": {"replicas": args.replicas, "selector": {"matchLabels": dict(labels)},
                    "template": {"metadata": {"labels": dict(labels)},
                                 "spec": {"containers": [container]}}}}
    ctx.client.create("deployments", obj, ctx.namespace)
    ctx.print("%s created" % printers.object_name(RESOURCES["deployments"], args.name))
    return 0
