"""The pod network's iptables rules, in chains of our own.

- filter SHEPHERD-PODNET, jumped to first from DOCKER-USER: accept traffic from and
  to the cluster CIDR. Docker's FORWARD policy is DROP and its inter-network
  isolation drops traffic between two bridge networks; DOCKER-USER runs before
  both, so pods on other nodes (routed in) and on another agent's bridge on the
  same host (`make up`) get through.
- nat SHEPHERD-PODNET-MASQ, jumped to first from POSTROUTING: masquerade pod traffic
  leaving the cluster CIDR, and nothing else (the bridge is made with Docker's
  masquerade off), so a pod on another node sees the real source address.

`render` (pure) gives the chains whole; `apply` loads a chain that does not hold
exactly those rules with one `iptables-restore --noflush` per table (our chain is
flushed and refilled atomically, nobody else's is touched) and then makes sure of
the jump rules.
This is `iptables` as installed: on Debian 12 that is iptables-nft, the backend
Docker uses too (python-iptables would write the legacy tables, unseen by both).
Every agent on a host renders the same text, so two agents share the chains.
"""
import logging
import subprocess

log = logging.getLogger(__name__)

FORWARD_CHAIN = "SHEPHERD-PODNET"
MASQ_CHAIN = "SHEPHERD-PODNET-MASQ"
JUMPS = (("filter", "DOCKER-USER", FORWARD_CHAIN), ("nat", "POSTROUTING", MASQ_CHAIN))


def render(cluster_cidr):
    """{table: iptables-restore text} of our chains."""
    return {
        "filter": "\n".join([
            "*filter",
            ":%s - [0:0]" % FORWARD_CHAIN,
            "-A %s -s %s -m comment --comment \"shepherd pod network: from pods\" -j ACCEPT"
            % (FORWARD_CHAIN, cluster_cidr),
            "-A %s -d %s -m comment --comment \"shepherd pod network: to pods\" -j ACCEPT"
            % (FORWARD_CHAIN, cluster_cidr),
            "COMMIT", ""]),
        "nat": "\n".join([
            "*nat",
            ":%s - [0:0]" % MASQ_CHAIN,
            "-A %s -d %s -m comment --comment \"shepherd pod network: pod to pod keeps its source\" -j RETURN"
            % (MASQ_CHAIN, cluster_cidr),
            "-A %s -s %s -m comment --comment \"shepherd pod network: leaving the cluster CIDR\" -j MASQUERADE"
            % (MASQ_CHAIN, cluster_cidr),
            "COMMIT", ""]),
    }


class Iptables:
    """`iptables` and `iptables-restore`; `prefix` as for routes.IpCommand."""

    def __init__(self, binary="iptables", prefix=()):
        self.binary = binary
        self.prefix = list(prefix)

    def run(self, *args, check=True, stdin=None, binary=None):
        done = subprocess.run(self.prefix + [binary or self.binary] + list(args), input=stdin, capture_output=True,
                              text=True, timeout=30)
        if check and done.returncode != 0:
            raise OSError("%s %s: %s" % (binary or self.binary, " ".join(args), (done.stderr or done.stdout).strip()))
        return done

    def restore(self, text):
        self.run("-w", "--noflush", stdin=text, binary=self.binary + "-restore")

    def chain_exists(self, table, chain):
        return self.run("-w", "-t", table, "-S", chain, check=False).returncode == 0


def _parent(ipt, table, parent):
    # Without Docker's chains (an engine run with --iptables=false) FORWARD itself.
    if parent == "DOCKER-USER" and not ipt.chain_exists(table, parent):
        return "FORWARD"
    return parent


def _holds(ipt, table, text):
    """Whether our chain in `table` holds exactly the rendered rules already (iptables -S
    prints these simple rules as they were fed in); then it is left alone, counters and all."""
    chain = text.splitlines()[1][1:].split()[0]
    done = ipt.run("-w", "-t", table, "-S", chain, check=False)
    have = [line for line in done.stdout.splitlines() if line.startswith("-A ")]
    return done.returncode == 0 and have == [line for line in text.splitlines() if line.startswith("-A ")]


def apply(cluster_cidr, ipt=None):
    ipt = ipt or Iptables()
    for table, text in render(cluster_cidr).items():
        if not _holds(ipt, table, text):
            ipt.restore(text)
            log.info("iptables: %s chain of the pod network loaded", table)
    for table, parent, chain in JUMPS:
        parent = _parent(ipt, table, parent)
        if ipt.run("-w", "-t", table, "-C", parent, "-j", chain, check=False).returncode != 0:
            ipt.run("-w", "-t", table, "-I", parent, "1", "-j", chain)
            log.info("iptables: %s %s now jumps to %s first", table, parent, chain)


def remove(ipt=None):
    """Take our jumps and chains out again; what is already gone is fine."""
    ipt = ipt or Iptables()
    removed = []
    for table, parent, chain in JUMPS:
        for candidate in (parent, "FORWARD") if parent == "DOCKER-USER" else (parent,):
            for _ in range(16):          # a jump inserted twice (two agents racing) goes too
                if ipt.run("-w", "-t", table, "-D", candidate, "-j", chain, check=False).returncode != 0:
                    break
                removed.append("%s %s -j %s" % (table, candidate, chain))
        if ipt.chain_exists(table, chain):
            ipt.run("-w", "-t", table, "-F", chain)
            ipt.run("-w", "-t", table, "-X", chain)
            removed.append("%s chain %s" % (table, chain))
    return removed
