"""The proxy's rules: the renderer against golden text, the restore diff, stale
conntrack flows (agent/proxy/rules.py, conntrack.py). Golden files are in
tests/unit/golden/proxy/; SHEPHERD_REGEN_GOLDEN=1 rewrites them (then read the diff)."""
import os
import pathlib
import re

import pytest

from agent.proxy import rules
from agent.proxy.conntrack import stale_flows

GOLDEN = pathlib.Path(__file__).parent / "golden" / "proxy"
NODE_IPS, CLUSTER = ["192.168.50.11"], "10.244.0.0/16"


def svc(name, ip, ports, type_="ClusterIP", namespace="default"):
    return {"metadata": {"namespace": namespace, "name": name},
            "spec": {"clusterIP": ip, "type": type_, "ports": ports}}


def ep(name, ips, ports, not_ready=(), namespace="default"):
    subset = {"addresses": [{"ip": i} for i in ips], "ports": ports}
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": i} for i in not_ready]
    return {"metadata": {"namespace": namespace, "name": name}, "subsets": [subset]}


WEB = svc("web", "10.96.0.10", [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080}])
WEB_EP = ep("web", ["10.244.1.3", "10.244.1.2", "10.244.2.2"], [{"name": "http", "port": 8080, "protocol": "TCP"}],
            not_ready=["10.244.2.9"])
DNS = svc("dns", "10.96.0.11", [{"port": 53, "protocol": "UDP", "nodePort": 30053}], "NodePort")
DNS_EP = ep("dns", ["10.244.1.4"], [{"port": 5353, "protocol": "UDP"}])
EMPTY = svc("empty", "10.96.0.12", [{"port": 80, "protocol": "TCP", "nodePort": 30080}], "NodePort")
HEADLESS = svc("headless", "None", [{"port": 80, "protocol": "TCP"}])


def endpoints(*objs):
    return {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs}


def render(services, eps):
    return rules.render(rules.service_ports(services, eps), NODE_IPS, CLUSTER)


