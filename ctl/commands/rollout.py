"""sheepctl rollout status|history|undo deployment/NAME

    sheepctl rollout status deployment/web [--timeout 120] [--watch=false]
    sheepctl rollout history deployment/web [--revision 2]
    sheepctl rollout undo deployment/web [--to-revision 2]

A deployment's history is its ControllerRevisions (one per distinct pod template,
owned by the deployment, written by the deployment controller); undo puts a
revision's template back into the deployment's spec, and the controller rolls it out.
"""
import argparse
import copy
import threading

from shepherd_ha.client import ApiError, WatchExpired

from .. import printers
from ..context import UserError, parse_targets

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
HASH_LABEL = "pod-template-hash"
CHANGE_CAUSE_ANNOTATION = "kubernetes.io/change-cause"
DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"
UNDO_ATTEMPTS = 3


def _bool(text):
    value = str(text).lower()
    if value in ("true", "1", "yes", "y"):
        return True
    if value in ("false", "0", "no", "n"):
        return False
    raise ValueError(text)


def register(sub, common):
    p = sub.add_parser("rollout", parents=[common], help="watch, list and undo the rollouts of a deployment")
    rsub = p.add_subparsers(dest="rollout_command", metavar="COMMAND")

    s = rsub.add_parser("status", parents=[common],
                        help="follow a rollout until it is done (exit 0) or exceeds its progress deadline (exit 1)")
    _target(s)
    s.add_argument("-w", "--watch", type=_bool, default=True, metavar="BOOL",
                   help="keep watching until the rollout ends (default true); --watch=false prints once")
    s.add_argument("--timeout", type=float, default=0, metavar="SECONDS",
                   help="give up (exit 1) after this long; 0 waits forever (default)")
    s.set_defaults(func=run_status)

    h = rsub.add_parser("history", parents=[common], help="the revisions of a deployment and their change causes")
    _target(h)
    h.add_argument("--revision", type=int, default=0, metavar="N", help="show the pod template of revision N")
    h.set_defaults(func=run_history)

    u = rsub.add_parser("undo", parents=[common], help="roll back to the previous (or a given) revision")
    _target(u)
    u.add_argument("--to-revision", type=int, default=0, metavar="N",
                   help="the revision to roll back to (default: the one before the current)")
    u.set_defaults(func=run_undo)

    p.set_defaults(func=_usage(p))


def _usage(parser):
    def run(args, ctx):
        parser.print_help(ctx.err)
        return 2
    return run


def _target(parser):
    parser.add_argument("resource", metavar="deployment/NAME")
    parser.add_argument("names", nargs="*", metavar="NAME", help=argparse.SUPPRESS)


def _deployment_target(args):
    _r, targets = parse_targets(args.resource, args.names)
    if len(targets) != 1:
        raise UserError("rollout needs exactly one deployment, e.g. deployment/web")
    r, name = targets[0]
    if r.plural != "deployments":
        raise UserError("rollout works on deployments only, not %s" % r.plural)
    return r, name


# ---- status ----

def rollout_state(d):
    """(line, done, failed) for a deployment, as kubectl's rollout status says it."""
    meta, spec, status = printers.meta(d), printers.spec(d), printers.status(d)
    name = meta.get("name")
    if (meta.get("generation") or 0) > (status.get("observedGeneration") or 0):
        return "Waiting for deployment spec update to be observed...", False, False
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == DEADLINE_EXCEEDED:
            return ('deployment "%s" exceeded its progress deadline: %s' % (name, cond.get("message") or ""),
                    False, True)
    replicas = spec.get("replicas", 1)
    updated = status.get("updatedReplicas") or 0
    total = status.get("replicas") or 0
    available = status.get("availableReplicas") or 0
    if updated < replicas:
        return ('Waiting for deployment "%s" rollout to finish: %d out of %d new replicas have been updated...'
                % (name, updated, replicas), False, False)
    if total > updated:
        return ('Waiting for deployment "%s" rollout to finish: %d old replicas are pending termination...'
                % (name, total - updated), False, False)
    if available < updated:
        return ('Waiting for deployment "%s" rollout to finish: %d of %d updated replicas are available...'
                % (name, available, updated), False, False)
    return 'deployment "%s" successfully rolled out' % name, True, False


def run_status(args, ctx):
    r, name = _deployment_target(args)
    client, ns = ctx.client, ctx.namespace
    state = {"last": None}

    def show(d):
        """Print the state when it changed; the exit code when the rollout ended."""
        line, done, failed = rollout_state(d)
        if failed:
            ctx.error("error: %s" % line)
            return 1
        if line != state["last"]:
            ctx.print(line)
            state["last"] = line
        return 0 if done else None

    code = show(client.get(r, name, ns))      # a missing deployment is a NotFound error
    if code is not None or not args.watch:
        return code or 0
    stop = threading.Event()
    timer = None
    if args.timeout and args.timeout > 0:
        timer = threading.Timer(args.timeout, stop.set)
        timer.daemon = True
        timer.start()
    try:
        while not stop.is_set():
            try:
                for event in client.watch(r, ns, field_selector="metadata.name=%s" % name, stop=stop):
                    kind = event.get("type")
                    if kind == "BOOKMARK":
                        continue
                    if kind == "DELETED":
                        raise UserError('deployment "%s" was deleted' % name)
                    code = show(event.get("object") or {})
                    if code is not None:
                        return code
            except WatchExpired:
                continue      # the replica's watch log moved on: list and watch again
    finally:
        if timer is not None:
            timer.cancel()
    ctx.error("error: timed out waiting for the condition")
    return 1


