"""Cluster IPs and node ports through the real API on a 3-replica cluster started
with --service-cidr, and the agent's proxy following them through list + watch
(rules rendered; the kernel side is test_proxy_netns.py)."""
import threading

import pytest

from agent.proxy.proxier import ServiceProxy
from shepherd_ha.client import Client
from tests import waiting

from .helpers import assert_status, call, expect, start_cluster

CIDR = "172.30.0.0/16"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    c = start_cluster(tmp_path_factory.mktemp("svc"), server_options={"service_cidr": CIDR})
    request.addfinalizer(c.stop_all)
    return c


def services_url(cluster):
    return cluster.url(cluster.leader()) + "/api/v1/namespaces/default/services"


def body(name, **spec):
    spec.setdefault("ports", [{"port": 80}])
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
            "spec": dict(spec, selector={"app": name})}


def wait_for(predicate, timeout=15.0, what="condition"):
    return waiting.wait_for(what, predicate, timeout)


def test_cluster_ips_come_from_the_configured_cidr_and_requests_are_checked(cluster):
    url = services_url(cluster)
    # The leader commits the CIDR once it leads; a Service created right after may race it.
    first = wait_for(lambda: _recreate(url, "probe"), what="an address from %s" % CIDR)
    assert first.startswith("172.30.")
    created = expect(call("POST", url, json=body("web", type="NodePort")), 201)
    spec = created["spec"]
    assert spec["clusterIP"].startswith("172.30.") and spec["clusterIPs"] == [spec["clusterIP"]]
    assert spec["ipFamilies"] == ["IPv4"] and 30000 <= spec["ports"][0]["nodePort"] <= 32767
    taken = call("POST", url, json=body("copy", clusterIP=spec["clusterIP"]))
    assert_status(taken, 422, "Invalid")
    assert "spec.clusterIP" in taken.json()["message"] and "default/web" in taken.json()["message"]
    outside = call("POST", url, json=body("far", clusterIP="10.96.0.50"))
    assert_status(outside, 422, "Invalid")
    assert "not in the service CIDR %s" % CIDR in outside.json()["message"]
    port_taken = call("POST", url, json=body("np2", type="NodePort",
                                             ports=[{"port": 80, "nodePort": spec["ports"][0]["nodePort"]}]))
    assert_status(port_taken, 422, "Invalid")
    assert "spec.ports[0].nodePort" in port_taken.json()["message"]
    garbage = call("POST", url, json=body("bad", clusterIP="not-an-ip"))
    assert_status(garbage, 422, "Invalid")
    # Immutable: a PUT changing it is refused; a merge patch leaving it out keeps it.
    current = expect(call("GET", url + "/web"), 200)
    changed = dict(current, spec=dict(current["spec"], clusterIP="172.30.9.9", clusterIPs=["172.30.9.9"]))
    assert_status(call("PUT", url + "/web", json=changed), 422, "Invalid")
    patched = expect(call("PATCH", url + "/web", json={"spec": {"ports": [{"port": 81}]}},
                          headers={"Content-Type": "application/merge-patch+json"}), 200)
    assert patched["spec"]["clusterIP"] == spec["clusterIP"]
    headless = expect(call("POST", url, json=body("h", clusterIP="None")), 201)
    assert headless["spec"]["clusterIPs"] == ["None"]


def _recreate(url, name):
    call("DELETE", url + "/" + name)
    resp = call("POST", url, json=body(name))
    if resp.status_code != 201:
        return None
    ip = resp.json()["spec"]["clusterIP"]
    return ip if ip.startswith("172.30.") else None


class RecordingIptables:
    def __init__(self):
        self.texts = []

    def restore(self, text):
        self.texts.append(text)

    def our_chains(self):
        return {"nat": set(), "filter": set()}

    def ensure_jumps(self):
        return 0

    def run(self, args, stdin=None, check=True):
        class Done:
            returncode, stdout, stderr = 0, "", ""
        return Done()


def test_the_proxy_follows_services_and_endpoints_through_the_watch(cluster):
    url = services_url(cluster)
    iptables = RecordingIptables()
    stop = threading.Event()
    client = Client(list(cluster.urls.values()), timeout=5.0)
    proxy = ServiceProxy(client, iptables, stop, node_ips=["10.0.0.1"], min_interval=0.2)
    proxy.start()
    try:
        selectorless = body("watched")          # its Endpoints are ours, not the controller's
        del selectorless["spec"]["selector"]
        svc = expect(call("POST", url, json=selectorless), 201)
        ip = svc["spec"]["clusterIP"]
        wait_for(lambda: any("-d %s/32" % ip in t and "REJECT" in t for t in iptables.texts),
                 what="a REJECT rule for %s (no endpoints yet)" % ip)
        eps_url = url.replace("/services", "/endpoints")
        endpoints = {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "watched"},
                     "subsets": [{"addresses": [{"ip": "10.244.5.5"}], "ports": [{"port": 80, "protocol": "TCP"}]}]}
        expect(call("POST", eps_url, json=endpoints), 201)
        wait_for(lambda: any("--to-destination 10.244.5.5:80" in t for t in iptables.texts),
                 what="a DNAT rule to the endpoint")
        expect(call("DELETE", url + "/watched"), 200)
        wait_for(lambda: "-X SHEP-SVC-" in iptables.texts[-1], what="the service's chains deleted")
    finally:
        stop.set()
        proxy.join()
        client.close()
