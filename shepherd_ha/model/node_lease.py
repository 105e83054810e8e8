"""The node lease contract between agents and the node lifecycle controller: where a
node's Lease lives and how often its agent renews it by default. One place, because
the controller's grace period is checked against the agents' interval."""

from .times import parse_seconds

LEASE_NAMESPACE = "kube-node-lease"
LEASE_INTERVAL = 5.0      # seconds between renewals: the agent's default, the server's assumption


def renewal_late_after(interval, grace):
    """Seconds without a renewal after which a node's heartbeat is late (at risk): a
    quarter of the slack between the renewal interval and the grace period past one
    interval (7.5 s for 5 s renewals and a 15 s grace period), so at least one renewal
    has failed and there is still time for the next. The node lifecycle controller makes
    the controllers' writes yield while any node is late (write_pacing.py); flow control
    gives a late node's renewal seats of its own (api/flow_control.py)."""
    return interval + (grace - interval) / 4


def lease_age(lease, now):
    """Seconds from the Lease's spec.renewTime (the agent's clock) to `now` (seconds since
    the epoch), or None when it has none that parses."""
    renewed = parse_seconds(((lease or {}).get("spec") or {}).get("renewTime"))
    return None if renewed is None else now - renewed
