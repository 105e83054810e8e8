"""The service-traffic drill's own pieces on real Docker (the drill itself needs the VMs):
its backend and client scripts in busybox containers, the client finding the backend by
a Service name through our DNS server (a headless Service, since no ClusterIP rules run
here), a fault (the backend killed, started again, its new address put in the
Endpoints as the controller would), and the meter's figures and verdict over the
client's real log."""
import os
import sys
import time
import uuid

import pytest

from agent.dns.forwarder import Forwarder
from agent.dns.records import Zone, pod_search_path
from agent.dns.server import DNSServer

from .helpers import IMAGE, wait_until

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "vagrant", "drills"))
import traffic_meter as M  # noqa: E402
from service_traffic import BACKEND_SCRIPT, client_script  # noqa: E402

pytestmark = pytest.mark.e2e


def test_drill_client_measures_an_outage_and_its_recovery(docker_engine):
    api = docker_engine.api
    tag = uuid.uuid4().hex[:6]
    network = api.create_network("dn-%s" % tag, driver="bridge")
    made = []
    server = None
    try:
        gateway = api.inspect_network(network["Id"])["IPAM"]["Config"][0]["Gateway"]
        backend = api.create_container(IMAGE, ["sh", "-c", BACKEND_SCRIPT], name="dn-%s-backend" % tag,
                                       hostname="web-0", host_config=api.create_host_config())
        made.append(backend["Id"])
        api.start(backend["Id"])
        backend_ip = api.inspect_container(backend["Id"])["NetworkSettings"]["IPAddress"]
        zone = Zone()
        service = "web-%s" % tag
        zone.set_service("default", service, {"metadata": {"name": service, "namespace": "default"},
                                              "spec": {"clusterIP": "None", "ports": [{"name": "http", "port": 80}]}})

        def endpoints(ip):
            zone.set_endpoints("default", service, {"metadata": {"name": service, "namespace": "default"},
                                                    "subsets": [{"addresses": [{"ip": ip}],
                                                                 "ports": [{"name": "http", "port": 8080}]}]})
        endpoints(backend_ip)
        server = DNSServer(zone, gateway, 53, Forwarder(lambda: [])).start()
        client = api.create_container(IMAGE, ["sh", "-c", client_script(service, 8080)], name="dn-%s-client" % tag,
                                      host_config=api.create_host_config(
                                          dns=[gateway], dns_search=pod_search_path("default"), dns_opt=["ndots:5"]))
        made.append(client["Id"])
        api.start(client["Id"])

        def samples():
            return M.parse_lines(api.logs(client["Id"]).decode(errors="replace"))
        wait_until(lambda: M.recovered_at(samples(), -1), 20, "steady traffic by name")
        fault = M.FaultWindow("backend lost", samples()[-1].seq)
        api.kill(backend["Id"])
        time.sleep(3)
        api.start(backend["Id"])
        endpoints(api.inspect_container(backend["Id"])["NetworkSettings"]["IPAddress"])
        fault.end_seq = samples()[-1].seq
        fault.recovered_seq = wait_until(lambda: M.recovered_at(samples(), fault.end_seq), 20, "traffic back")
        final = samples()
        passed, reasons = M.verdict(final, [fault])
        assert passed, reasons
        during = M.window(final, fault)
        assert any(not s.ok for s in during), "losing the backend made no request fail"
        assert 2.5 <= M.longest_outage(final) <= 10.0, M.summary(final, [fault])
        assert 0 < M.failed_fraction(final) < 0.5
        assert M.backends(final) == {"web-0": sum(1 for s in final if s.ok)}
    finally:
        for cid in made:
            api.remove_container(cid, force=True)
        if server is not None:
            server.stop()
        api.remove_network(network["Id"])
