"""sheepctl cluster add-replica ID --raft HOST:PORT --api URL | remove-replica ID, and the
membership table of `cluster status` (store/membership.py decides; docs/operations.md)."""
import time

from .. import printers
from ..context import UserError

CHANGE_TIMEOUT = 45.0     # the server bounds a change itself; this covers a forward and a hand-over


def register(csub, common):
    a = csub.add_parser("add-replica", parents=[common],
                        help="add a started replica (shepherd-ha server --join ...) to the membership")
    a.add_argument("id", metavar="ID")
    a.add_argument("--raft", required=True, metavar="HOST:PORT", help="the new replica's --raft-address")
    a.add_argument("--api", required=True, metavar="URL", help="the new replica's API URL")
    a.add_argument("--force", action="store_true",
                   help="add even when the new replica does not answer yet or the quorum would need it")
    a.add_argument("--wait", type=float, default=120.0, metavar="SECONDS",
                   help="wait this long for it to catch up (default 120; 0: do not wait)")
    a.set_defaults(func=run_add)
    r = csub.add_parser("remove-replica", parents=[common], help="remove a replica from the membership")
    r.add_argument("id", metavar="ID")
    r.set_defaults(func=run_remove)


def run_add(args, ctx):
    if args.wait < 0:
        raise UserError("--wait must be 0 or more")
    body = {"id": args.id, "raft": args.raft, "api": args.api, "force": bool(args.force)}
    info = ctx.client.request("POST", "/shepherd/v1/members", body=body, idempotent_write=False,
                              timeout=CHANGE_TIMEOUT)
    ctx.print("replica %s added (quorum now %s of %d)" % (args.id, info.get("quorum"), len(info.get("members") or [])))
    if not args.wait:
        return 0
    deadline, shown = time.monotonic() + args.wait, None
    while True:
        info = ctx.client.request("GET", "/shepherd/v1/members")
        row = next((m for m in info.get("members") or [] if m.get("id") == args.id), None)
        if row is not None and (row.get("caughtUp") or row.get("self")):
            ctx.print("replica %s caught up (match index %s of commit %s)" % (
                args.id, row.get("matchIndex"), info.get("commitIndex")))
            return 0
        line = "replica %s catching up: match index %s of commit %s" % (
            args.id, row.get("matchIndex") if row else "?", info.get("commitIndex"))
        if line != shown:
            ctx.print(line)
            shown = line
        if time.monotonic() >= deadline:
            ctx.error("replica %s has not caught up within %.0fs: it counts toward the quorum meanwhile; see "
                      "its log" % (args.id, args.wait))
            return 1
        time.sleep(0.5)


def run_remove(args, ctx):
    info = ctx.client.request("DELETE", "/shepherd/v1/members/" + args.id, idempotent_write=False,
                              timeout=CHANGE_TIMEOUT)
    ctx.print("replica %s removed (quorum now %s of %d); stop its process now: it no longer belongs"
              % (args.id, info.get("quorum"), len(info.get("members") or [])))
    return 0


def print_membership(ctx, membership):
    """The members as the leader sees them: voters and catch-up progress."""
    rows = []
    for m in membership.get("members") or []:
        caught = "self" if m.get("self") else {True: "yes", False: "no"}.get(m.get("caughtUp"), "-")
        rows.append([m.get("id") or "-", m.get("raft") or "-", "yes" if m.get("voter") else "no",
                     "-" if m.get("matchIndex") is None else str(m["matchIndex"]), caught])
    ctx.print()
    for line in printers.format_table(["MEMBER", "RAFT", "VOTER", "MATCH", "CAUGHT-UP"], rows):
        ctx.print(line)
    ctx.print("quorum: %s of %d; commit index %s%s%s" % (
        membership.get("quorum"), len(rows), membership.get("commitIndex"),
        "" if membership.get("progressKnown") else " (progress known only on the leader)",
        "; change in progress: %s" % membership["changeInProgress"] if membership.get("changeInProgress") else ""))
