"""The cluster zone's answers (agent/dns/records.py): pure, from Service and Endpoints objects."""
from agent.dns.records import Zone, pod_search_path, search_names, service_records
from dns_kit import endpoints, service


def values(answer):
    return sorted(str(r.value) for r in answer.answers)


def zone_with(*objects, domain="cluster.local"):
    zone = Zone(domain)
    for obj in objects:
        meta = obj["metadata"]
        if obj["kind"] == "Service":
            zone.set_service(meta["namespace"], meta["name"], obj)
        else:
            zone.set_endpoints(meta["namespace"], meta["name"], obj)
    return zone


def test_a_record_of_a_cluster_ip_service():
    zone = zone_with(service("web"), endpoints("web", ["10.244.1.5"]))
    answer = zone.answer("web.default.svc.cluster.local.", "A")
    assert answer.rcode == "NOERROR" and not answer.forward
    assert values(answer) == ["10.96.0.10"]
    assert [r.name for r in answer.answers] == ["web.default.svc.cluster.local"]
    assert zone.answer("web.other.svc.cluster.local", "A").rcode == "NXDOMAIN"


def test_names_compare_case_insensitively():
    zone = zone_with(service("web"))
    assert values(zone.answer("WeB.DeFault.SVC.Cluster.Local.", "A")) == ["10.96.0.10"]


def test_headless_service_answers_the_ready_endpoints_only():
    zone = zone_with(service("db", cluster_ip="None"),
                     endpoints("db", ["10.244.1.5", "10.244.2.7"], not_ready=["10.244.3.9"],
                               hostnames={"10.244.2.7": "db-0"}))
    assert values(zone.answer("db.default.svc.cluster.local", "A")) == ["10.244.1.5", "10.244.2.7"]
    # each endpoint has its own name: its hostname, else its IP with dashes
    assert values(zone.answer("db-0.db.default.svc.cluster.local", "A")) == ["10.244.2.7"]
    assert values(zone.answer("10-244-1-5.db.default.svc.cluster.local", "A")) == ["10.244.1.5"]
    assert zone.answer("10-244-3-9.db.default.svc.cluster.local", "A").rcode == "NXDOMAIN"
    srv = zone.answer("_http._tcp.db.default.svc.cluster.local", "SRV")
    assert sorted(r.value for r in srv.answers) == [
        (0, 100, 8080, "10-244-1-5.db.default.svc.cluster.local"), (0, 100, 8080, "db-0.db.default.svc.cluster.local")]


def test_headless_publish_not_ready_and_endpoint_changes():
    zone = zone_with(service("db", cluster_ip="None", publishNotReadyAddresses=True),
                     endpoints("db", ["10.244.1.5"], not_ready=["10.244.3.9"]))
    assert values(zone.answer("db.default.svc.cluster.local", "A")) == ["10.244.1.5", "10.244.3.9"]
    zone.set_endpoints("default", "db", endpoints("db", []))
    answer = zone.answer("db.default.svc.cluster.local", "A")
    assert answer.rcode == "NOERROR" and answer.answers == [] and answer.authority[0].rtype == "SOA"
    zone.set_endpoints("default", "db", None)
    assert zone.answer("db.default.svc.cluster.local", "A").answers == []


def test_srv_for_named_ports_of_a_cluster_ip_service():
    zone = zone_with(service("web"))
    srv = zone.answer("_http._tcp.web.default.svc.cluster.local", "SRV")
    assert [r.value for r in srv.answers] == [(0, 100, 80, "web.default.svc.cluster.local")]
    udp = zone.answer("_DNS._UDP.web.default.svc.cluster.local", "SRV")
    assert [r.value for r in udp.answers] == [(0, 100, 53, "web.default.svc.cluster.local")]
    assert zone.answer("_dns._tcp.web.default.svc.cluster.local", "SRV").rcode == "NXDOMAIN"
    # the protocol label above an SRV name exists (empty non-terminal): NOERROR, no answer
    assert zone.answer("_tcp.web.default.svc.cluster.local", "A").rcode == "NOERROR"


