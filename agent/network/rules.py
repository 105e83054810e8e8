"""The pod network's iptables rules, in chains of our own, one pair per cluster CIDR.

- filter SHEPHERD-PODNET-<tag>, jumped to first from DOCKER-USER: accept traffic from
  and to the cluster CIDR. Docker's FORWARD policy is DROP and its inter-network
  isolation drops traffic between two bridge networks; DOCKER-USER runs before
  both, so pods on other nodes (routed in) and on another agent's bridge on the
  same host (`make up`) get through.
- nat SHEPHERD-MASQ-<tag>, jumped to first from POSTROUTING: masquerade pod traffic
  leaving the cluster CIDR, and nothing else (the bridge is made with Docker's
  masquerade off), so a pod on another node sees the real source address.

<tag> is 8 hex digits of a hash of the cluster CIDR: every agent of one cluster on a
host renders the same text and shares the pair, and a second cluster on the host
(another CIDR, docs/networking.md) has its own, so neither rewrites the other's.
Before session 32 every cluster shared one pair, SHEPHERD-PODNET and
SHEPHERD-PODNET-MASQ (LEGACY_CHAINS): an agent removes that pair when it holds exactly
its own cluster's rules (once, as it starts: drop_own_legacy), and `network cleanup`
removes it too (with --cluster-cidr, when it holds that cluster's rules).

`render` (pure) gives the chains whole; `apply` loads a chain that does not hold
exactly those rules with one `iptables-restore --noflush` per table (our chain is
flushed and refilled atomically, nobody else's is touched) and then makes sure of
the jump rules.
This is `iptables` as installed: on Debian 12 that is iptables-nft, the backend
Docker uses too (python-iptables would write the legacy tables, unseen by both).
"""
import collections
import hashlib
import ipaddress
import logging
import subprocess

log = logging.getLogger(__name__)

FORWARD_PREFIX, MASQ_PREFIX = "SHEPHERD-PODNET-", "SHEPHERD-MASQ-"
Chains = collections.namedtuple("Chains", "forward masq")
LEGACY_CHAINS = Chains("SHEPHERD-PODNET", "SHEPHERD-PODNET-MASQ")
PARENTS = {"filter": "DOCKER-USER", "nat": "POSTROUTING"}


def chains(cluster_cidr):
    """The pair of chains of the cluster with `cluster_cidr` (at most 24 characters: iptables takes 28)."""
    network = str(ipaddress.ip_network(cluster_cidr, strict=False))      # one tag however it is written
    tag = hashlib.sha256(network.encode()).hexdigest()[:8]
    return Chains(FORWARD_PREFIX + tag, MASQ_PREFIX + tag)


def jumps(names):
    """(table, parent, chain) of the jump rules to the pair `names`."""
    return (("filter", PARENTS["filter"], names.forward), ("nat", PARENTS["nat"], names.masq))


def render(cluster_cidr, names=None):
    """{table: iptables-restore text} of the cluster's chains (`names`: another pair, the legacy one)."""
    forward, masq = names or chains(cluster_cidr)
    return {
        "filter": "\n".join([
            "*filter",
            ":%s - [0:0]" % forward,
            "-A %s -s %s -m comment --comment \"shepherd pod network: from pods\" -j ACCEPT"
            % (forward, cluster_cidr),
            "-A %s -d %s -m comment --comment \"shepherd pod network: to pods\" -j ACCEPT"
            % (forward, cluster_cidr),
            "COMMIT", ""]),
        "nat": "\n".join([
            "*nat",
            ":%s - [0:0]" % masq,
            "-A %s -d %s -m comment --comment \"shepherd pod network: pod to pod keeps its source\" -j RETURN"
            % (masq, cluster_cidr),
            "-A %s -s %s -m comment --comment \"shepherd pod network: leaving the cluster CIDR\" -j MASQUERADE"
            % (masq, cluster_cidr),
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
    for table, parent, chain in jumps(chains(cluster_cidr)):
        parent = _parent(ipt, table, parent)
        if ipt.run("-w", "-t", table, "-C", parent, "-j", chain, check=False).returncode != 0:
            ipt.run("-w", "-t", table, "-I", parent, "1", "-j", chain)
            log.info("iptables: %s %s now jumps to %s first", table, parent, chain)


def drop_own_legacy(cluster_cidr, ipt=None, removed=None):
    """The pair every cluster shared before, once its rules are this cluster's own (this
    agent's older version made them): the cluster's own pair does their job now. Once
    per agent (PodNetwork), not at every sync. Returns what it removed."""
    ipt = ipt or Iptables()
    removed = [] if removed is None else removed
    legacy = render(cluster_cidr, LEGACY_CHAINS)
    for (table, parent, chain), text in zip(jumps(LEGACY_CHAINS), (legacy["filter"], legacy["nat"])):
        if _holds(ipt, table, text):
            _remove_pair(ipt, table, parent, chain, removed)
            log.info("iptables: %s chain %s of an older version removed", table, chain)
    return removed


def _remove_pair(ipt, table, parent, chain, removed):
    for candidate in (parent, "FORWARD") if parent == "DOCKER-USER" else (parent,):
        for _ in range(16):          # a jump inserted twice (two agents racing) goes too
            if ipt.run("-w", "-t", table, "-D", candidate, "-j", chain, check=False).returncode != 0:
                break
            removed.append("%s %s -j %s" % (table, candidate, chain))
    if ipt.chain_exists(table, chain):
        ipt.run("-w", "-t", table, "-F", chain)
        ipt.run("-w", "-t", table, "-X", chain)
        removed.append("%s chain %s" % (table, chain))


def ours(ipt):
    """(table, parent, chain) of every pod network chain of ours on this host: each
    cluster's pair and the legacy one."""
    found = []
    for table, prefix in (("filter", FORWARD_PREFIX), ("nat", MASQ_PREFIX)):
        listed = ipt.run("-w", "-t", table, "-S", check=False).stdout.splitlines()
        names = [line.split()[1] for line in listed if line.startswith("-N ") and len(line.split()) > 1]
        legacy = LEGACY_CHAINS.forward if table == "filter" else LEGACY_CHAINS.masq
        found += [(table, PARENTS[table], name) for name in names if name.startswith(prefix) or name == legacy]
    return found


def remove(ipt=None, cluster_cidr=None):
    """Take the cluster's jumps and chains out again (no `cluster_cidr`: every cluster's,
    and the legacy pair); what is already gone is fine."""
    ipt = ipt or Iptables()
    removed = []
    targets = jumps(chains(cluster_cidr)) if cluster_cidr else ours(ipt)
    for table, parent, chain in targets:
        _remove_pair(ipt, table, parent, chain, removed)
    if cluster_cidr:
        drop_own_legacy(cluster_cidr, ipt, removed)
    return removed
