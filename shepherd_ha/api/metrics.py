"""Prometheus metrics: request counts and latencies, plus Raft and store gauges read
at scrape time (one registry per app, so several replicas can share a process)."""
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, CounterMetricFamily


class ReplicaCollector:
    def __init__(self, replica):
        self.replica = replica

    def collect(self):
        status = self.replica.status()
        gauges = {
            "shepherd_raft_term": ("Current Raft term", status["term"]),
            "shepherd_raft_commit_index": ("Raft commit index", status["commitIndex"]),
            "shepherd_raft_applied_index": ("Raft index applied to the store", status["appliedIndex"]),
            "shepherd_raft_is_leader": ("1 if this replica is the Raft leader", int(status["role"] == "leader")),
            "shepherd_raft_connected_peers": ("Peers this replica is connected to", len(status["connectedPeers"])),
            "shepherd_store_revision": ("Store revision", status["revision"]),
            "shepherd_store_objects": ("Objects in the store", status["objects"]),
            "shepherd_watch_log_oldest_revision": ("Oldest revision a watch can resume from",
                                                  self.replica.watch_log.oldest_servable()),
        }
        for name, (doc, value) in gauges.items():
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily("shepherd_fsm_fenced_rejections", "Controller writes refused for a stale epoch",
                                  value=status["fencedRejections"])
        yield CounterMetricFamily("shepherd_fsm_malformed_commands", "Commands the store refused as malformed",
                                  value=status["malformedCommands"])
        yield CounterMetricFamily("shepherd_read_barriers", "Read barriers sent through Raft",
                                  value=self.replica.barrier.barriers_sent)


class FlowControlCollector:
    """Per priority level (and long-running pool): seats, in flight, queued, rejected."""

    def __init__(self, flow):
        self.flow = flow

    def collect(self):
        levels = self.flow.snapshot()
        label = ["priority_level"]
        families = {key: kind("shepherd_flowcontrol_" + name, doc, labels=label) for key, kind, name, doc in (
            ("seats", GaugeMetricFamily, "seats", "Requests a priority level (or long-running pool) runs at once"),
            ("queueLength", GaugeMetricFamily, "queue_length", "Requests that may wait for a seat"),
            ("inFlight", GaugeMetricFamily, "current_inflight_requests",
             "Requests holding a seat (or long-running slot) now"),
            ("queued", GaugeMetricFamily, "current_inqueue_requests", "Requests waiting for a seat now"),
            ("dispatched", CounterMetricFamily, "dispatched_requests", "Requests given a seat"),
            ("waitSeconds", CounterMetricFamily, "wait_seconds", "Time admitted requests waited for a seat"))}
        rejected = CounterMetricFamily("shepherd_flowcontrol_rejected_requests", "Requests refused with 429, by "
                                       "reason (queue-full, time-out, concurrency-limit)",
                                       labels=["priority_level", "reason"])
        for name, level in levels.items():
            for key, family in families.items():
                family.add_metric([name], level[key])
            for reason in ("queue-full", "time-out", "concurrency-limit"):
                rejected.add_metric([name, reason], level["rejected"].get(reason, 0))
        yield from families.values()
        yield rejected


class ApiMetrics:
    def __init__(self, replica, flow=None):
        self.registry = CollectorRegistry()
        self.requests = Counter("shepherd_api_requests", "API requests by verb, resource and code",
                                ["verb", "resource", "code"], registry=self.registry)
        self.latency = Histogram("shepherd_api_request_duration_seconds", "API request latency (not watches)",
                                 ["verb", "resource"], registry=self.registry,
                                 buckets=(.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5))
        self.registry.register(ReplicaCollector(replica))
        if flow is not None:
            self.registry.register(FlowControlCollector(flow))
