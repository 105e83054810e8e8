"""`shepherd-ha local up|status|down|kill|start`: a cluster on this machine."""
import os
import sys

from .local_cluster import LocalCluster, LocalClusterError

DEFAULT_DIR = ".local-cluster"


def add_parser(subparsers):
    parser = subparsers.add_parser("local", help="run a whole cluster on this machine (development, demos, drills)")
    sub = parser.add_subparsers(dest="local_command", metavar="ACTION")
    up = sub.add_parser("up", help="create (first time) and start every replica; return once there is a leader")
    up.add_argument("--replicas", type=int, default=3, help="number of replicas (default 3)")
    up.add_argument("--base-port", type=int, default=8000,
                    help="replica N serves its API on BASE+N and Raft on BASE+100+N (default 8000)")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a leader (default 60)")
    up.set_defaults(func=cmd_up)
    for name, func, text in (("status", cmd_status, "show each replica's process and role"),
                             ("down", cmd_down, "stop every replica cleanly (SIGTERM); data is kept")):
        p = sub.add_parser(name, help=text)
        p.set_defaults(func=func)
    for name, func, text in (("kill", cmd_kill, "SIGKILL one replica (failure drills)"),
                             ("start", cmd_start, "start one stopped or killed replica")):
        p = sub.add_parser(name, help=text)
        p.add_argument("name", help="replica id, e.g. r1")
        p.set_defaults(func=func)
    for p in [parser, up] + [sub.choices[n] for n in ("status", "down", "kill", "start")]:
        p.add_argument("--dir", default=os.environ.get("SHEPHERD_LOCAL_DIR", DEFAULT_DIR),
                       help="cluster directory (default %s; env SHEPHERD_LOCAL_DIR)" % DEFAULT_DIR)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _guard(func):
    def wrapper(args):
        try:
            return func(args, LocalCluster(args.dir))
        except LocalClusterError as exc:
            print("shepherd-ha local: %s" % exc, file=sys.stderr)
            return 1
    return wrapper


def _say(line):
    print("  ... " + line, flush=True)


@_guard
def cmd_up(args, cluster):
    if not cluster.exists:
        print("creating a %d-replica cluster in %s" % (args.replicas, cluster.dir), flush=True)
        cluster.create(args.replicas, args.base_port)
    for ident, pid in cluster.start_all().items():
        print("  %s running (pid %d)" % (ident, pid), flush=True)
    leader = cluster.wait_ready(args.timeout, progress=_say)
    config = cluster.write_client_config()
    print("cluster is up; leader %s" % leader)
    for member in cluster.spec()["replicas"]:
        print("  %s  API %s  Raft %s" % (member["id"], member["api"], member["raft"]))
    print("use it:  sheepctl --config %s cluster status   (or export SHEPHERD_CONFIG=%s)" % (config, config))
    return 0


@_guard
def cmd_status(args, cluster):
    print("%-4s %-8s %-10s %-6s %-9s %s" % ("ID", "PID", "ROLE", "TERM", "REVISION", "API"))
    for row in cluster.status():
        print("%-4s %-8s %-10s %-6s %-9s %s" % (row["id"], row["pid"] or "-", row["role"],
                                                 row["term"] if row["term"] is not None else "-",
                                                 row["revision"] if row["revision"] is not None else "-", row["api"]))
    return 0


@_guard
def cmd_down(args, cluster):
    cluster.stop_all()
    print("stopped every replica in %s (data kept; `shepherd-ha local up --dir %s` starts them again)"
          % (cluster.dir, args.dir))
    return 0


@_guard
def cmd_kill(args, cluster):
    if not cluster.kill(args.name):
        print("%s is not running" % args.name)
        return 1
    print("killed %s (SIGKILL)" % args.name)
    return 0


@_guard
def cmd_start(args, cluster):
    pid = cluster.start(args.name)
    print("%s running (pid %d)" % (args.name, pid))
    return 0