def test_missing_names_in_the_zone_are_nxdomain_with_the_soa():
    zone = zone_with(service("web"))
    for name in ("nope.default.svc.cluster.local", "web.default.svc.cluster.local.default.svc.cluster.local",
                 "a.b.c.d.e.svc.cluster.local", "x.cluster.local", "10-1-2.default.pod.cluster.local"):
        answer = zone.answer(name, "A")
        assert answer.rcode == "NXDOMAIN" and answer.answers == [], name
        [soa] = answer.authority
        assert soa.rtype == "SOA" and soa.name == "cluster.local" and soa.value[0] == "ns.dns.cluster.local"


def test_existing_name_without_that_type_is_empty_noerror_with_soa():
    zone = zone_with(service("web"))
    for name, qtype in (("web.default.svc.cluster.local", "AAAA"), ("web.default.svc.cluster.local", "MX"),
                        ("default.svc.cluster.local", "A"), ("svc.cluster.local", "A"), ("cluster.local", "A")):
        answer = zone.answer(name, qtype)
        assert answer.rcode == "NOERROR" and answer.answers == [], (name, qtype)
        assert [r.rtype for r in answer.authority] == ["SOA"]
    assert [r.rtype for r in zone.answer("cluster.local", "SOA").answers] == ["SOA"]
    # a namespace without Services is not a name
    assert zone.answer("other.svc.cluster.local", "A").rcode == "NXDOMAIN"


def test_names_outside_the_zone_are_forwarded():
    zone = zone_with(service("web"))
    for name in ("example.com", "cluster.local.example.com", "xcluster.local", "local"):
        assert zone.answer(name, "A").forward, name


def test_service_deleted_and_changed():
    zone = zone_with(service("web"))
    zone.set_service("default", "web", service("web", cluster_ip="10.96.0.11"))
    assert values(zone.answer("web.default.svc.cluster.local", "A")) == ["10.96.0.11"]
    serial = zone.soa().value[2]
    zone.set_service("default", "web", None)
    assert zone.answer("web.default.svc.cluster.local", "A").rcode == "NXDOMAIN"
    assert zone.answer("_http._tcp.web.default.svc.cluster.local", "SRV").rcode == "NXDOMAIN"
    assert zone.answer("default.svc.cluster.local", "A").rcode == "NXDOMAIN"     # its namespace is empty now
    assert zone.soa().value[2] > serial
    assert zone.sizes()["names"] == 0


def test_service_without_cluster_ip_yet_exists_without_address():
    zone = zone_with(service("web", cluster_ip=None))
    answer = zone.answer("web.default.svc.cluster.local", "A")
    assert answer.rcode == "NOERROR" and answer.answers == []


def test_external_name_is_a_cname():
    zone = zone_with(service("ext", cluster_ip=None, ports=[], type="ExternalName", externalName="Example.COM"))
    answer = zone.answer("ext.default.svc.cluster.local", "A")
    assert [(r.rtype, r.value) for r in answer.answers] == [("CNAME", "example.com")]


def test_replace_all_drops_what_the_new_list_lacks():
    zone = zone_with(service("web"), service("api", cluster_ip="10.96.0.20"))
    zone.replace_all(services=[service("api", cluster_ip="10.96.0.21")])
    assert zone.answer("web.default.svc.cluster.local", "A").rcode == "NXDOMAIN"
    assert values(zone.answer("api.default.svc.cluster.local", "A")) == ["10.96.0.21"]


def test_pod_names_and_another_domain():
    zone = zone_with(service("web"), domain="corp.example")
    assert values(zone.answer("10-244-1-5.default.pod.corp.example", "A")) == ["10.244.1.5"]
    assert values(zone.answer("web.default.svc.corp.example", "A")) == ["10.96.0.10"]
    assert zone.answer("web.default.svc.cluster.local", "A").forward


