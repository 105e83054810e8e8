"""`shepherd-ha local up|status|down|kill|start|roll`: a cluster on this machine."""
import os
import sys
import time

from . import local_members
from .local_cluster import LocalClusterError
from .netns_cluster import NetnsCluster, open_cluster
from .rolling_restart import roll

DEFAULT_DIR = ".local-cluster"
DEFAULT_AGENTS = 2
AGENT_WAIT = 20.0        # seconds for a started agent's node to become Ready


def add_parser(subparsers):
    parser = subparsers.add_parser("local", help="run a whole cluster on this machine (development, demos, drills)")
    sub = parser.add_subparsers(dest="local_command", metavar="ACTION")
    up = sub.add_parser("up", help="create (first time) and start every replica; return once there is a leader")
    up.add_argument("--replicas", type=int, default=3, help="number of replicas (default 3)")
    up.add_argument("--base-port", type=int, default=8000,
                    help="replica N serves its API on BASE+N and Raft on BASE+100+N (default 8000)")
    up.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for a leader (default 60)")
    up.add_argument("--agents", type=int, default=None,
                    help="node agents PREFIX-1..PREFIX-N on this machine's Docker engine, added when missing "
                         "(default: %d for a new cluster, none more for an existing one); the cluster's "
                         "agents are started too" % DEFAULT_AGENTS)
    up.add_argument("--agent-prefix", default="node",
                    help="agents are named PREFIX-1..PREFIX-N (default node); node names must be unique "
                         "on a Docker engine: a second cluster there takes its own prefix (and "
                         "--cluster-cidr, --service-cidr)")
    up.add_argument("--cluster-cidr", default=None,
                    help="a new cluster's pod network (default 10.244.0.0/16); a second cluster on this "
                         "Docker engine needs one of its own, as its nodes' blocks become Docker networks")
    up.add_argument("--service-cidr", default=None,
                    help="a new cluster's Services' cluster IPs (default 10.96.0.0/12); one of its own for "
                         "a second cluster on this machine, whose agents route it")
    up.add_argument("--no-auth", dest="auth", action="store_false",
                    help="a new cluster's API answers without a token (default: bearer tokens required; "
                         "the admin's is in DIR/config, each agent's own in DIR/agents/NAME/token)")
    up.add_argument("--insecure-http", dest="tls", action="store_false",
                    help="a new cluster serves plain HTTP (default: HTTPS from a cluster CA made in DIR, "
                         "DIR/kubeconfig for kubectl)")
    up.add_argument("--netns", action="store_true",
                    help="every replica and agent in its own network namespace with its own address on "
                         "10.213.N.0/24 (root; agents use the hollow runtime); `local down` removes the network")
    up.set_defaults(func=cmd_up)
    for name, func, text in (("status", cmd_status, "show each replica's process and role, and each agent"),
                             ("down", cmd_down, "stop every agent and replica cleanly (SIGTERM); data is kept, "
                                                "containers keep running and are adopted by the next `up`")):
        p = sub.add_parser(name, help=text)
        p.set_defaults(func=func)
    sub.choices["down"].add_argument("--purge-containers", action="store_true",
                                     help="also remove the containers of this cluster's agents")
    certs = sub.add_parser("certs", help="issue every replica's and agent's certificate again from the cluster CA "
                                         "(rotation; restart them one at a time afterwards)")
    certs.set_defaults(func=cmd_certs)
    for name, func, text in (("kill", cmd_kill, "SIGKILL one replica or agent (failure drills)"),
                             ("start", cmd_start, "start one stopped or killed replica or agent")):
        p = sub.add_parser(name, help=text)
        p.add_argument("name", help="replica id, e.g. r1, or agent name, e.g. node-1")
        p.set_defaults(func=func)
    add = sub.add_parser("add-replica", help="start a new replica (next free id and ports) and add it to the "
                                             "membership; DIR/config follows")
    add.add_argument("--force", action="store_true",
                     help="add even when the quorum of the new set would need the new replica (writes stall "
                          "until it has caught up)")
    add.set_defaults(func=cmd_add_replica)
    remove = sub.add_parser("remove-replica", help="remove a replica from the membership, then stop it")
    remove.add_argument("name", help="replica id, e.g. r3")
    remove.set_defaults(func=cmd_remove_replica)
    rolling = sub.add_parser("roll", help="restart every replica one at a time (followers first, the leader "
                             "last), each caught up and the cluster ready before the next; prints the longest "
                             "write gap")
    rolling.add_argument("--timeout", type=float, default=60.0,
                         help="seconds each replica may take to catch up and the cluster to be ready (default 60)")
    rolling.set_defaults(func=cmd_roll)
    for p in [parser, up] + [sub.choices[n] for n in ("status", "down", "kill", "start", "certs", "add-replica",
                                                      "remove-replica", "roll")]:
        p.add_argument("--dir", default=os.environ.get("SHEPHERD_LOCAL_DIR", DEFAULT_DIR),
                       help="cluster directory (default %s; env SHEPHERD_LOCAL_DIR)" % DEFAULT_DIR)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _guard(func):
    def wrapper(args):
        try:
            return func(args, open_cluster(args.dir))
        except LocalClusterError as exc:
            print("shepherd-ha local: %s" % exc, file=sys.stderr)
            return 1
    return wrapper


