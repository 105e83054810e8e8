"""How fast the node lifecycle controller may start evicting nodes' pods, zone by zone:
Kubernetes' node eviction rate and disruption modes.

Nodes are grouped by their `topology.kubernetes.io/zone` label (no label: one zone).
A zone is
- Normal: evictions start at `node_eviction_rate` nodes per second (one at once);
- PartialDisruption: more than 2 of its nodes, and at least `unhealthy_zone_threshold`
  of them, are NotReady: `secondary_node_eviction_rate`, or none at all in a zone of
  at most `large_cluster_size_threshold` nodes;
- FullDisruption: none of its nodes is Ready: the normal rate while another zone has a
  Ready node (the zone itself is gone), and no eviction anywhere when every zone is
  fully disrupted. Leaving that state, every node gets a full grace period again
  (node_lifecycle.py), as Kubernetes does: they were cut off together.

A zone's NotReady nodes are those whose lease stopped or whose Ready condition is not
True. When a zone's rate changes, its next eviction may start at once (a new bucket).

Many nodes going NotReady together is more often the control plane's trouble than the
nodes' (an overloaded replica refusing lease renewals, a partitioned leader), and
evicting them all would move every pod at once, more load on a control plane already
short of it. Only the start of a node's eviction is paced; once started, the pods that
land on it later are deleted without waiting.
"""
from .settings import ControllerSettings

ZONE_LABEL = "topology.kubernetes.io/zone"
NORMAL, PARTIAL, FULL = "Normal", "PartialDisruption", "FullDisruption"
RECHECK = 5.0        # seconds between looks at a node whose eviction waits (Kubernetes' node-monitor-period)


def zone_of(node):
    labels = (node.get("metadata") or {}).get("labels") or {}
    zone = labels.get(ZONE_LABEL) if isinstance(labels, dict) else None
    return zone if isinstance(zone, str) else ""


def zone_state(ready, not_ready, threshold):
    if ready == 0 and not_ready > 0:
        return FULL
    if not_ready > 2 and not_ready / float(ready + not_ready) >= threshold:
        return PARTIAL
    return NORMAL


class EvictionPacer:
    """Per zone, a token bucket of one: `allow(zone, counts, now)` says whether a node of
    that zone may start its eviction now, or how long until it may ask again."""

    def __init__(self, settings=None):
        settings = settings or ControllerSettings()
        self.rate = settings.node_eviction_rate
        self.secondary_rate = settings.secondary_node_eviction_rate
        self.threshold = settings.unhealthy_zone_threshold
        self.large = settings.large_cluster_size_threshold
        self._next = {}        # zone -> (clock time its next eviction may start, the rate it was set at)
        self.states = {}       # zone -> its state when last looked at

    def states_of(self, counts):
        """{zone: state} for {zone: (ready, not ready)}."""
        return {zone: zone_state(ready, not_ready, self.threshold) for zone, (ready, not_ready) in counts.items()}

    @staticmethod
    def all_down(states):
        return bool(states) and all(s == FULL for s in states.values())

    def zone_rate(self, zone, states, counts):
        """(nodes per second, why in words) for evictions starting in `zone`."""
        state = states.get(zone, NORMAL)
        if self.all_down(states):
            return 0.0, "no node is Ready in any zone: the control plane, not the nodes, may be failing"
        ready, not_ready = counts.get(zone, (0, 0))
        if state == PARTIAL:
            why = "%d of %d nodes of the zone are NotReady (%s): " % (not_ready, ready + not_ready, state)
            if ready + not_ready <= self.large:
                return 0.0, why + "no eviction in a zone of at most %d nodes" % self.large
            return self.secondary_rate, why + ("evictions start at most %g nodes per second" % self.secondary_rate
                                               if self.secondary_rate > 0 else
                                               "--secondary-node-eviction-rate is 0")
        return self.rate, ("evictions start at most %g nodes per second" % self.rate if self.rate > 0 else
                           "--node-eviction-rate is 0")

    def allow(self, zone, counts, now):
        """(allowed, seconds until it may ask again, why in words): whether an eviction in
        `zone` may start now (if so, it is counted)."""
        states = self.states_of(counts)
        rate, why = self.zone_rate(zone, states, counts)
        if rate <= 0:
            return False, RECHECK, why
        due, set_at = self._next.get(zone, (now, rate))
        if set_at != rate:
            due = min(due, now)            # a new rate, a new bucket (with its one token)
        if now < due:
            return False, min(due - now, RECHECK), why      # sooner if the zone's rate changes
        self._next[zone] = (now + 1.0 / rate, rate)
        return True, 0.0, why

    def reset(self):
        """Every zone's next eviction may start at once (after all zones were down)."""
        self._next.clear()

    def changed_states(self, states, counts):
        """[(zone, old state, new state, ready, not ready)] since the last call."""
        out = []
        for zone, state in sorted(states.items()):
            old = self.states.get(zone, NORMAL)
            if state != old:
                out.append((zone, old, state) + tuple(counts[zone]))
            self.states[zone] = state
        return out
