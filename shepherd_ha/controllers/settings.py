"""Controller settings, validated against each other (and against the agents' lease
interval, which the node lifecycle controller must tolerate)."""
import dataclasses

from shepherd_ha.model import network
from shepherd_ha.model.node_lease import LEASE_INTERVAL
from shepherd_ha.model.service_network import DEFAULT_SERVICE_CIDR, parse_service_cidr
from shepherd_ha.options import ConfigError


@dataclasses.dataclass
class ControllerSettings:
    node_grace_period: float = 15.0      # lease unchanged this long -> node NotReady
    pod_eviction_timeout: float = 10.0   # NotReady this much longer -> its pods are deleted
    # How fast nodes' evictions start, per zone (controllers/eviction_pacing.py; Kubernetes' defaults).
    node_eviction_rate: float = 0.1            # nodes per second while a zone is healthy
    secondary_node_eviction_rate: float = 0.01   # ... while it is partially disrupted (0 up to the size below)
    unhealthy_zone_threshold: float = 0.55     # this share of a zone NotReady (and over 2 nodes): disrupted
    large_cluster_size_threshold: int = 50     # zones up to this many nodes evict nothing while disrupted
    node_lease_interval: float = LEASE_INTERVAL   # how often agents renew their lease
    orphan_pod_grace: float = 40.0       # a pod's node missing this long -> the pod is deleted
    # Deployments and ReplicaSets wait this long after a pod change for more of them: a
    # reconcile reads every pod of its owner, and while 30,000 pods start, one per pod
    # change took over half of the leader's API worker (Kubernetes' Job controller: 1 s).
    pod_batch_period: float = 0.5
    event_ttl: float = 3600.0            # events older than this are deleted
    event_max: int = 10000               # at most this many events are kept
    event_qps: float = 50.0              # events the controllers write per second at most (kubelet's default)
    event_burst: int = 100               # ... and in a burst
    resync_period: float = 30.0          # seconds between a controller's full re-queues
    cluster_cidr: str = network.CLUSTER_CIDR     # the pod network, one block per node (node_ipam.py)
    node_cidr_mask_size: int = network.NODE_MASK
    service_cidr: str = DEFAULT_SERVICE_CIDR   # cluster IPs come from here (set in the FSM by the leader)

    def validate(self):
        if self.node_lease_interval <= 0:
            raise ConfigError("--node-lease-interval must be positive")
        if self.node_grace_period < 2 * self.node_lease_interval:
            raise ConfigError("--node-grace-period (%.1fs) must be at least 2 x the agents' lease interval "
                              "(%.1fs), or one late renewal marks a healthy node NotReady"
                              % (self.node_grace_period, self.node_lease_interval))
        if self.pod_eviction_timeout < 0:
            raise ConfigError("--pod-eviction-timeout must not be negative")
        if self.node_eviction_rate < 0 or self.secondary_node_eviction_rate < 0:
            raise ConfigError("--node-eviction-rate and --secondary-node-eviction-rate must not be negative "
                              "(nodes per second; 0: none)")
        if not 0 < self.unhealthy_zone_threshold <= 1:
            raise ConfigError("--unhealthy-zone-threshold must be a share of a zone's nodes, above 0 and at most 1 "
                              "(got %s)" % self.unhealthy_zone_threshold)
        if self.large_cluster_size_threshold < 0:
            raise ConfigError("--large-cluster-size-threshold must not be negative")
        if self.pod_batch_period < 0:
            raise ConfigError("--pod-batch-period must not be negative")
        if self.orphan_pod_grace < 0:
            raise ConfigError("--orphan-pod-grace must not be negative")
        if self.event_ttl <= 0 or self.event_max < 1:
            raise ConfigError("--event-ttl must be positive and --event-max at least 1")
        if not self.event_qps > 0 or self.event_burst < 1:
            raise ConfigError("--event-qps must be positive and --event-burst at least 1 (got %s and %s): "
                              "events over them are dropped" % (self.event_qps, self.event_burst))
        try:
            network.parse_plan(self.cluster_cidr, self.node_cidr_mask_size)
        except network.NetworkError as exc:
            raise ConfigError("--cluster-cidr / --node-cidr-mask-size: %s" % exc)
        try:
            self.service_cidr = str(parse_service_cidr(self.service_cidr))
        except ValueError as exc:
            raise ConfigError("--service-cidr: %s" % exc)
        return self

    @classmethod
    def from_values(cls, values):
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (values or {}).items() if k in fields and v is not None}).validate()
