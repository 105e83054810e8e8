"""Service and Endpoints objects and a fake upstream DNS server for the DNS tests."""
import random
import socket
import struct
import threading
import time

from dnslib import QTYPE, RCODE, RR, A, DNSRecord

from shepherd_ha.client import Client


def service(name, ns="default", cluster_ip="10.96.0.10", ports=None, **spec):
    body = {"clusterIP": cluster_ip, "ports": ports if ports is not None else
            [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "dns", "port": 53, "protocol": "UDP"}]}
    body.update(spec)
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": body}


def endpoints(name, ready, not_ready=(), ns="default", port=8080, port_name="http", hostnames=None):
    hostnames = hostnames or {}
    addresses = [dict({"ip": ip}, **({"hostname": hostnames[ip]} if ip in hostnames else {})) for ip in ready]
    subset = {"addresses": addresses, "ports": [{"name": port_name, "port": port, "protocol": "TCP"}]}
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return {"kind": "Endpoints", "metadata": {"name": name, "namespace": ns}, "subsets": [subset]}


def web_client_and_resolv(api, tmp_path):
    """A client of `api` with Service "web" created, and a host resolv.conf naming 127.0.0.1."""
    client = Client([api.url], timeout=2.0, retry_deadline=5.0)
    client.create("services", service("web"), namespace="default")
    resolv = tmp_path / "resolv.conf"
    resolv.write_text("nameserver 127.0.0.1\n")
    return client, resolv


def wait(predicate, timeout=5.0):
    """True once predicate() is, False if not within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def loopback_ip():
    """A 127.x.y.z of this test alone (the whole 127/8 is local on Linux)."""
    return "127.%d.%d.%d" % (random.randint(1, 254), random.randint(1, 254), random.randint(2, 254))


class FakeUpstream:
    """A DNS server for names outside the cluster: example.com A 93.184.216.34; a name
    starting with big. gets TC over UDP and 40 A records over TCP; slow. is never answered."""

    def __init__(self, port=0):
        self.host = loopback_ip()
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind((self.host, port))
        self.port = self.udp.getsockname()[1]
        self.tcp = socket.socket()
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind((self.host, self.port))
        self.tcp.listen(8)
        self.udp.settimeout(0.2)
        self.tcp.settimeout(0.2)
        self.stop = threading.Event()
        self.asked = []
        self.threads = [threading.Thread(target=self._udp_loop, daemon=True),
                        threading.Thread(target=self._tcp_loop, daemon=True)]
        for t in self.threads:
            t.start()

    def answer(self, packet, tcp):
        query = DNSRecord.parse(packet)
        name = str(query.q.qname)
        self.asked.append((name, "tcp" if tcp else "udp"))
        reply = query.reply()
        if name.startswith("slow."):
            return None
        if name.startswith("big."):
            if not tcp:
                reply.header.tc = 1
                return reply.pack()
            for i in range(40):
                reply.add_answer(RR(name, QTYPE.A, rdata=A("192.0.2.%d" % (i + 1)), ttl=60))
        elif name == "example.com.":
            reply.add_answer(RR(name, QTYPE.A, rdata=A("93.184.216.34"), ttl=60))
        else:
            reply.header.rcode = RCODE.NXDOMAIN
        return reply.pack()

    def _udp_loop(self):
        while not self.stop.is_set():
            try:
                packet, addr = self.udp.recvfrom(4096)
            except socket.timeout:
                continue
            reply = self.answer(packet, False)
            if reply:
                self.udp.sendto(reply, addr)

    def _tcp_loop(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.tcp.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(2)
                n = struct.unpack(">H", conn.recv(2))[0]
                reply = self.answer(conn.recv(n), True)
                if reply:
                    conn.sendall(struct.pack(">H", len(reply)) + reply)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(2)
        self.udp.close()
        self.tcp.close()