def test_malformed_objects_put_nothing_wrong_in_the_zone():
    bad = {"kind": "Service", "metadata": {"name": "bad", "namespace": "default"},
           "spec": {"clusterIP": "not-an-ip", "ports": ["x", {"port": "80"}]}}
    base, records = service_records(bad, {"subsets": ["x", {"addresses": [{"ip": 5}, "y"]}]})
    assert base == "bad.default.svc.cluster.local" and records == []
    headless = service("h", cluster_ip="None")
    _, records = service_records(headless, {"subsets": [{"addresses": [{"ip": "bogus"}, {"ip": "10.0.0.1"}],
                                                         "ports": [{"port": "x"}, {"name": "p", "port": 1}]}]})
    assert sorted((r.name, r.rtype) for r in records) == [
        ("1.0.0.10.in-addr.arpa", "PTR"), ("10-0-0-1.h.default.svc.cluster.local", "A"),
        ("_p._tcp.h.default.svc.cluster.local", "SRV"), ("h.default.svc.cluster.local", "A")]


def test_search_names_of_a_pod_resolve_short_names_and_skip_external_ones():
    zone = zone_with(service("web"))
    assert pod_search_path("default") == ["default.svc.cluster.local", "svc.cluster.local", "cluster.local"]

    def first_answer(name, ns):
        for candidate in search_names(name, ns):
            answer = zone.answer(candidate, "A")
            if answer.forward:
                return candidate, "forward"
            if answer.answers:
                return candidate, values(answer)
        return None

    assert first_answer("web", "default") == ("web.default.svc.cluster.local", ["10.96.0.10"])
    assert first_answer("web.default", "other") == ("web.default.svc.cluster.local", ["10.96.0.10"])
    assert first_answer("web.default.svc", "other") == ("web.default.svc.cluster.local", ["10.96.0.10"])
    assert first_answer("web.default.svc.cluster.local", "other") == ("web.default.svc.cluster.local",
                                                                       ["10.96.0.10"])
    # an external name goes through the search domains (all NXDOMAIN here, never forwarded) to itself
    assert first_answer("example.com", "default") == ("example.com", "forward")
    assert search_names("a.b.c.d.e.f", "default")[0] == "a.b.c.d.e.f"     # 5 dots: as is first
    assert search_names("web.", "default") == ["web"]


def test_reverse_names_of_cluster_ips_and_headless_endpoints():
    zone = zone_with(service("web"), service("db", cluster_ip="None"),
                     endpoints("db", ["10.244.1.5"], hostnames={"10.244.1.5": "db-0"}))
    ptr = zone.answer("10.0.96.10.in-addr.arpa.", "PTR")
    assert [(r.rtype, r.value) for r in ptr.answers] == [("PTR", "web.default.svc.cluster.local")]
    assert [r.value for r in zone.answer("5.1.244.10.in-addr.arpa", "PTR").answers] == [
        "db-0.db.default.svc.cluster.local"]
    nodata = zone.answer("10.0.96.10.in-addr.arpa", "A")
    assert not nodata.forward and nodata.answers == [] and nodata.authority[0].rtype == "SOA"
    assert zone.answer("1.0.96.10.in-addr.arpa", "PTR").forward       # not ours: the node's resolver
    zone.set_service("default", "web", None)
    assert zone.answer("10.0.96.10.in-addr.arpa", "PTR").forward


def test_an_unsynced_zone_says_servfail_not_nxdomain():
    zone = Zone(synced=False)
    assert zone.answer("web.default.svc.cluster.local", "A").rcode == "SERVFAIL"
    assert zone.answer("example.com", "A").forward          # outside names still go out
    zone.synced = True
    assert zone.answer("web.default.svc.cluster.local", "A").rcode == "NXDOMAIN"

