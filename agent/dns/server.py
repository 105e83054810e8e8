"""The node's DNS server, UDP and TCP on one address: names in the cluster zone are
answered from the Zone (records.py), the rest forwarded (forwarder.py).

Bounded: forwarded questions wait in a queue of MAX_PENDING for FORWARD_WORKERS
threads (a full queue answers SERVFAIL at once), at most MAX_TCP TCP connections
(more are closed on accept), TCP connections idle for TCP_IDLE s are closed. A
packet that does not parse is answered FORMERR when its header can be read and
dropped otherwise; nothing a client sends stops a thread.
"""
import logging
import queue
import socket
import struct
import threading

from dnslib import AAAA, CNAME, NS, PTR, QTYPE, RCODE, RR, SOA, SRV, A, DNSHeader, DNSRecord
from dnslib.buffer import Buffer

from .forwarder import recv_exact

log = logging.getLogger(__name__)

MAX_PENDING = 256
FORWARD_WORKERS = 8
MAX_TCP = 64
TCP_IDLE = 5.0
UDP_PLAIN = 512            # a UDP answer's limit without EDNS (RFC 1035)
UDP_MAX = 4096
UDP_RCVBUF = 1 << 20

_RDATA = {"A": lambda v: A(v), "AAAA": lambda v: AAAA(v), "CNAME": lambda v: CNAME(v + "."),
          "NS": lambda v: NS(v + "."), "PTR": lambda v: PTR(v + "."),
          "SRV": lambda v: SRV(priority=v[0], weight=v[1], port=v[2], target=v[3] + "."),
          "SOA": lambda v: SOA(v[0] + ".", v[1] + ".", v[2:])}


def _rr(record, rname=None):
    return RR(rname or record.name + ".", getattr(QTYPE, record.rtype), rdata=_RDATA[record.rtype](record.value),
              ttl=record.ttl)


def error_reply(packet, rcode):
    """A bare answer with `rcode` to a packet whose header reads; None otherwise."""
    if len(packet) < 12:
        return None
    try:
        header = DNSHeader.parse(Buffer(packet[:12]))
    except Exception:  # noqa: BLE001 - garbage
        return None
    if header.qr:
        return None                   # a response: never answer those (reflection loops)
    reply = DNSRecord(DNSHeader(id=header.id, qr=1, ra=1, rd=header.rd, opcode=header.opcode, rcode=rcode))
    return reply.pack()


