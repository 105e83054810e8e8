"""A pod's resolver configuration (agent/dns/pod_dns.py), where it lands in the container
configs (agent/spec.py, docker create kwargs), its validation and the agent's DNS options."""
import docker
import pytest

from agent import config as agent_config
from agent import spec as P
from agent.dns.node_dns import parse_address
from agent.dns.pod_dns import ClusterDNS, ResolverConfig, parse_node_resolver, resolver_config
from agent.runtime.docker_runtime import create_kwargs
from shepherd_ha.model.validation import validate_object

CLUSTER = ClusterDNS("10.244.1.1", "cluster.local")
SEARCH = ("shop.svc.cluster.local", "svc.cluster.local", "cluster.local")


def pod(ns="shop", containers=1, **spec):
    body = {"containers": [{"name": "c%d" % i, "image": "busybox"} for i in range(containers)]}
    body.update(spec)
    return {"metadata": {"name": "p", "namespace": ns, "uid": "u1"}, "spec": body}


def test_cluster_first_is_the_default():
    assert resolver_config(pod(), CLUSTER) == ResolverConfig(("10.244.1.1",), SEARCH, ("ndots:5",))
    assert resolver_config(pod(dnsPolicy="ClusterFirst"), CLUSTER).searches == SEARCH
    assert resolver_config(pod(ns="default"), ClusterDNS("10.0.0.1", "corp.example")).searches == (
        "default.svc.corp.example", "svc.corp.example", "corp.example")


def test_host_network_means_default_unless_cluster_first_with_host_net():
    assert resolver_config(pod(hostNetwork=True), CLUSTER) is None
    assert resolver_config(pod(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet"), CLUSTER).nameservers == (
        "10.244.1.1",)


def test_default_and_no_cluster_dns_keep_dockers_resolv_conf():
    assert resolver_config(pod(dnsPolicy="Default"), CLUSTER) is None
    assert resolver_config(pod(), None) is None
    node = parse_node_resolver("nameserver 10.0.0.2\nsearch corp.example\noptions timeout:1\n")
    merged = resolver_config(pod(dnsPolicy="Default", dnsConfig={"searches": ["x.example"]}), CLUSTER, node)
    assert merged == ResolverConfig(("10.0.0.2",), ("corp.example", "x.example"), ("timeout:1",))


def test_dns_config_is_merged_and_none_uses_it_alone():
    config = {"nameservers": ["1.1.1.1", "10.244.1.1"], "searches": ["corp.example", "svc.cluster.local"],
              "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}
    merged = resolver_config(pod(dnsConfig=config), CLUSTER)
    assert merged.nameservers == ("10.244.1.1", "1.1.1.1")
    assert merged.searches == SEARCH + ("corp.example",)
    assert merged.options == ("ndots:2", "edns0")
    alone = resolver_config(pod(dnsPolicy="None", dnsConfig={"nameservers": ["9.9.9.9"]}), CLUSTER)
    assert alone == ResolverConfig(("9.9.9.9",), (), ())


def test_only_the_network_owner_gets_the_resolver_config():
    dns = resolver_config(pod(containers=2), CLUSTER)
    sandbox = P.sandbox_config(pod(containers=2), "n1", "10.0.0.5", "shepherd/busybox:1", 0, dns=dns)
    assert (sandbox.dns_servers, sandbox.dns_search, sandbox.dns_options) == (
        ["10.244.1.1"], list(SEARCH), ["ndots:5"])
    joined = P.container_config(pod(containers=2), {"name": "c1", "image": "busybox"}, "n1", "10.0.0.5", 0,
                                sandbox_id="abc", dns=dns)
    assert joined.network_mode == "container:abc" and joined.dns_servers is None
    single = P.container_config(pod(), {"name": "c0", "image": "busybox"}, "n1", "10.0.0.5", 0, dns=dns)
    assert single.dns_servers == ["10.244.1.1"]
    plain = P.container_config(pod(), {"name": "c0", "image": "busybox"}, "n1", "10.0.0.5", 0)
    assert plain.dns_servers is None and plain.dns_search is None
    none_policy = P.dns_fields(ResolverConfig(("9.9.9.9",), (), ()))
    assert none_policy["dns_search"] == ["."]          # Docker would keep the node's search list otherwise


def test_docker_create_kwargs_carry_dns_only_for_the_owner():
    api = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41")
    dns = resolver_config(pod(), CLUSTER)
    owner = P.container_config(pod(), {"name": "c0", "image": "busybox"}, "n1", "10.0.0.5", 0, dns=dns)
    host = create_kwargs(api, owner)["host_config"]
    assert host["Dns"] == ["10.244.1.1"] and host["DnsSearch"] == list(SEARCH) and host["DnsOptions"] == ["ndots:5"]
    joined = P.container_config(pod(containers=2), {"name": "c1", "image": "busybox"}, "n1", "10.0.0.5", 0,
                                sandbox_id="abc")
    joined.dns_servers = ["10.244.1.1"]          # even if set by mistake: Docker refuses it with container:
    assert "Dns" not in create_kwargs(api, joined)["host_config"]


@pytest.mark.parametrize("spec, message", [
    ({"dnsPolicy": "Cluster"}, "spec.dnsPolicy"),
    ({"dnsPolicy": "None"}, 'dnsPolicy "None" needs at least one nameserver'),
    ({"dnsConfig": {"nameservers": ["1.1.1.1", "1.0.0.1", "8.8.8.8", "9.9.9.9"]}}, "at most 3 nameservers"),
    ({"dnsConfig": {"nameservers": ["dns.example"]}}, "is not an IP address"),
    ({"dnsConfig": {"searches": ["a b"]}}, "is not a domain name"),
    ({"dnsConfig": {"options": [{"value": "2"}]}}, "spec.dnsConfig.options[0].name"),
    ({"dnsConfig": {"options": ["ndots:2"]}}, "must be an object with a name"),
    ({"dnsConfig": "8.8.8.8"}, "spec.dnsConfig"),
])
def test_bad_dns_settings_are_refused_with_a_reason(spec, message):
    causes = validate_object("pods", pod(**spec))
    assert any(message in str(c) for c in causes), causes


def test_good_dns_settings_pass_validation():
    assert not validate_object("pods", pod(dnsPolicy="None", dnsConfig={
        "nameservers": ["10.0.0.2"], "searches": ["corp.example"],
        "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]}))
    assert not validate_object("pods", pod(dnsPolicy="ClusterFirstWithHostNet", hostNetwork=True))


def test_agent_dns_options():
    def settings(**values):
        base = {"servers": "http://127.0.0.1:8001", "node_name": "n1"}
        base.update(values)
        args = agent_config.resolve(type("A", (), base)(), environ={})
        return agent_config.settings(args)

    s = settings()
    assert (s.cluster_domain, s.dns_address, s.dns_port) == ("cluster.local", "auto", 53)
    assert settings(runtime="hollow").dns_address == "off"
    s = settings(dns_address="127.0.0.9:5353", cluster_domain="Corp.Example.")
    assert (s.dns_address, s.dns_port, s.cluster_domain) == ("127.0.0.9", 5353, "corp.example")
    for bad in ({"dns_address": "nowhere"}, {"dns_address": "10.0.0.1:99999"}, {"cluster_domain": "a..b"},
                {"cluster_domain": "under_score.local"}):
        with pytest.raises(agent_config.ConfigError) as err:
            settings(**bad)
        assert "--dns-address" in str(err.value) or "--cluster-domain" in str(err.value)
    assert parse_address("[::1]:53") == ("::1", 53) and parse_address("off") == ("off", 53)