def _say(line):
    print("  ... " + line, flush=True)


@_guard
def cmd_up(args, cluster):
    existed = cluster.exists
    if args.netns and cluster.exists and not isinstance(cluster, NetnsCluster):
        raise LocalClusterError("%s holds a loopback cluster: drop --netns or use another --dir" % cluster.dir)
    if not cluster.exists and args.netns:
        cluster = NetnsCluster(args.dir)
        if args.cluster_cidr or args.service_cidr:
            print("shepherd-ha local: --cluster-cidr and --service-cidr are ignored with --netns (hollow agents "
                  "have no pod network)", file=sys.stderr)
        print("creating a %d-replica cluster in network namespaces in %s" % (args.replicas, cluster.dir), flush=True)
        cluster.create(args.replicas, auth=args.auth, tls=args.tls)
    elif not cluster.exists:
        print("creating a %d-replica cluster in %s" % (args.replicas, cluster.dir), flush=True)
        cluster.create(args.replicas, args.base_port, auth=args.auth, tls=args.tls,
                       networks=_networks(args))
    elif cluster.add_raft_salt():
        print("gave %s a Raft salt (--raft-salt, required since issue 14)" % cluster.dir, flush=True)
    if args.agents is None:
        # `up` again starts what the cluster has: a second cluster started with its own
        # --agent-prefix does not grow node-1 and node-2 on the next plain `up` (one whose
        # first `up` failed before its agents were added gets them now).
        args.agents = 0 if cluster.agents() else DEFAULT_AGENTS
    if existed and (args.cluster_cidr or args.service_cidr):
        print("shepherd-ha local: --cluster-cidr and --service-cidr are ignored: %s exists, and its networks "
              "were set when it was created" % cluster.dir, file=sys.stderr)
    for ident, pid in cluster.start_all().items():
        print("  %s running (pid %d)" % (ident, pid), flush=True)
    leader = cluster.wait_ready(args.timeout, progress=_say)
    config = cluster.write_client_config()
    print("cluster is up; leader %s" % leader)
    if cluster.token():
        print("  the API wants bearer tokens: the admin's is in %s (sheepctl reads it); each agent has its "
              "own in %s" % (config, cluster.node_token_file("NAME")))
    else:
        print("  the API answers without a token (this cluster was created with --no-auth, or before tokens): "
              "keep it on a trusted network, or make a new one")
    if cluster.tls:
        print("  HTTPS with the cluster CA %s; kubectl: kubectl --kubeconfig %s get --raw /readyz"
              % (cluster.ca_file, cluster.kubeconfig_path))
    else:
        print("  plain HTTP (created with --insecure-http, or before TLS): tokens and data cross the network "
              "in clear")
    for member in cluster.spec()["replicas"]:
        print("  %s  API %s  Raft %s" % (member["id"], member["api"], member["raft"]))
    failed = _start_agents(cluster, args.agents, args.agent_prefix,
                           runtime="hollow" if isinstance(cluster, NetnsCluster) else "docker")
    print("use it:  sheepctl --config %s cluster status   (or export SHEPHERD_CONFIG=%s)" % (config, config))
    return 1 if failed else 0


def _networks(args):
    """The pod and service CIDRs asked for (a new cluster's), checked; {} for the defaults."""
    from shepherd_ha.model import network
    from shepherd_ha.model.service_network import parse_service_cidr
    out = {}
    if args.cluster_cidr:
        try:
            out["cluster_cidr"] = str(network.parse_plan(args.cluster_cidr)[0])
        except network.NetworkError as exc:
            raise LocalClusterError("--cluster-cidr: %s" % exc)
    if args.service_cidr:
        try:
            out["service_cidr"] = str(parse_service_cidr(args.service_cidr))
        except ValueError as exc:
            raise LocalClusterError("--service-cidr: %s" % exc)
    return out