class DNSServer:
    def __init__(self, zone, host="127.0.0.1", port=53, forwarder=None, forward_workers=FORWARD_WORKERS,
                 max_pending=MAX_PENDING, max_tcp=MAX_TCP, tcp_idle=TCP_IDLE):
        self.zone = zone
        self.host = host
        self.port = int(port)
        self.forwarder = forwarder
        self.n_workers = forward_workers
        self.max_tcp = max_tcp
        self.tcp_idle = tcp_idle
        self._turn = 0
        self._pending = queue.Queue(maxsize=max_pending)
        self._tcp_slots = threading.BoundedSemaphore(max_tcp)
        self._stop = threading.Event()
        self._threads = []
        self._udp = self._tcp = None
        # for logs and benchmarks; threads bump them without a lock, so they are approximate
        self.counts = {"queries": 0, "forwarded": 0, "servfail": 0, "formerr": 0, "dropped": 0}

    # ---- lifecycle ----

    def start(self):
        """Bind both sockets (OSError when the address is not ours or the port taken)."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        udp = socket.socket(family, socket.SOCK_DGRAM)
        tcp = socket.socket(family, socket.SOCK_STREAM)
        try:
            udp.bind((self.host, self.port))
            port = udp.getsockname()[1]
            tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            tcp.bind((self.host, port))
            tcp.listen(64)
        except OSError:
            udp.close()
            tcp.close()
            raise
        try:   # room for a burst while the process is descheduled (capped by net.core.rmem_max)
            udp.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, UDP_RCVBUF)
        except OSError:
            pass
        self._udp, self._tcp, self.port = udp, tcp, port
        udp.settimeout(0.5)
        tcp.settimeout(0.5)
        targets = [("dns-udp", self._udp_loop), ("dns-tcp", self._accept_loop)]
        targets += [("dns-forward-%d" % i, self._forward_loop) for i in range(self.n_workers)]
        for name, target in targets:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout=2.0):
        self._stop.set()
        for t in self._threads:
            t.join(timeout)
        for sock in (self._udp, self._tcp):
            if sock is not None:
                sock.close()

    # ---- answering ----

    def handle(self, packet, udp=False):
        """The answer (bytes) to one query packet; None to drop it; FORWARD when it is
        for the upstream resolver. udp: keep the answer to the client's UDP size."""
        self.counts["queries"] += 1
        try:
            query = DNSRecord.parse(packet)
        except Exception:  # noqa: BLE001 - dnslib raises more than DNSError on garbage
            self.counts["formerr"] += 1
            return error_reply(packet, RCODE.FORMERR)
        header = query.header
        if header.qr:
            self.counts["dropped"] += 1
            return None
        if header.opcode != 0:
            return error_reply(packet, RCODE.NOTIMP)
        if len(query.questions) != 1:
            self.counts["formerr"] += 1
            return error_reply(packet, RCODE.FORMERR)
        question = query.questions[0]
        qname = str(question.qname)
        qtype = QTYPE.get(question.qtype, "TYPE%d" % question.qtype)
        answer = self.zone.answer(qname, qtype)
        if answer.forward:
            return FORWARD
        reply = query.reply(ra=1, aa=1)
        reply.header.rcode = getattr(RCODE, answer.rcode)
        records = answer.answers
        if len(records) > 1:       # round robin, as CoreDNS's loadbalance: clients mostly take the first
            self._turn = (self._turn + 1) % len(records)
            records = records[self._turn:] + records[:self._turn]
        for record in records:
            reply.add_answer(_rr(record, qname))
        for record in answer.authority:
            reply.add_auth(_rr(record))
        data = reply.pack()
        if udp and len(data) > _udp_limit(query):       # too big for this UDP client: TC, it retries over TCP
            reply = query.reply(ra=1, aa=1)
            reply.header.tc = 1
            data = reply.pack()
        return data

    def _forwarded(self, packet):
        reply = self.forwarder.forward(packet) if self.forwarder is not None else None
        if reply is None:
            self.counts["servfail"] += 1
            return error_reply(packet, RCODE.SERVFAIL)
        self.counts["forwarded"] += 1
        return reply

    # ---- UDP ----

    def _udp_loop(self):
        while not self._stop.is_set():
            try:
                packet, addr = self._udp.recvfrom(UDP_MAX)
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            try:
                reply = self.handle(packet, udp=True)
                if reply is FORWARD:
                    try:
                        self._pending.put_nowait((packet, addr))
                    except queue.Full:
                        self.counts["servfail"] += 1
                        reply = error_reply(packet, RCODE.SERVFAIL)
                    else:
                        continue
                if reply is not None:
                    self._udp.sendto(reply, addr)
            except Exception:  # noqa: BLE001 - one packet never stops the server
                log.exception("DNS query from %s", addr)

    def _forward_loop(self):
        while not self._stop.is_set():
            try:
                packet, addr = self._pending.get(timeout=0.5)
            except queue.Empty:
                continue
            try:
                reply = self._forwarded(packet)
                if reply is not None:
                    self._udp.sendto(reply, addr)
            except Exception:  # noqa: BLE001
                log.exception("forwarding a DNS query from %s", addr)

    # ---- TCP ----

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                conn, addr = self._tcp.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                continue
            if not self._tcp_slots.acquire(blocking=False):
                self.counts["dropped"] += 1
                conn.close()
                continue
            threading.Thread(target=self._tcp_conn, args=(conn, addr), name="dns-tcp-conn", daemon=True).start()

    def _tcp_conn(self, conn, addr):
        try:
            conn.settimeout(self.tcp_idle)
            while not self._stop.is_set():
                head = recv_exact(conn, 2)
                if head is None:
                    return
                packet = recv_exact(conn, struct.unpack(">H", head)[0])
                if packet is None:
                    return
                reply = self.handle(packet)
                if reply is FORWARD:
                    reply = self._forwarded(packet)
                if reply is None:
                    return
                conn.sendall(struct.pack(">H", len(reply)) + reply)
        except (OSError, socket.timeout):
            pass
        except Exception:  # noqa: BLE001
            log.exception("DNS over TCP from %s", addr)
        finally:
            conn.close()
            self._tcp_slots.release()


FORWARD = object()       # handle()'s answer for a question outside the zone


def _udp_limit(query):
    """The size a UDP client takes: 512, or its EDNS0 buffer size (at most 4096)."""
    for rr in query.ar:
        if rr.rtype == QTYPE.OPT:
            return max(UDP_PLAIN, min(UDP_MAX, rr.rclass))
    return UDP_PLAIN