def golden(name, text):
    path = GOLDEN / (name + ".txt")
    if os.environ.get("SHEPHERD_REGEN_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text(), "rendered rules differ from %s" % path


def test_cluster_ip_balanced_over_ready_endpoints():
    text = rules.restore_text(render([WEB], endpoints(WEB_EP)))
    golden("cluster_ip", text)
    # 1/3, 1/2, then the rest: each endpoint gets a third; the not-ready one none.
    assert re.findall(r"--probability (\S+)", text) == ["0.3333333333", "0.5000000000"]
    assert "10.244.2.9" not in text


def test_node_port_marks_for_masquerade_on_every_node_ip():
    golden("node_port", rules.restore_text(render([DNS], endpoints(DNS_EP))))


def test_headless_has_no_rules():
    assert render([HEADLESS], {}) == render([], {})
    golden("empty", rules.restore_text(render([], {})))


def test_no_endpoints_rejects_in_the_filter_table():
    ruleset = render([EMPTY], {})
    text = rules.restore_text(ruleset)
    golden("no_endpoints", text)
    assert not any(c.startswith("SHEP-SVC-") for c in ruleset["nat"])


def test_a_removed_service_deletes_its_chains_and_writes_only_what_changed():
    before = render([WEB, DNS], endpoints(WEB_EP, DNS_EP))
    after = render([DNS], endpoints(DNS_EP))
    text = rules.restore_text(after, before)
    golden("removed_service", text)
    gone = set(before["nat"]) - set(after["nat"])
    assert len(gone) == 4      # SVC + 3 SEP
    for chain in gone:
        assert ":%s - [0:0]" % chain in text and "-X %s" % chain in text
    assert "*filter" not in text            # nothing changed there
    assert rules.restore_text(after, after) == ""


def test_an_endpoint_change_rewrites_the_service_chain_and_the_new_endpoint_only():
    before = render([WEB], endpoints(WEB_EP))
    moved = ep("web", ["10.244.1.2", "10.244.1.3", "10.244.3.7"], [{"name": "http", "port": 8080, "protocol": "TCP"}])
    after = render([WEB], endpoints(moved))
    text = rules.restore_text(after, before)
    declared = re.findall(r"^:(\S+)", text, re.M)
    sp = rules.service_ports([WEB], endpoints(moved))[0]
    assert sorted(declared) == sorted([rules.svc_chain(sp), rules.sep_chain(sp, ("10.244.3.7", 8080)),
                                       rules.sep_chain(sp, ("10.244.2.2", 8080))])
    assert "-X %s" % rules.sep_chain(sp, ("10.244.2.2", 8080)) in text


def test_chains_in_the_kernel_but_not_rendered_are_deleted():
    present = {"nat": {"SHEP-SVC-LEFTOVER", rules.SERVICES}, "filter": set()}
    text = rules.restore_text(render([], {}), None, present)
    assert "-X SHEP-SVC-LEFTOVER" in text and "-X %s" % rules.SERVICES not in text


def test_without_node_ips_node_ports_answer_on_every_local_address():
    ruleset = rules.render(rules.service_ports([DNS], endpoints(DNS_EP)))
    assert ruleset["nat"][rules.SERVICES][-1] == "-A SHEP-SERVICES -m addrtype --dst-type LOCAL -j SHEP-NODEPORTS"
    assert not any("! -s" in r for rules_ in ruleset["nat"].values() for r in rules_)


def test_chain_names_fit_iptables_and_depend_only_on_the_port():
    sp = rules.service_ports([WEB], endpoints(WEB_EP))[0]
    for chain in (rules.svc_chain(sp), rules.ext_chain(sp), rules.sep_chain(sp, sp.endpoints[0])):
        assert len(chain) <= 28
    other = rules.service_ports([svc("web", "10.96.0.10", WEB["spec"]["ports"], namespace="prod")], {})[0]
    assert rules.svc_chain(sp) != rules.svc_chain(other)


@pytest.mark.parametrize("bad", [{"spec": {"clusterIP": "10.96.0.5", "ports": [{"port": "80"}]}},
                                 {"spec": {"clusterIP": 5}}, {"spec": "x"}])
def test_unreadable_services_and_ports_are_left_out(bad):
    bad = dict(bad, metadata={"namespace": "default", "name": "bad"})
    assert rules.service_ports([bad, WEB], endpoints(WEB_EP)) == rules.service_ports([WEB], endpoints(WEB_EP))


def test_stale_udp_flows_of_removed_endpoints_and_of_a_port_getting_its_first_endpoint():
    two = ep("dns", ["10.244.1.4", "10.244.2.5"], [{"port": 5353, "protocol": "UDP"}])
    old = rules.service_ports([DNS, WEB], endpoints(two, WEB_EP))
    new = rules.service_ports([DNS, WEB], endpoints(DNS_EP))       # web's TCP endpoints gone too
    assert stale_flows(old, new) == [
        ["-p", "udp", "--orig-dst", "10.96.0.11", "--dst-nat", "10.244.2.5"],
        ["-p", "udp", "--orig-port-dst", "30053", "--dst-nat", "10.244.2.5"]]
    zero = rules.service_ports([DNS], {})
    assert [f[-1] for f in stale_flows(new, zero)] == ["10.244.1.4", "10.244.1.4"]        # scale to zero
    assert stale_flows(zero, new) == [["-p", "udp", "--orig-dst", "10.96.0.11"]]
    assert [f[-1] for f in stale_flows(new, [])] == ["10.244.1.4", "10.244.1.4"]          # service deleted


def test_the_cached_renderer_renders_the_same_and_keeps_only_current_ports():
    renderer = rules.Renderer()
    first = rules.service_ports([WEB, DNS, EMPTY], endpoints(WEB_EP, DNS_EP))
    assert renderer.render(first, NODE_IPS, CLUSTER) == rules.render(first, NODE_IPS, CLUSTER)
    assert renderer.render(first, NODE_IPS, CLUSTER) == rules.render(first, NODE_IPS, CLUSTER)
    moved = ep("web", ["10.244.1.2"], [{"name": "http", "port": 8080, "protocol": "TCP"}])
    second = rules.service_ports([WEB, EMPTY], endpoints(moved))
    assert renderer.render(second, NODE_IPS, CLUSTER) == rules.render(second, NODE_IPS, CLUSTER)
    assert len(renderer._cache) == 2
    assert renderer.render(second, (), None) == rules.render(second)
