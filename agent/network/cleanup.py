"""`shepherd-agent network cleanup`: take out everything the agent's data plane added.

A list of steps, each `(name, step(context) -> [what it removed])`, run in order;
one failing is reported and the others still run. The Services and DNS parts add
their own with `add_step` (before "pod networks" if their rules point at pods).

    shepherd-agent network cleanup [--node NAME] [--cluster-cidr CIDR] [--services-only] [--docker-url URL] [--dry-run]

Pods still running on a pod network keep it (Docker refuses to remove a network
with containers): stop the agent's pods first (`sheepctl drain`, then stop the
agent), or remove them with `docker rm -f`.
"""
import argparse
import dataclasses
import ipaddress
import logging
import sys

from . import rules
from .bridge import our_networks
from .routes import ROUTE_PROTO, IpCommand, RouteTable

log = logging.getLogger(__name__)


@dataclasses.dataclass
class CleanupContext:
    docker_api: object = None      # docker.APIClient, made on first use
    docker_url: str = None
    node: str = None               # only this node's networks (None: every one of ours)
    cluster_cidr: str = None       # only this cluster's pod network chains (None: every cluster's)
    dry_run: bool = False
    command_prefix: tuple = ()     # run ip/iptables through this (tests: nsenter into a node namespace)

    def docker(self):
        if self.docker_api is None:
            import docker
            self.docker_api = docker.APIClient(base_url=self.docker_url or "unix:///var/run/docker.sock",
                                               version="auto", timeout=30)
        return self.docker_api


def _iptables(context):
    ipt = rules.Iptables(prefix=context.command_prefix)
    if context.dry_run:
        targets = rules.jumps(rules.chains(context.cluster_cidr)) + rules.jumps(rules.LEGACY_CHAINS) \
            if context.cluster_cidr else rules.ours(ipt)
        return ["would remove %s chain %s and its jump" % (table, chain) for table, _, chain in targets
                if ipt.chain_exists(table, chain)]
    return rules.remove(ipt, context.cluster_cidr)


def _routes(context):
    table = RouteTable(IpCommand(prefix=context.command_prefix), within=context.cluster_cidr)
    current = table.current()
    if context.dry_run:
        return ["would remove route %s via %s (proto %s)" % (c, v, ROUTE_PROTO) for c, v in sorted(current.items())]
    _, deleted = table.remove_all()
    left = sorted(set(current) - set(deleted))
    if left:
        raise RuntimeError("routes still there: %s" % ", ".join(left))
    return ["route %s" % c for c in deleted]


def _networks(context):
    api = context.docker()
    removed, busy = [], []
    for network in our_networks(api, context.node, context.cluster_cidr):
        details = api.inspect_network(network["Id"])
        if details.get("Containers"):
            busy.append("%s (%d container(s))" % (network["Name"], len(details["Containers"])))
            continue
        if not context.dry_run:
            api.remove_network(network["Id"])
        removed.append(("would remove network %s" if context.dry_run else "network %s") % network["Name"])
    if busy:
        raise RuntimeError("networks still used by containers, kept: %s; stop those pods first"
                           % ", ".join(busy))
    return removed


def _services(context):
    """The Services part (agent/proxy/cleanup.py): SHEP-* chains, their jumps, the service CIDR route.
    Not with --cluster-cidr: those are the host's (one Service proxy per host), maybe another cluster's."""
    if context.cluster_cidr:
        return []
    from agent.proxy.cleanup import cleanup_services
    from agent.proxy.iptables import Iptables
    if context.dry_run:
        return ["would remove the service rules (SHEP-* chains and jumps) and the service CIDR route"]
    return [cleanup_services(Iptables(prefix=context.command_prefix))]


STEPS = [("service rules", _services), ("pod routes", _routes), ("pod network iptables", _iptables),
         ("pod networks", _networks)]


def add_step(name, step, before=None):
    """Another part's cleanup step; `before` names a step it must run ahead of."""
    names = [n for n, _ in STEPS]
    STEPS.insert(names.index(before) if before in names else len(STEPS), (name, step))


def run(context, steps=None):
    """Run every step; returns (removed: [str], failures: [str])."""
    removed, failures = [], []
    for name, step in (steps if steps is not None else STEPS):
        try:
            removed.extend(step(context) or [])
        except Exception as exc:  # noqa: BLE001 - one step failing must not stop the others
            failures.append("%s: %s" % (name, exc))
    return removed, failures


def main(argv):
    parser = argparse.ArgumentParser(prog="shepherd-agent network",
                                     description="Remove what the agent added to this machine's network.")
    parser.add_argument("action", choices=["cleanup"])
    parser.add_argument("--node", help="only this node's pod network (default: every one the agent made)")
    parser.add_argument("--cluster-cidr", help="only what the cluster with this CIDR added: its pod networks, "
                        "routes and iptables chains; the host's Service rules stay (default: every cluster's)")
    parser.add_argument("--services-only", action="store_true",
                        help="only the host's Service rules (SHEP-* chains, their jumps, the service route): "
                             "what a cluster that is gone left to a proxy that stands down")
    parser.add_argument("--docker-url", help="Docker engine URL (default unix:///var/run/docker.sock)")
    parser.add_argument("--dry-run", action="store_true", help="say what would go, remove nothing")
    args = parser.parse_args(argv)
    if args.cluster_cidr:
        try:        # as the agent writes it (and iptables prints it): 10.244.7.0/16 is 10.244.0.0/16
            args.cluster_cidr = str(ipaddress.ip_network(args.cluster_cidr, strict=False))
        except ValueError as exc:
            parser.error("--cluster-cidr %r: %s" % (args.cluster_cidr, exc))
    if args.services_only and (args.node or args.cluster_cidr):
        parser.error("--services-only removes the host's Service rules alone: leave out --node and --cluster-cidr")
    steps = [step for step in STEPS if step[0] == "service rules"] if args.services_only else None
    removed, failures = run(CleanupContext(docker_url=args.docker_url, node=args.node,
                                           cluster_cidr=args.cluster_cidr, dry_run=args.dry_run), steps)
    for line in removed:
        print("removed %s" % line if not args.dry_run else line)
    for line in failures:
        print("failed: %s" % line, file=sys.stderr)
    if not removed and not failures:
        print("nothing to remove")
    return 1 if failures else 0
