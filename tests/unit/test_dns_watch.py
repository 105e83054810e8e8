"""The DNS zone fed by the API (agent/dns/watch.py): a list at resourceVersion=0, then a
watch, through the failover client against the fake API; and the agent's wiring
(agent/dns/node_dns.py) on a loopback address."""
import threading
import time

from dnslib import DNSRecord

from agent.dns import node_dns
from agent.dns.records import Zone
from agent.dns.watch import ZoneWatch
from dns_kit import endpoints, loopback_ip, service, wait, web_client_and_resolv
from shepherd_ha.client import Client


def addresses(zone, name):
    return sorted(r.value for r in zone.answer(name, "A").answers)


def test_zone_follows_services_and_endpoints(replicas):
    api = replicas()
    client = Client([api.url], timeout=2.0, retry_deadline=5.0)
    client.create("services", service("web"), namespace="default")     # before the list
    zone, stop = Zone(synced=False), threading.Event()
    watch = ZoneWatch(client, zone, stop).start()
    try:
        assert all(e.wait(5) for e in watch.synced.values())
        assert zone.synced
        assert addresses(zone, "web.default.svc.cluster.local") == ["10.96.0.10"]
        # after the list: through the watch
        client.create("namespaces", {"metadata": {"name": "shop"}})     # the real API needs it first
        client.create("services", service("db", ns="shop", cluster_ip="None"), namespace="shop")
        client.create("endpoints", endpoints("db", ["10.244.1.5", "10.244.2.6"], ns="shop"), namespace="shop")
        assert wait(lambda: addresses(zone, "db.shop.svc.cluster.local") == ["10.244.1.5", "10.244.2.6"])
        client.replace("endpoints", endpoints("db", ["10.244.2.6"], ns="shop") | {
            "metadata": dict(client.get("endpoints", "db", namespace="shop")["metadata"])})
        assert wait(lambda: addresses(zone, "db.shop.svc.cluster.local") == ["10.244.2.6"])
        client.delete("services", "web", namespace="default")
        assert wait(lambda: zone.answer("web.default.svc.cluster.local", "A").rcode == "NXDOMAIN")
        # the API goes away: the names stay
        api.stop()
        time.sleep(0.3)
        assert addresses(zone, "db.shop.svc.cluster.local") == ["10.244.2.6"]
    finally:
        stop.set()
        watch.join(5)
        client.close()


def test_agent_wiring_serves_on_an_explicit_address(replicas, tmp_path):
    api = replicas()
    client, resolv = web_client_and_resolv(api, tmp_path)
    host = loopback_ip()

    class Settings:
        dns_address, dns_port, cluster_domain, dns_resolv_conf = host, 0, "cluster.local", str(resolv)
    stop = threading.Event()
    dns = node_dns.build(Settings, runtime=None, client=client, stop=stop)
    assert dns.cluster_dns.nameserver == host and dns.cluster_dns.domain == "cluster.local"
    dns.start()
    try:
        assert dns.serving.wait(5)
        # answers come once Services and Endpoints were both listed (SERVFAIL before)
        assert wait(lambda: dns.zone.synced and dns.zone.sizes()["services"] == 1)
        reply = DNSRecord.parse(DNSRecord.question("web.default.svc.cluster.local").send(host, dns.server.port,
                                                                                         timeout=2))
        assert [str(rr.rdata) for rr in reply.rr] == ["10.96.0.10"]
    finally:
        stop.set()
        dns.shutdown()
        client.close()
    Settings.dns_address = "off"
    assert node_dns.build(Settings, None, client, stop) is None
    Settings.dns_address = "auto"          # no Docker network to find (a runtime without an API)
    assert node_dns.build(Settings, object(), client, stop) is None
