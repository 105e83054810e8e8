"""The proxy's sync loop against a recording iptables (agent/proxy/proxier.py): what
it writes when, failures, batching; and the agent's proxy options."""
import re
import threading
import time

import pytest

from agent import config
from agent.proxy import rules
from agent.proxy.iptables import IptablesError
from agent.proxy.proxier import CLAIM_TTL, Proxier, ProxyConflict, ProxyState


class FakeIptables:
    """Records restores; holds chain names like the kernel would."""

    def __init__(self):
        self.restores, self.jumps_checked, self.fail = [], 0, False
        self.chains = {"nat": set(), "filter": set()}
        self.commands = []

    def restore(self, text):
        if self.fail:
            raise IptablesError("iptables-restore failed (1): boom")
        self.restores.append(text)
        table = None
        for line in text.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif line.startswith(":"):
                self.chains[table].add(line[1:].split()[0])
            elif line.startswith("-X "):
                self.chains[table].discard(line.split()[1])

    def our_chains(self):
        return {t: set(c) for t, c in self.chains.items()}

    def ensure_jumps(self):
        self.jumps_checked += 1
        return 0

    def run(self, args, stdin=None, check=True):
        self.commands.append(args)

        class Done:
            returncode, stdout, stderr = 0, "", ""
        return Done()


def svc(name, ip, protocol="TCP"):
    return {"metadata": {"namespace": "default", "name": name},
            "spec": {"clusterIP": ip, "ports": [{"port": 53, "protocol": protocol}]}}


def eps(name, *ips, protocol="TCP"):
    return {"metadata": {"namespace": "default", "name": name},
            "subsets": [{"addresses": [{"ip": ip} for ip in ips], "ports": [{"port": 53, "protocol": protocol}]}]}


@pytest.fixture
def proxy():
    state, iptables = ProxyState(), FakeIptables()
    return state, iptables, Proxier(state, iptables, node_ips=["10.0.0.1"], min_interval=0.05, full_interval=60)


def test_first_sync_is_full_then_only_changed_chains_are_written(proxy):
    state, iptables, proxier = proxy
    state.put("services", svc("a", "10.96.0.2"))
    state.put("endpoints", eps("a", "10.244.1.2"))
    assert proxier.sync()["full"] and iptables.jumps_checked == 1
    state.put("endpoints", eps("a", "10.244.1.2", "10.244.1.3"))
    figures = proxier.sync()
    assert not figures["full"] and iptables.jumps_checked == 1
    text = iptables.restores[-1]
    assert "SHEP-POSTROUTING" not in text and "*filter" not in text
    assert proxier.sync()["bytes"] == 0 and len(iptables.restores) == 2      # nothing changed: no restore


def test_a_periodic_full_sync_writes_back_chains_the_kernel_lost_and_rewrites_all_now_and_then(proxy):
    state, iptables, proxier = proxy
    state.put("services", svc("a", "10.96.0.2"))
    state.put("endpoints", eps("a", "10.244.1.2"))
    assert proxier.sync()["rewrite"]
    lost = next(c for c in iptables.chains["nat"] if c.startswith("SHEP-SEP-"))
    iptables.chains["nat"].discard(lost)              # flushed and deleted by hand
    figures = proxier.sync(full=True)
    assert figures["full"] and not figures["rewrite"]
    assert re.findall(r"^:(\S+)", iptables.restores[-1], re.M) == [lost]
    proxier.rewritten -= proxier.rewrite_interval
    assert proxier.sync(full=True)["rewrite"] and "SHEP-POSTROUTING" in iptables.restores[-1]


def test_a_failed_restore_makes_the_next_sync_full(proxy):
    state, iptables, proxier = proxy
    state.put("services", svc("a", "10.96.0.2"))
    proxier.sync()
    iptables.fail = True
    state.put("endpoints", eps("a", "10.244.1.2"))
    with pytest.raises(IptablesError):
        proxier.sync()
    iptables.fail = False
    figures = proxier.sync()
    assert figures["full"] and figures["rewrite"]


def test_udp_endpoint_removal_runs_conntrack_after_the_restore(proxy):
    state, iptables, proxier = proxy
    state.put("services", svc("dns", "10.96.0.10", "UDP"))
    state.put("endpoints", eps("dns", "10.244.1.2", "10.244.1.3", protocol="UDP"))
    proxier.sync()
    iptables.commands.clear()
    state.put("endpoints", eps("dns", "10.244.1.3", protocol="UDP"))
    proxier.sync()
    assert iptables.commands == [["conntrack", "-D", "-p", "udp", "--orig-dst", "10.96.0.10", "--dst-nat",
                                  "10.244.1.2"]]


