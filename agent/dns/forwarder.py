"""Questions outside the cluster zone go to the node's own resolver: the nameservers
of the node's /etc/resolv.conf, never our own address (a pod's query would loop
back to us), each tried in turn within a bounded time. No answer in time: None, and
the server answers SERVFAIL (the pod's resolver then tries its next option)."""
import ipaddress
import logging
import os
import socket
import struct
import threading
import time

log = logging.getLogger(__name__)

RESOLV_CONF = "/etc/resolv.conf"
ATTEMPT_TIMEOUT = 2.0      # seconds for one upstream (glibc's own default is 5 s per try)
TOTAL_TIMEOUT = 4.0        # all upstreams together: the pod's resolver gives up after 5 s
RECHECK_INTERVAL = 2.0     # seconds between looks at resolv.conf's mtime
MAX_UPSTREAMS = 3          # as glibc (MAXNS)


def parse_resolv_conf(text):
    """The nameserver IPs of a resolv.conf's text, in order (bad lines skipped)."""
    out = []
    for line in text.splitlines():
        parts = line.split("#", 1)[0].split(";", 1)[0].split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                out.append(str(ipaddress.ip_address(parts[1].split("%", 1)[0])))
            except ValueError:
                continue
    return out


def without_self(servers, own):
    """servers ([(ip, port)]) minus our own listening address(es) `own`
    ([(ip, port)]; an unspecified ip 0.0.0.0 stands for every local address)."""
    out = []
    for ip, port in servers:
        looped = False
        for own_ip, own_port in own:
            if port != own_port:
                continue
            if ip == own_ip or own_ip in ("0.0.0.0", "::"):
                looped = True
        if not looped:
            out.append((ip, port))
    return out


class ResolvConfUpstreams:
    """The node's nameservers from resolv.conf, re-read when the file changes."""

    def __init__(self, path=RESOLV_CONF, own=()):
        self.path = path
        self.own = list(own)
        self._lock = threading.Lock()
        self._mtime = None
        self._checked = 0.0
        self._servers = []

    def __call__(self):
        now = time.monotonic()
        with self._lock:
            if self._mtime is None or now - self._checked >= RECHECK_INTERVAL:
                self._checked = now
                self._reload()
            return list(self._servers)

    def _reload(self):
        try:
            mtime = os.stat(self.path).st_mtime_ns
            if mtime == self._mtime:
                return
            with open(self.path) as fh:
                found = [(ip, 53) for ip in parse_resolv_conf(fh.read(65536))]
        except OSError as exc:
            if self._mtime != -1:          # say it once, not at every look
                log.warning("cannot read %s: %s; names outside the cluster get SERVFAIL", self.path,
                            exc.strerror or exc)
            self._servers, self._mtime = [], -1
            return
        self._servers = without_self(found, self.own)[:MAX_UPSTREAMS]
        self._mtime = mtime
        if not self._servers:
            log.warning("%s names no nameserver other than this DNS server: names outside the cluster "
                        "get SERVFAIL", self.path)
        else:
            log.info("DNS: forwarding to %s (from %s)", ", ".join("%s:%d" % s for s in self._servers), self.path)


class Forwarder:
    def __init__(self, upstreams, attempt_timeout=ATTEMPT_TIMEOUT, total_timeout=TOTAL_TIMEOUT):
        self.upstreams = upstreams          # callable -> [(ip, port)]
        self.attempt_timeout = float(attempt_timeout)
        self.total_timeout = float(total_timeout)

    def forward(self, packet):
        """The upstream's answer (bytes) to `packet` (a query as the client sent it),
        or None when no upstream answered in time."""
        if len(packet) < 12:
            return None
        deadline = time.monotonic() + self.total_timeout
        for ip, port in self.upstreams():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                reply = self._udp(ip, port, packet, min(self.attempt_timeout, left))
                if reply is not None and reply[2] & 0x02:       # TC: too big for UDP, ask over TCP
                    left = deadline - time.monotonic()
                    if left > 0:
                        reply = self._tcp(ip, port, packet, min(self.attempt_timeout, left)) or reply
                if reply is not None:
                    return reply
            except OSError as exc:
                log.debug("upstream %s:%d: %s", ip, port, exc)
        return None

    @staticmethod
    def _udp(ip, port, packet, timeout):
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((ip, port))       # replies from anyone else are not delivered to us
            sock.send(packet)
            end = time.monotonic() + timeout
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return None
                sock.settimeout(left)
                try:
                    reply = sock.recv(65535)
                except socket.timeout:
                    return None
                if len(reply) >= 12 and reply[:2] == packet[:2] and reply[2] & 0x80:
                    return reply           # same id and a response; anything else is ignored

    @staticmethod
    def _tcp(ip, port, packet, timeout):
        with socket.create_connection((ip, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">H", len(packet)) + packet)
            head = recv_exact(sock, 2)
            if head is None:
                return None
            reply = recv_exact(sock, struct.unpack(">H", head)[0])
            if reply is None or len(reply) < 12 or reply[:2] != packet[:2]:
                return None
            return reply


def recv_exact(sock, n):
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