# ---- history ----

def revisions_of(client, d):
    """The deployment's revisions, by number: its ReplicaSets (owned by its uid only), each
    as {"revision": N, "data": {"template": ...}, "metadata": ...}, the template without
    the pod-template-hash label the ReplicaSet adds (so it compares with the deployment's)."""
    meta = d["metadata"]
    listed = client.list("replicasets", meta.get("namespace"))
    out = []
    for rs in (listed or {}).get("items") or []:
        rs_meta = rs.get("metadata") or {}
        refs = rs_meta.get("ownerReferences") or []
        if not any(ref.get("uid") == meta.get("uid") and ref.get("controller") for ref in refs):
            continue
        try:
            number = int((rs_meta.get("annotations") or {}).get(REVISION_ANNOTATION) or 0)
        except ValueError:
            continue
        template = copy.deepcopy((rs.get("spec") or {}).get("template"))
        if isinstance(template, dict):
            labels = (template.get("metadata") or {}).get("labels")
            if isinstance(labels, dict):
                labels.pop(HASH_LABEL, None)
        out.append({"revision": number, "data": {"template": template}, "metadata": rs_meta})
    return sorted(out, key=lambda rev: rev.get("revision") or 0)


def _cause(rev):
    return ((rev.get("metadata") or {}).get("annotations") or {}).get(CHANGE_CAUSE_ANNOTATION)


def run_history(args, ctx):
    r, name = _deployment_target(args)
    d = ctx.client.get(r, name, ctx.namespace)
    revisions = revisions_of(ctx.client, d)
    if args.revision:
        chosen = [rev for rev in revisions if rev.get("revision") == args.revision]
        if not chosen:
            raise UserError("unable to find the specified revision %d of deployment %s (revisions: %s)"
                            % (args.revision, name, ", ".join(str(rev.get("revision")) for rev in revisions)
                               or "none"))
        ctx.print("%s with revision #%d" % (printers.object_name(r, name), args.revision))
        template = (chosen[0].get("data") or {}).get("template") or {}
        ctx.out.write(printers.to_yaml({"Pod Template": template}))
        cause = _cause(chosen[0])
        if cause:
            ctx.print("Change cause: %s" % cause)
        return 0
    ctx.print(printers.object_name(r, name))
    rows = [[str(rev.get("revision")), _cause(rev) or "<none>"] for rev in revisions]
    for line in printers.format_table(["REVISION", "CHANGE-CAUSE"], rows):
        ctx.print(line)
    return 0


# ---- undo ----

def run_undo(args, ctx):
    r, name = _deployment_target(args)
    for attempt in range(UNDO_ATTEMPTS):
        d = ctx.client.get(r, name, ctx.namespace)
        if printers.spec(d).get("paused"):
            raise UserError('deployment "%s" is paused: resume it (set spec.paused to false) before rolling back'
                            % name)
        revisions = revisions_of(ctx.client, d)
        if not revisions:
            raise UserError('no rollout history found for deployment "%s"' % name)
        annotations = printers.meta(d).get("annotations") or {}
        try:
            current = int(annotations.get(REVISION_ANNOTATION) or 0)
        except ValueError:
            current = 0
        if args.to_revision:
            chosen = [rev for rev in revisions if rev.get("revision") == args.to_revision]
            if not chosen:
                raise UserError("unable to find specified revision %d in history (revisions: %s)"
                                % (args.to_revision, ", ".join(str(rev.get("revision")) for rev in revisions)))
        else:
            chosen = [rev for rev in revisions if (rev.get("revision") or 0) < current][-1:]
            if not chosen:
                raise UserError('no revision to roll back to: deployment "%s" has only revision %d'
                                % (name, current))
        target = chosen[0]
        template = (target.get("data") or {}).get("template")
        if not isinstance(template, dict):
            raise UserError("revision %s has no pod template" % target.get("revision"))
        if template == printers.spec(d).get("template"):
            ctx.print("%s skipped rollback (current template already matches revision %s)"
                      % (printers.object_name(r, name), target.get("revision")))
            return 0
        new = dict(d, spec=dict(d["spec"], template=template))
        meta = dict(d["metadata"])
        new_annotations = {k: v for k, v in annotations.items() if k != CHANGE_CAUSE_ANNOTATION}
        if _cause(target):
            new_annotations[CHANGE_CAUSE_ANNOTATION] = _cause(target)
        meta["annotations"] = new_annotations
        new["metadata"] = meta          # its resourceVersion makes the PUT conditional
        try:
            ctx.client.replace(r, new)
        except ApiError as exc:
            if exc.reason == "Conflict" and attempt + 1 < UNDO_ATTEMPTS:
                continue
            raise
        ctx.print("%s rolled back to revision %s" % (printers.object_name(r, name), target.get("revision")))
        return 0
    raise UserError("deployment %s kept changing; try again" % name)