def _start_agents(cluster, count, prefix="node", runtime="docker"):
    """Add PREFIX-1..PREFIX-COUNT when missing, start every agent, wait for their
    nodes to be Ready. Returns the names of agents that did not come up."""
    known = {a["name"] for a in cluster.agents()}
    for i in range(1, max(0, count) + 1):
        if "%s-%d" % (prefix, i) not in known:
            # one agent programs the Services' host-wide rules for every pod on this engine
            cluster.add_agent("%s-%d" % (prefix, i), runtime,
                              ("--proxy-mode", "iptables") if i == 1 and runtime == "docker" else ())
    agents = cluster.agents()
    if not agents:
        return []
    for name, pid in cluster.start_agents().items():
        print("  agent %s running (pid %d)" % (name, pid), flush=True)
    deadline = time.monotonic() + AGENT_WAIT
    rows = cluster.agent_status()
    while time.monotonic() < deadline:
        rows = cluster.agent_status()
        if all(r["node"] == "Ready" or not r["pid"] for r in rows):
            break
        time.sleep(0.3)
    failed = []
    for row in rows:
        if row["pid"] and row["node"] == "Ready":
            print("  node %s Ready (agent log %s)" % (row["name"], row["log"]))
            continue
        failed.append(row["name"])
        why = "its agent exited" if not row["pid"] else "its node is %s" % row["node"]
        print("shepherd-ha local: agent %s is not up: %s; the end of %s:" % (row["name"], why, row["log"]),
              file=sys.stderr)
        try:
            with open(row["log"], errors="replace") as fh:
                for line in fh.readlines()[-5:]:
                    print("    " + line.rstrip(), file=sys.stderr)
        except OSError:
            pass
    return failed


@_guard
def cmd_status(args, cluster):
    print("%-4s %-8s %-10s %-6s %-9s %s" % ("ID", "PID", "ROLE", "TERM", "REVISION", "API"))
    for row in cluster.status():
        print("%-4s %-8s %-10s %-6s %-9s %s" % (row["id"], row["pid"] or "-", row["role"],
                                                 row["term"] if row["term"] is not None else "-",
                                                 row["revision"] if row["revision"] is not None else "-", row["api"]))
    agents = cluster.agent_status()
    if agents:
        print()
        print("%-12s %-8s %-8s %-13s %s" % ("AGENT", "PID", "RUNTIME", "NODE", "LOG"))
        for row in agents:
            print("%-12s %-8s %-8s %-13s %s" % (row["name"], row["pid"] or "-", row["runtime"], row["node"],
                                                 row["log"]))
    return 0


@_guard
def cmd_down(args, cluster):
    cluster.stop_agents()
    cluster.stop_all()
    if isinstance(cluster, NetnsCluster):
        cluster.teardown_network()
        print("removed the cluster's namespaces, links and iptables rules (`local up` makes them again)")
    print("stopped every agent and replica in %s (data kept; `shepherd-ha local up --dir %s` starts them again)"
          % (cluster.dir, args.dir))
    if getattr(args, "purge_containers", False):
        try:
            removed = cluster.purge_containers()
        except Exception as exc:  # noqa: BLE001 - docker missing or refusing: say so
            print("shepherd-ha local: cannot remove the agents' containers: %s" % exc, file=sys.stderr)
            return 1
        print("removed %d container(s) of this cluster's agents" % removed)
    elif cluster.agents() and not isinstance(cluster, NetnsCluster):
        print("the agents' containers keep running (`local down --purge-containers` removes them)")
    return 0


def _is_agent(cluster, name):
    return any(a["name"] == name for a in cluster.agents())


@_guard
def cmd_certs(args, cluster):
    from .cluster_tls import reissue
    try:
        names = reissue(cluster)
    except ValueError as exc:
        raise LocalClusterError(str(exc))
    print("issued new certificates for %s from %s; restart each (`shepherd-ha local kill NAME` then `start NAME`, "
          "one at a time) to serve them" % (", ".join(names), cluster.ca_file))
    return 0


@_guard
def cmd_kill(args, cluster):
    agent = _is_agent(cluster, args.name)
    if not (cluster.kill_agent(args.name) if agent else cluster.kill(args.name)):
        print("%s is not running" % args.name)
        return 1
    print("killed %s%s (SIGKILL)" % ("agent " if agent else "", args.name))
    return 0


@_guard
def cmd_start(args, cluster):
    agent = _is_agent(cluster, args.name)
    pid = cluster.start_agent(args.name) if agent else cluster.start(args.name)
    print("%s%s running (pid %d)" % ("agent " if agent else "", args.name, pid))
    return 0


@_guard
def cmd_add_replica(args, cluster):
    ident = local_members.add_replica(cluster, progress=_say, force=args.force)
    print("%s is a member and caught up; %s names it" % (ident, os.path.join(cluster.dir, "config")))
    return 0


@_guard
def cmd_remove_replica(args, cluster):
    local_members.remove_replica(cluster, args.name, progress=_say)
    print("%s is no longer a member; %s no longer names it" % (args.name, os.path.join(cluster.dir, "config")))
    return 0


@_guard
def cmd_roll(args, cluster):
    print("rolling restart of %s: %s" % (cluster.dir, ", ".join(cluster.ids())), flush=True)
    result = roll(cluster, args.timeout, progress=_say)
    print("rolled %s; leader now %s; longest write gap %.2fs (%d writes acknowledged, %d failed)"
          % (", ".join(result["order"]), result["leader"], result["longest_gap"], result["acked"], result["failed"]))
    return 0
