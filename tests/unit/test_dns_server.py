"""The node DNS server (agent/dns/server.py) on loopback, asked by a real dnslib client over
UDP and TCP, forwarding to a fake upstream DNS server the test runs on loopback."""
import os
import random
import socket
import struct
import time

import pytest
from dnslib import QTYPE, RCODE, DNSRecord

from agent.dns.forwarder import Forwarder, ResolvConfUpstreams, parse_resolv_conf, without_self
from agent.dns.records import Zone
from agent.dns.server import DNSServer
from dns_kit import FakeUpstream, endpoints, service, loopback_ip


@pytest.fixture
def upstream():
    u = FakeUpstream()
    yield u
    u.close()


@pytest.fixture
def dns(upstream):
    zone = Zone("cluster.local")
    zone.set_service("default", "web", service("web"))
    zone.set_service("default", "db", service("db", cluster_ip="None"))
    zone.set_endpoints("default", "db", endpoints("db", ["10.244.%d.%d" % (i // 200, i % 200 + 1)
                                                        for i in range(60)]))
    forwarder = Forwarder(lambda: [(upstream.host, upstream.port)], attempt_timeout=0.5, total_timeout=1.0)
    server = DNSServer(zone, loopback_ip(), 0, forwarder, max_tcp=4, tcp_idle=1.0).start()
    yield server
    server.stop()


def ask(server, name, qtype="A", tcp=False, timeout=3):
    reply = DNSRecord.question(name, qtype).send(server.host, server.port, tcp=tcp, timeout=timeout)
    return DNSRecord.parse(reply)


@pytest.mark.parametrize("tcp", [False, True])
def test_cluster_names_over_udp_and_tcp(dns, tcp):
    reply = ask(dns, "Web.default.svc.cluster.local", tcp=tcp)
    assert reply.header.rcode == RCODE.NOERROR and reply.header.aa
    assert [(str(rr.rname), str(rr.rdata)) for rr in reply.rr] == [("Web.default.svc.cluster.local.", "10.96.0.10")]
    srv = ask(dns, "_http._tcp.web.default.svc.cluster.local", "SRV", tcp=tcp)
    assert [(rr.rdata.port, str(rr.rdata.target)) for rr in srv.rr] == [(80, "web.default.svc.cluster.local.")]
    missing = ask(dns, "nope.default.svc.cluster.local", tcp=tcp)
    assert missing.header.rcode == RCODE.NXDOMAIN and not missing.rr
    assert [QTYPE[rr.rtype] for rr in missing.auth] == ["SOA"]
    ptr = ask(dns, "10.0.96.10.in-addr.arpa", "PTR", tcp=tcp)
    assert [str(rr.rdata) for rr in ptr.rr] == ["web.default.svc.cluster.local."]
    empty = ask(dns, "web.default.svc.cluster.local", "AAAA", tcp=tcp)
    assert empty.header.rcode == RCODE.NOERROR and not empty.rr and [QTYPE[rr.rtype] for rr in empty.auth] == ["SOA"]


def test_several_addresses_take_turns_first(dns):
    dns.zone.set_service("default", "pair", service("pair", cluster_ip="None"))
    dns.zone.set_endpoints("default", "pair", endpoints("pair", ["10.244.1.5", "10.244.2.6"]))
    firsts = {str(ask(dns, "pair.default.svc.cluster.local").rr[0].rdata) for _ in range(4)}
    assert firsts == {"10.244.1.5", "10.244.2.6"}
    assert sorted(str(rr.rdata) for rr in ask(dns, "pair.default.svc.cluster.local").rr) == ["10.244.1.5",
                                                                                             "10.244.2.6"]


def test_forwarded_names_and_truncation(dns, upstream):
    reply = ask(dns, "example.com")
    assert [str(rr.rdata) for rr in reply.rr] == ["93.184.216.34"] and ("example.com.", "udp") in upstream.asked
    assert ask(dns, "nothing.example").header.rcode == RCODE.NXDOMAIN
    # the upstream truncates over UDP: the forwarder asks it again over TCP; the client's
    # UDP answer is then too big for 512 bytes, so it gets TC and asks us over TCP
    big = ask(dns, "big.example.com", tcp=True)
    assert len(big.rr) == 40
    assert ("big.example.com.", "tcp") in upstream.asked
    # our own headless answer of 60 addresses does not fit a plain UDP answer: TC, then TCP
    udp = ask(dns, "db.default.svc.cluster.local")
    assert udp.header.tc and not udp.rr
    assert len(ask(dns, "db.default.svc.cluster.local", tcp=True).rr) == 60


def test_an_upstream_that_does_not_answer_gives_servfail_in_bounded_time(dns):
    started = time.monotonic()
    reply = ask(dns, "slow.example.com", timeout=5)
    assert reply.header.rcode == RCODE.SERVFAIL
    assert time.monotonic() - started < 3
    assert ask(dns, "web.default.svc.cluster.local").header.rcode == RCODE.NOERROR


def test_no_upstream_at_all_gives_servfail():
    server = DNSServer(Zone(), loopback_ip(), 0, Forwarder(lambda: [])).start()
    try:
        assert ask(server, "example.com").header.rcode == RCODE.SERVFAIL
    finally:
        server.stop()


def test_garbage_never_stops_the_server(dns):
    rng = random.Random(7)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(1)
        for size in (0, 1, 11, 12, 13, 40, 300, 1500):
            sock.sendto(bytes(rng.randrange(256) for _ in range(size)), (dns.host, dns.port))
        # a readable header with a broken question: FORMERR with the same id
        sock.sendto(b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x07broken", (dns.host, dns.port))
        deadline = time.monotonic() + 3
        formerr = None
        while time.monotonic() < deadline and formerr is None:
            try:
                data = sock.recv(4096)
            except socket.timeout:
                break
            if data[:2] == b"\x12\x34":
                formerr = data
        assert formerr is not None and formerr[3] & 0x0F == RCODE.FORMERR
        # a response sent to us is never answered (no reflection loops)
        sock.sendto(DNSRecord.question("web.default.svc.cluster.local").reply().pack(), (dns.host, dns.port))
    with socket.create_connection((dns.host, dns.port), timeout=2) as conn:
        conn.sendall(struct.pack(">H", 20) + os.urandom(20))
        conn.recv(1024)          # FORMERR or closed, either way the server lives on
    assert ask(dns, "web.default.svc.cluster.local").rr
    assert ask(dns, "web.default.svc.cluster.local", tcp=True).rr
    assert dns.counts["formerr"] >= 1


def test_tcp_connections_are_bounded_and_idle_ones_closed(dns):
    held = [socket.create_connection((dns.host, dns.port), timeout=3) for _ in range(4)]
    try:
        time.sleep(0.2)
        extra = socket.create_connection((dns.host, dns.port), timeout=3)
        assert extra.recv(10) == b""            # over the limit: closed at once
        extra.close()
        for conn in held:
            assert conn.recv(10) == b""         # idle for tcp_idle (1 s): closed
    finally:
        for conn in held:
            conn.close()
    time.sleep(0.2)
    assert ask(dns, "web.default.svc.cluster.local", tcp=True).rr


def test_resolv_conf_upstreams_skip_ourselves(tmp_path):
    text = "# comment\nsearch corp.example\nnameserver 10.0.0.2\nnameserver 10.0.0.53 # us\n" \
           "nameserver bogus\nnameserver fe80::1%eth0\noptions ndots:2\n"
    assert parse_resolv_conf(text) == ["10.0.0.2", "10.0.0.53", "fe80::1"]
    assert without_self([("10.0.0.2", 53), ("10.0.0.53", 53)], [("10.0.0.53", 53)]) == [("10.0.0.2", 53)]
    assert without_self([("10.0.0.2", 53)], [("0.0.0.0", 53)]) == []
    path = tmp_path / "resolv.conf"
    path.write_text(text)
    upstreams = ResolvConfUpstreams(str(path), own=[("10.0.0.53", 53)])
    assert upstreams() == [("10.0.0.2", 53), ("fe80::1", 53)]
    assert ResolvConfUpstreams(str(tmp_path / "missing"))() == []


def test_resolv_conf_changes_are_picked_up(tmp_path):
    path = tmp_path / "resolv.conf"
    path.write_text("nameserver 10.0.0.2\n")
    upstreams = ResolvConfUpstreams(str(path))
    assert upstreams() == [("10.0.0.2", 53)]
    path.write_text("nameserver 10.0.0.3\nnameserver 10.0.0.4\nnameserver 10.0.0.5\nnameserver 10.0.0.6\n")
    os.utime(path, ns=(0, 1))                  # a new mtime, even within the clock's resolution
    assert upstreams() == [("10.0.0.2", 53)]   # looked at most every RECHECK_INTERVAL s
    upstreams._checked -= 60
    assert upstreams() == [("10.0.0.3", 53), ("10.0.0.4", 53), ("10.0.0.5", 53)]     # 3 at most, as glibc
    path.unlink()
    upstreams._checked -= 60
    assert upstreams() == []