def test_the_loop_batches_a_burst_and_survives_failures(proxy):
    state, iptables, proxier = proxy
    proxier.min_interval = 0.5       # the burst lands inside one interval
    stop = threading.Event()
    thread = threading.Thread(target=proxier.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert proxier.wait_applied(0, 5)
        for i in range(20):
            state.put("services", svc("s%d" % i, "10.96.0.%d" % (i + 2)))
        assert proxier.wait_applied(state.version, 5)
        assert proxier.syncs <= 3          # the first sync, then twenty changes in one or two
        assert all("SHEP-" in t for t in iptables.restores)
        iptables.fail = True
        state.put("services", svc("late", "10.96.1.1"))
        deadline = time.monotonic() + 5
        while proxier.failures == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proxier.failures >= 1 and proxier.applied_version < state.version
        iptables.fail = False
        assert proxier.wait_applied(state.version, 10)
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()


def test_the_state_counts_only_real_changes():
    state = ProxyState()
    state.put("services", svc("a", "10.96.0.2"))
    state.put("services", svc("a", "10.96.0.2"))
    state.replace("services", [svc("a", "10.96.0.2")])
    assert state.version == 1
    state.remove("services", svc("a", ""))
    state.remove("services", svc("a", ""))
    assert state.version == 2


def resolve(**values):
    base = {"servers": "http://127.0.0.1:8001", "node_name": "n1"}
    base.update(values)
    args = []
    for key, value in base.items():
        args += ["--" + key.replace("_", "-"), value]
    return config.settings(config.resolve(config_parser().parse_args(args), environ={}))


def config_parser():
    import argparse
    parser = argparse.ArgumentParser()
    config.add_arguments(parser)
    return parser


def test_proxy_options_default_off_and_are_checked():
    s = resolve()
    # --cluster-cidr is one option for the pod network and the proxy: the pod network's default
    assert s.proxy_mode == "none" and s.service_cidr == "10.96.0.0/12" and s.cluster_cidr == "10.244.0.0/16"
    s = resolve(proxy_mode="iptables", service_cidr="172.30.0.0/16", cluster_cidr="10.244.0.0/16")
    assert (s.proxy_mode, s.service_cidr, s.cluster_cidr) == ("iptables", "172.30.0.0/16", "10.244.0.0/16")
    for bad, says in ((dict(proxy_mode="ipvs"), "--proxy-mode"), (dict(service_cidr="10.96.0.1/12"), "--service-cidr"),
                      (dict(cluster_cidr="nope"), "--cluster-cidr")):
        with pytest.raises(config.ConfigError, match=says):
            resolve(**bad)


def test_jump_rules_name_our_chains_only():
    targets = {rule.rsplit(" ", 1)[1] for _, _, rule in rules.JUMPS}
    assert targets == {rules.SERVICES, rules.POSTROUTING, rules.EXTERNAL, rules.FORWARD}


def test_the_service_route_goes_through_the_pod_bridge_unless_told_otherwise():
    from agent.network.bridge import bridge_name
    assert resolve(proxy_mode="iptables").service_route_dev == bridge_name("n1")
    assert resolve(proxy_mode="iptables", service_route_dev="eth9").service_route_dev == "eth9"
    assert resolve(proxy_mode="iptables", pod_network="none").service_route_dev == ""
    assert resolve().service_route_dev == ""                   # no proxy: no route


def test_br_netfilter_is_loaded_only_when_its_sysctl_is_missing(tmp_path, monkeypatch):
    """A kernel with br_netfilter built in (or loaded) has the sysctl already: modprobe is
    not run (it fails without /lib/modules and was reported as a problem); without the
    sysctl it is."""
    import subprocess
    from agent.proxy import node_setup

    class Run:
        def __init__(self):
            self.argvs = []

        def run(self, argv, check=True):
            self.argvs.append(argv)
            return subprocess.CompletedProcess(argv, 0, "", "")
    present = tmp_path / "bridge-nf-call-iptables"
    present.write_text("1\n")
    monkeypatch.setattr(node_setup.shutil, "which", lambda name: "/usr/sbin/" + name)
    for path, loads in ((str(present), False), (str(tmp_path / "missing"), True)):
        monkeypatch.setattr(node_setup, "BRIDGE_NF_SYSCTL", path)
        run = Run()
        assert node_setup.prepare_node(run) == []
        assert (["modprobe", "br_netfilter"] in run.argvs) is loads


# ---- one proxy per host: the SHEP-OWNER claim ----

def test_the_claim_names_cluster_node_and_time_and_reads_back_as_iptables_prints_it():
    who = rules.owner("3f9c0a1b2c", "10.96.0.0/12", "node-1")
    assert who == rules.Owner("3f9c0a1b2c", "node-1")
    line = rules.owner_rule(rules.Claim(who, 1765000000))
    assert line == ('-A SHEP-OWNER -m comment --comment "shepherd service proxy of cluster 3f9c0a1b2c node node-1 '
                    'renewed 1765000000" -j RETURN')
    assert rules.claim_of(["-N SHEP-OWNER", line]) == rules.Claim(who, 1765000000)
    assert rules.claim_of(["-N SHEP-OWNER"]) is None
    # No --cluster-id: the service CIDR stands in, made safe for a comment like any odd id.
    assert rules.owner(None, "10.112.0.0/12", "b-1") == rules.Owner("service-cidr-10.112.0.0_12", "b-1")
    assert rules.owner('x" -j ACCEPT', None, "n")[0] == "x__-j_ACCEPT"


class ClaimedIptables(FakeIptables):
    """The kernel's SHEP-OWNER chain holds `held` (a Claim, or None: no chain)."""

    def __init__(self, held=None):
        super().__init__()
        self.held, self.released = held, []

    def claim(self, present=None):
        return self.held

    def release(self, owner):
        self.released.append(owner)


NOW = 1765000000.0


def test_a_proxy_stands_down_for_another_clusters_fresh_claim_only():
    mine = rules.owner("cluster-a", None, "a-1")
    other = rules.Owner("cluster-b", "b-1")
    state = ProxyState()
    state.put("services", svc("dns", "10.96.0.10"))
    for held, conflict in ((None, False), (rules.Claim(mine, NOW - 5), False),
                           (rules.Claim(rules.Owner("restored-id", "a-1"), NOW - 5), False),   # its node, re-made
                           (rules.Claim(other, NOW - 5), True),
                           (rules.Claim(other, NOW - CLAIM_TTL - 1), False)):                 # a dead proxy's
        iptables = ClaimedIptables(held)
        proxier = Proxier(state, iptables, owner=mine, wall=lambda: NOW)
        if conflict:
            with pytest.raises(ProxyConflict, match=r"another cluster \(cluster-b, node b-1\).*--services-only"):
                proxier.sync()
            assert iptables.restores == [], "nothing of the other's rules touched"
        else:
            proxier.sync()
            assert "SHEP-OWNER" in iptables.chains["nat"]
            assert rules.owner_rule(rules.Claim(mine, NOW)) in iptables.restores[0], "claimed, as of now"


def test_the_owners_syncs_keep_and_renew_its_claim():
    state, iptables = ProxyState(), ClaimedIptables()
    now = [NOW]
    proxier = Proxier(state, iptables, owner=rules.owner("cluster-a", None, "a-1"), rewrite_interval=3600,
                      wall=lambda: now[0])
    proxier.sync()
    now[0] += 30
    state.put("services", svc("dns", "10.96.0.10"))
    proxier.sync(full=True)            # a full sync deletes chains of ours it did not render
    assert "SHEP-OWNER" in iptables.chains["nat"]
    assert "renewed %d" % (NOW + 30) in iptables.restores[-1]


def test_a_standing_down_proxy_says_so_once_takes_over_when_the_claim_goes_and_releases_its_own(caplog,
                                                                                                  monkeypatch):
    from agent.proxy import proxier as module
    monkeypatch.setattr(module, "CONFLICT_RETRY", 0.05)
    mine = rules.owner("cluster-a", None, "a-1")
    state = ProxyState()
    iptables = ClaimedIptables(rules.Claim(rules.Owner("cluster-b", "b-1"), time.time()))
    reported = []
    proxier = Proxier(state, iptables, owner=mine, min_interval=0.01,
                      report=lambda *event: reported.append(event))
    stop = threading.Event()
    thread = threading.Thread(target=proxier.run, args=(stop,), daemon=True)
    with caplog.at_level("INFO", logger="agent.proxy.proxier"):
        thread.start()
        try:
            deadline = time.monotonic() + 5
            while proxier.failures < 3 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert proxier.failures >= 3 and proxier.conflict and iptables.restores == []
            iptables.held = None        # that cluster's rules were cleaned up
            assert proxier.wait_applied(state.version, 5)
        finally:
            stop.set()
            thread.join(5)
    said = [r.getMessage() for r in caplog.records]
    assert sum("stands down" in m for m in said) == 1, said
    assert any("no other cluster's now; proxying" in m for m in said)
    assert iptables.released == [mine], "a proxy that stops gives its claim up"
    # ... and says so on the node too, once each way (`sheepctl describe node` lists them)
    assert [(reason, type_) for reason, _, type_ in reported] == \
        [("ServiceProxyStoodDown", "Warning"), ("ServiceProxyResumed", "Normal")], reported
    assert "another cluster (cluster-b, node b-1)" in reported[0][1]
