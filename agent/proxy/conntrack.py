"""Conntrack entries the rules alone cannot fix: a UDP (or SCTP) flow keeps its NAT
decision for as long as packets keep coming, so a client sending to a removed
endpoint would send there forever. After each restore, the entries of endpoints
that left a Service port (scale to zero and a deleted Service included) are
deleted with the `conntrack` tool, and so are a port's entries when it gets its
first endpoint (packets sent while it had none may have left an entry without NAT).

TCP is left alone, as kube-proxy does: a TCP connection ends with its endpoint
(reset or timeout), and deleting its entry would cut a terminating pod's drain.
"""
import logging

from .rules import UDP_LIKE

log = logging.getLogger(__name__)


def _udp_like(ports):
    return {sp.id: sp for sp in ports if sp.protocol in UDP_LIKE}


def stale_flows(old_ports, new_ports):
    """The conntrack deletions going from `old_ports` to `new_ports` (ServicePorts):
    a list of argument lists for `conntrack -D`, in a fixed order."""
    old, new = _udp_like(old_ports), _udp_like(new_ports)
    out = []
    for key in sorted(set(old) | set(new)):
        before, after = old.get(key), new.get(key)
        proto = (after or before).protocol.lower()
        kept = {ip for ip, _ in (after.endpoints if after else ())}
        if before is not None:
            for ip in sorted({ip for ip, _ in before.endpoints} - kept):
                out.append(["-p", proto, "--orig-dst", before.cluster_ip, "--dst-nat", ip])
                if before.node_port:
                    out.append(["-p", proto, "--orig-port-dst", str(before.node_port), "--dst-nat", ip])
        if after is not None and after.endpoints and (before is None or not before.endpoints):
            out.append(["-p", proto, "--orig-dst", after.cluster_ip])
    return out


class Conntrack:
    def __init__(self, iptables):
        self.iptables = iptables      # its runner (and prefix) runs conntrack too
        self.deleted_calls = 0

    def delete(self, flows):
        """Run `conntrack -D` for each flow; "0 flow entries" (exit 1) is not an error."""
        for args in flows:
            proc = self.iptables.run(["conntrack", "-D"] + args, check=False)
            self.deleted_calls += 1
            if proc.returncode not in (0, 1):
                log.warning("conntrack -D %s failed (%d): %s", " ".join(args), proc.returncode,
                            (proc.stderr or "").strip()[:500])
