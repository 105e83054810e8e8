"""Prometheus metrics: request counts and latencies, plus Raft and store gauges read
at scrape time (one registry per app, so several replicas can share a process)."""
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

from shepherd_ha.model.resources import RESOURCES

# Paths counted under their own name in shepherd_api_requests; any other non-resource is "other".
PLAIN_PATHS = ("/healthz", "/readyz", "/metrics", "/version", "/shepherd/v1/replica", "/shepherd/v1/cluster",
               "/shepherd/v1/members", "/shepherd/v1/snapshot", "/api", "/apis")


def resource_label(name):
    """The `resource` label of a request: its resource's plural, one of PLAIN_PATHS, or
    "other" (the label's values stay bounded)."""
    return name if name in RESOURCES or name in PLAIN_PATHS else "other"


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
        gaps = self.replica.tick_gaps()
        yield GaugeMetricFamily("shepherd_raft_tick_gap_max_seconds",
                                "Longest wall time between two starts of the Raft tick in the last %d-%d s, "
                                "a late tick now included" % (gaps["windowSeconds"], 2 * gaps["windowSeconds"]),
                                value=gaps["maxSeconds"])
        yield HistogramMetricFamily("shepherd_raft_tick_gap_seconds", "Wall time between two starts of the Raft tick",
                                    buckets=[(_le(bound), count) for bound, count in gaps["buckets"]],
                                    sum_value=gaps["sumSeconds"])
        yield GaugeMetricFamily("shepherd_gc_frozen_objects", "Objects moved out of the garbage collector's way",
                                value=status["gc"]["frozenObjects"])
        yield CounterMetricFamily("shepherd_read_barriers", "Read barriers sent through Raft",
                                  value=self.replica.barrier.barriers_sent)
        yield from self._controllers()

    def _controllers(self):
        """What the controllers skipped and which of their threads were restarted (controllers/faults.py)."""
        report = getattr(self.replica, "controller_status", None)
        status = report(counts=True) if report else None
        if not status:
            return
        errors = CounterMetricFamily("shepherd_controller_errors",
                                     "Objects a controller skipped because processing them raised",
                                     labels=["controller", "stage", "resource", "namespace", "name"])
        for controller, stage, resource, namespace, name, n in status.get("errorCounts", ()):
            errors.add_metric([controller, stage, resource, namespace, name], n)
        yield errors
        restarts = CounterMetricFamily("shepherd_controller_thread_restarts",
                                       "Controller threads restarted after they died", labels=["thread"])
        for thread, n in sorted(status.get("restartCounts", {}).items()):
            restarts.add_metric([thread], n)
        yield restarts
        yield GaugeMetricFamily("shepherd_controller_dead_threads", "Controller threads of this epoch not running",
                                value=len(status.get("deadThreads") or ()))
        yield GaugeMetricFamily("shepherd_controllers_active", "1 if this replica's controllers run, all threads up",
                                value=int(bool(status.get("active"))))
        if status.get("eventsDropped") is not None:
            dropped = CounterMetricFamily("shepherd_controller_events_dropped",
                                          "Events the controllers did not write: over --event-qps / --event-burst",
                                          labels=["component"])
            for component, n in sorted(status["eventsDropped"].items()):
                dropped.add_metric([component], n)
            yield dropped
        pacing = status.get("writePacing")
        if pacing:
            yield GaugeMetricFamily("shepherd_controller_write_rate_limit",
                                    "Controller writes per second allowed while node heartbeats wait (0: not paced)",
                                    value=pacing["rateLimit"] or 0)
            yield CounterMetricFamily("shepherd_controller_write_paced_seconds",
                                      "Time controller writers waited for node heartbeats", value=pacing["pacedSeconds"])
            if pacing.get("heartbeatsAtRisk") is not None:
                yield GaugeMetricFamily("shepherd_controller_late_heartbeat_nodes",
                                        "Nodes whose heartbeat is late (not yet a grace period) at the write pacer's "
                                        "last look", value=pacing["heartbeatsAtRisk"])


def _le(bound):
    return "+Inf" if bound == float("inf") else repr(bound)


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
                                       "reason (queue-full, time-out, concurrency-limit, per-user)",
                                       labels=["priority_level", "reason"])
        for name, level in levels.items():
            for key, family in families.items():
                family.add_metric([name], level[key])
            for reason in ("queue-full", "time-out", "concurrency-limit", "per-user"):
                rejected.add_metric([name, reason], level["rejected"].get(reason, 0))
        yield from families.values()
        yield rejected


class ConnectionCollector:
    """Open connections and those refused (api/http_server.py Limits), per worker process."""

    def __init__(self, limits):
        self.limits = limits

    def collect(self):
        snap = self.limits.snapshot()
        yield GaugeMetricFamily("shepherd_api_connections_open", "Open API connections (this worker)",
                                value=snap["open"])
        yield GaugeMetricFamily("shepherd_api_connection_addresses", "Client addresses with an open connection",
                                value=snap["addresses"])
        refused = CounterMetricFamily("shepherd_api_connections_refused", "Connections refused at accept, by "
                                      "reason (per-address, total)", labels=["reason"])
        for reason in ("per-address", "total"):
            refused.add_metric([reason], snap["refused"].get(reason, 0))
        yield refused


class ThreadCollector:
    """This worker's server threads as its budget sizes them (api/thread_budget.py)."""

    def __init__(self, budget):
        self.budget = budget

    def collect(self):
        yield GaugeMetricFamily("shepherd_api_threads", "Server threads of this API worker (grown with watches)",
                                value=self.budget.threads)
        yield GaugeMetricFamily("shepherd_api_threads_max", "Server threads with every long-running slot in use",
                                value=self.budget.ceiling)
        yield CounterMetricFamily("shepherd_api_thread_resizes", "Times the server threads were grown or shrunk",
                                  value=self.budget.resizes)
        yield CounterMetricFamily("shepherd_api_thread_resize_failures", "Resizes that raised (threads could not "
                                  "be started)", value=self.budget.failures)


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
