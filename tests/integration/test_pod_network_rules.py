"""The pod network's iptables chains with the real iptables, in a network namespace of
the test's own (its own nft tables, nothing of the host's touched): two clusters on one
host keep a pair each, a sync leaves a pair that holds alone, the pair every cluster
shared before is taken over, and cleanup removes one cluster's or all. Needs root:
fails, not skips, without it."""
import os
import subprocess
import uuid

import pytest

from agent.network import cleanup, rules
from agent.network.routes import IpCommand, RouteTable

pytestmark = pytest.mark.integration

A, B = "10.244.0.0/16", "10.232.0.0/16"


@pytest.fixture
def ipt():
    assert os.geteuid() == 0, "this test needs root (a network namespace and iptables); run it as root"
    name = "shp-rules-%s" % uuid.uuid4().hex[:8]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        yield rules.Iptables(prefix=["ip", "netns", "exec", name])
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def listed(ipt, table, chain):
    done = ipt.run("-w", "-t", table, "-S", chain, check=False)
    return None if done.returncode else [line for line in done.stdout.splitlines() if line.startswith("-A ")]


def jumps_in(ipt, table, parent):
    return [line.split("-j ")[1] for line in ipt.run("-w", "-t", table, "-S", parent).stdout.splitlines()
            if line.startswith("-A %s " % parent) and "-j " in line]


def test_two_clusters_keep_a_pair_each_and_cleanup_takes_one_or_all(ipt):
    rules.apply(A, ipt)
    rules.apply(B, ipt)
    a, b = rules.chains(A), rules.chains(B)
    for cidr, names in ((A, a), (B, b)):
        assert listed(ipt, "filter", names.forward) == [
            line for line in rules.render(cidr)["filter"].splitlines() if line.startswith("-A ")]
        assert "-s %s" % cidr in listed(ipt, "nat", names.masq)[1]
    # No Docker in this namespace: the forward chains hang off FORWARD itself.
    assert sorted(jumps_in(ipt, "filter", "FORWARD")) == sorted([a.forward, b.forward])
    assert sorted(jumps_in(ipt, "nat", "POSTROUTING")) == sorted([a.masq, b.masq])

    # Another sync of A changes nothing of B's (before, both shared one pair and took turns).
    counters = ipt.run("-w", "-t", "nat", "-S", b.masq, "-v").stdout
    rules.apply(A, ipt)
    assert ipt.run("-w", "-t", "nat", "-S", b.masq, "-v").stdout == counters
    assert jumps_in(ipt, "nat", "POSTROUTING").count(a.masq) == 1

    removed = cleanup.run(cleanup.CleanupContext(cluster_cidr=A, command_prefix=tuple(ipt.prefix)),
                          [("pod network iptables", cleanup._iptables)])
    assert removed == (["filter FORWARD -j %s" % a.forward, "filter chain %s" % a.forward,
                        "nat POSTROUTING -j %s" % a.masq, "nat chain %s" % a.masq], [])
    assert listed(ipt, "filter", a.forward) is None and listed(ipt, "filter", b.forward) is not None
    assert jumps_in(ipt, "nat", "POSTROUTING") == [b.masq]

    assert sorted(rules.remove(ipt)) == sorted(["filter FORWARD -j %s" % b.forward, "filter chain %s" % b.forward,
                                                "nat POSTROUTING -j %s" % b.masq, "nat chain %s" % b.masq])
    assert rules.ours(ipt) == [] and jumps_in(ipt, "filter", "FORWARD") == []


def test_the_pair_an_older_agent_made_for_its_cluster_is_taken_over(ipt):
    legacy = rules.render(A, rules.LEGACY_CHAINS)
    for table, parent, chain in rules.jumps(rules.LEGACY_CHAINS):
        ipt.restore(legacy[table])
        ipt.run("-w", "-t", table, "-I", "FORWARD" if table == "filter" else parent, "1", "-j", chain)
    rules.apply(B, ipt)       # an agent of another cluster leaves a pair holding A's rules alone
    assert rules.drop_own_legacy(B, ipt) == []
    assert listed(ipt, "filter", rules.LEGACY_CHAINS.forward) is not None
    rules.apply(A, ipt)
    assert rules.drop_own_legacy(A, ipt) == [
        "filter FORWARD -j SHEPHERD-PODNET", "filter chain SHEPHERD-PODNET",
        "nat POSTROUTING -j SHEPHERD-PODNET-MASQ", "nat chain SHEPHERD-PODNET-MASQ"]
    assert listed(ipt, "filter", rules.LEGACY_CHAINS.forward) is None
    assert listed(ipt, "nat", rules.LEGACY_CHAINS.masq) is None
    assert rules.LEGACY_CHAINS.masq not in jumps_in(ipt, "nat", "POSTROUTING")
    assert listed(ipt, "nat", rules.chains(A).masq) is not None
    # Cleanup takes a legacy pair too: of one cluster when it holds that cluster's rules, and of all.
    ipt.restore(legacy["nat"])
    assert "nat chain %s" % rules.LEGACY_CHAINS.masq not in rules.remove(ipt, B)
    assert "nat chain %s" % rules.LEGACY_CHAINS.masq in rules.remove(ipt, A)
    ipt.restore(legacy["nat"])
    assert "nat chain %s" % rules.LEGACY_CHAINS.masq in rules.remove(ipt)


def test_a_clusters_route_table_sees_and_removes_only_routes_into_its_cidr(ipt):
    ip = IpCommand(prefix=ipt.prefix)
    ip.run("link", "add", "shpv0", "type", "veth", "peer", "name", "shpv1")   # a link for the gateways' subnet
    ip.run("addr", "add", "192.0.2.1/24", "dev", "shpv0")
    for link in ("shpv0", "shpv1"):
        ip.run("link", "set", link, "up")
    mine, theirs = RouteTable(ip, within=A), RouteTable(ip, within=B)
    mine.sync({"10.244.1.0/24": "192.0.2.2"})
    theirs.sync({"10.232.1.0/24": "192.0.2.3"})
    mine.sync({"10.244.2.0/24": "192.0.2.4"})        # a sync replaces only its own cluster's
    assert RouteTable(ip).current() == {"10.244.2.0/24": "192.0.2.4", "10.232.1.0/24": "192.0.2.3"}
    removed = cleanup.run(cleanup.CleanupContext(cluster_cidr=B, command_prefix=tuple(ipt.prefix)),
                          [("pod routes", cleanup._routes)])
    assert removed == (["route 10.232.1.0/24"], [])
    assert RouteTable(ip).current() == {"10.244.2.0/24": "192.0.2.4"}
