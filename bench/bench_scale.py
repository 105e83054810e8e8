#!/usr/bin/env python3
"""A hollow fleet against a local cluster, kubemark-like: does the control plane stay up?

Method:
1. A fresh local cluster of --replicas replicas (as `shepherd-ha local up --agents 0
   --no-auth` makes one; server options with --server-option key=value).
2. A hollow fleet in two child processes (bench/hollow_fleet.py): --nodes Nodes
   registered Ready, each renewing its Lease every --lease-interval s (merge PATCH)
   and posting status every --status-interval s, each node on its own keep-alive
   connection to its home replica (spread over the replicas); a kubelet simulator
   (one watch on all pods, a status PATCH to Running for every pod bound to a hollow
   node, one writer per node; with --node-watches each node watches its own pods as an
   agent does and those watches drive the writes, the watch on all pods only counts).
   The fleet's own CPU is measured on its processes.
3. A Deployment of --list-size pods (the target of the list probe), waited for.
4. From here on the run is judged: --deployments Deployments totalling --pods pods are
   created at once; the time until every one of their pods is Running is measured.
5. --steady-seconds of steady state: probes from this process, round-robin over the
   replicas, paced: GET of one pod (linearizable), a label-selected list of
   --list-size pods (linearizable, and at resourceVersion=0), a pod create; lease
   renewal latency comes from the fleet itself.
Printed: time to Running, leader changes (replica terms sampled from
/shepherd/v1/replica every 0.5 s), fenced writes and the longest Raft tick gap (from
/metrics, "n/a" when not exported), false NotReady, RSS and CPU of every process of
every replica, store size on disk, dump time, `failed _onTick` lines in the logs.
Only the processes this benchmark started are stopped. Asserts nothing.
"""
import argparse
import json
import os
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import common  # noqa: E402
from common import KeepAlive, ms, percentile, progress, say, table  # noqa: E402
import fleet_leader_kill  # noqa: E402
from fleet_checks import ReplicaSampler, metric, metric_like, metrics_text  # noqa: E402
from hollow_fleet import FleetProcess  # noqa: E402
from replica_resources import DumpWatch, ResourceWatch, data_files, dir_size  # noqa: E402

NS = "default"
DEPLOYMENTS = "/apis/apps/v1/namespaces/%s/deployments" % NS
PODS = "/api/v1/namespaces/%s/pods" % NS
SLO = 1.0            # Kubernetes' API latency SLO (p99, seconds)
TICK_GAP = r"shepherd_raft_tick_gap_max_seconds"


def deployment(name, replicas, labels):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": dict(labels, app=name)},
                                  "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                                           "resources": {"requests": {"cpu": "10m",
                                                                                      "memory": "16Mi"}}}]}}}}


def sizes(total, count):
    return [total // count + (1 if i < total % count else 0) for i in range(count)]


def post_json(urls, path, obj, attempts=20):
    """POST with one Idempotency-Key, rotating over replicas on 503/errors; the last code."""
    import requests
    key, code = uuid.uuid4().hex, None
    for i in range(attempts):
        try:
            code = requests.post(urls[i % len(urls)] + path, json=obj, headers={"Idempotency-Key": key},
                                 timeout=10).status_code
        except requests.RequestException:
            code = None
        if code in (200, 201, 409):
            return code
        time.sleep(0.2)
    return code


def running_with(url, selector):
    data = common.get_json(url, "%s?labelSelector=%s&resourceVersion=0" % (PODS, selector), timeout=10)
    items = (data or {}).get("items") or []
    return sum(1 for p in items if (p.get("status") or {}).get("phase") == "Running"), items


class Probe(threading.Thread):
    """One kind of request, paced, round-robin over replicas; latencies of 2xx answers."""

    def __init__(self, name, urls, make_request, period, until):
        super().__init__(name="probe-" + name, daemon=True)
        self.label, self.urls, self.make_request = name, urls, make_request
        self.period, self.until = period, until
        self.latencies, self.errors, self.codes = [], 0, {}
        self.worst = None          # (seconds, when it started (monotonic), replica index) of the slowest
        self.conns = [KeepAlive(u, 10.0) for u in urls]

    def run(self):
        n = 0
        self.began = time.monotonic()
        while time.monotonic() < self.until:
            started = time.monotonic()
            method, path, body = self.make_request(n)
            headers = {"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex} if body else {}
            try:
                code, _ = self.conns[n % len(self.conns)].request(method, path, body, headers)
            except Exception:  # noqa: BLE001 - counted
                code = None
            took = time.monotonic() - started
            self.codes[code] = self.codes.get(code, 0) + 1
            if code is not None and 200 <= code < 300:
                self.latencies.append(took)
                if self.worst is None or took > self.worst[0]:
                    self.worst = (took, started, n % len(self.conns))
            else:
                self.errors += 1
            n += 1
            time.sleep(max(0.0, self.period - took))
        for c in self.conns:
            c.close()


def steady_state(urls, seconds, pod_names, list_app, list_size, tag):
    until = time.monotonic() + seconds
    body = lambda n: json.dumps(  # noqa: E731
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe-%s-%d" % (tag, n), "labels": {"probe": tag}},
         "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}}).encode()
    probes = [
        Probe("get pod", urls, lambda n: ("GET", "%s/%s" % (PODS, pod_names[n * 7919 % len(pod_names)]), None),
              0.1, until),
        Probe("list %d (selector)" % list_size, urls, lambda n: ("GET", "%s?labelSelector=app=%s" % (PODS, list_app),
                                                               None), 1.0, until),
        Probe("list %d (rv=0)" % list_size, urls, lambda n: ("GET", "%s?labelSelector=app=%s&resourceVersion=0"
                                                  % (PODS, list_app), None), 1.0, until),
        Probe("create pod", urls, lambda n: ("POST", PODS, body(n)), 0.2, until),
    ]
    for p in probes:
        p.start()
    return probes


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=30000)
    ap.add_argument("--deployments", type=int, default=30)
    ap.add_argument("--steady-seconds", type=float, default=180.0)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--list-size", type=int, default=500)
    ap.add_argument("--lease-interval", type=float, default=5.0, help="the agent's default")
    ap.add_argument("--status-interval", type=float, default=30.0, help="the agent's default")
    ap.add_argument("--converge-timeout", type=float, default=600.0)
    ap.add_argument("--node-watches", action="store_true",
                    help="a watch of its own pods per node, as agents hold them (bench/hollow_node_watch.py)")
    ap.add_argument("--server-option", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--keep", action="store_true", help="keep the cluster's files (logs, data) after the run")
    ap.add_argument("--kill-leader", action="store_true",
                    help="after the steady state, SIGKILL the leader while the fleet and a writer run, restart it, "
                         "and check that nothing acknowledged was lost and the pods converge again "
                         "(bench/fleet_leader_kill.py)")
    args = ap.parse_args()
    common.exit_on_sigterm()
    import yaml
    opts = {k: yaml.safe_load(v) for k, v in (o.split("=", 1) for o in args.server_option)}
    # The default cluster CIDR has 256 node blocks; more hollow nodes would wait for one (NetworkUnavailable).
    opts.setdefault("cluster_cidr", "10.0.0.0/8")
    # Every hollow node connects from 127.0.0.1: the per-address cap is for real clients (docs/security.md).
    opts.setdefault("max_connections_per_address", 0)
    opts.setdefault("max_connections", 0)
    tag = uuid.uuid4().hex[:6]
    say("bench_scale: %d hollow nodes, %d Deployments of %d pods in all, %d replicas, %.0f s steady state"
        % (args.nodes, args.deployments, args.pods, args.replicas, args.steady_seconds))
    common.print_machine()
    common.print_background_load()
    with common.BenchCluster(args.replicas, keep=args.keep, server_options=opts or None) as bc:
        run(bc, args, tag)


def run(bc, args, tag):
    urls = bc.urls()
    lc = bc.cluster
    res = ResourceWatch(bc.pids()).start()
    dumps = DumpWatch({i: os.path.join(lc.dir, i, "data") for i in bc.ids()}).start()
    res.mark("start")
    fleet = FleetProcess(urls=urls, nodes=args.nodes, lease_interval=args.lease_interval,
                         status_interval=args.status_interval, count_label=("fleet-run", tag),
                         grace=float(common_opt(args, "node_grace_period", 15.0)),
                         node_watches=args.node_watches).start()
    try:
        s = fleet.stats()
        progress("fleet up: %d nodes registered (%d failed) in %.1f s, fleet pids %s"
                 % (s["registered"], s["register_failures"], s["registered_in"], fleet.pids))
        list_app = "list-probe-%s" % tag
        post_json(urls, DEPLOYMENTS, deployment(list_app, args.list_size, {"probe-list": tag}))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and running_with(urls[0], "app=" + list_app)[0] < args.list_size:
            time.sleep(1)
        progress("list-probe Deployment: %d of %d Running" % (running_with(urls[0], "app=" + list_app)[0],
                                                               args.list_size))
        sampler = ReplicaSampler(urls).start()
        res.mark("t0")
        fleet_cpu0 = fleet.cpu_seconds()
        t0 = time.monotonic()
        names = ["fleet-%s-%02d" % (tag, i) for i in range(args.deployments)]
        for name, n in zip(names, sizes(args.pods, args.deployments)):
            code = post_json(urls, DEPLOYMENTS, deployment(name, n, {"fleet-run": tag}))
            if code not in (201, 409):
                progress("Deployment %s: HTTP %s" % (name, code))
        progress("%d Deployments created in %.1f s" % (args.deployments, time.monotonic() - t0))
        converged = wait_converged(fleet, sampler, args.pods, args.converge_timeout, t0, dumps)
        res.mark("converged")
        t_steady = time.monotonic()
        cpu_conv = fleet.cpu_seconds()
        _, items = running_with(urls[0], "app=" + names[0])
        pod_names = [p["metadata"]["name"] for p in items] or ["none"]
        progress("steady state for %.0f s (probes: get 10/s, list 1/s each, create 5/s)" % args.steady_seconds)
        probes = steady_state(urls, args.steady_seconds, pod_names, list_app, args.list_size, tag)
        for p in probes:
            p.join(args.steady_seconds + 60)
        t_end = time.monotonic()
        res.mark("end")
        final = fleet.stats(since=t_steady, until=t_end)
        cpu_end = fleet.cpu_seconds()
        terms = sampler.stop()
        fleet_rss = fleet.rss_mb()
        killed = None
        if args.kill_leader:       # after every figure above: the kill is measured on its own
            killed = fleet_leader_kill.kill_leader_under_fleet(
                bc, args, tag, list(zip(names, sizes(args.pods, args.deployments))),
                lambda name, n: post_json(urls, DEPLOYMENTS, deployment(name, n, {"fleet-run": tag})),
                lambda pods, since: wait_converged(fleet, sampler, pods, args.converge_timeout, since))
    finally:
        fleet.stop()
    res.stop()
    dumps.stop()
    report(bc, args, converged, terms, final, probes, res, dumps, killed,
           fleet_cpu=((cpu_conv - fleet_cpu0) / max(1e-9, t_steady - t0), (cpu_end - cpu_conv) / (t_end - t_steady)),
           fleet_rss=fleet_rss)


def common_opt(args, key, default):
    for o in args.server_option:
        k, _, v = o.partition("=")
        if k == key:
            return v
    return default


def wait_converged(fleet, sampler, want, timeout, t0, dumps=None):
    """Seconds from t0 until `want` pods were Running (None: not within `timeout`).
    Each progress line says which replicas are writing a dump (renewals failing during
    one point at its cost)."""
    deadline = t0 + timeout
    last_line = 0.0
    while time.monotonic() < deadline:
        s = fleet.stats(since=time.monotonic() - 5)
        pods = s["pods"]
        now = time.monotonic()
        if pods["running"] >= want and pods["total"] >= want:
            progress("all %d pods Running after %.1f s" % (want, now - t0))
            return now - t0
        if now - last_line >= 5:
            last_line = now
            lat = s["renew_latencies"]
            terms = [st.get("term") for st in sampler.last.values()]
            progress("%5.0f s: pods %d created, %d bound, %d Running; term %s; renewals %d (%d failed, p99 %s ms "
                     "last 5 s); fleet CPU %.1f s%s%s" % (now - t0, pods["total"], pods["bound"], pods["running"],
                                                          max(terms) if terms else "?", s["renewals"],
                                                          s["renew_failures"], ms(percentile(lat, 99), 0),
                                                          s["cpu_seconds"] or 0, _pacing(sampler), _dumping(dumps)))
        time.sleep(1.0)
    progress("not converged within %.0f s" % timeout)
    return None


def _pacing(sampler):
    """The leader's controller write pacing, as its last sample said."""
    for state in sampler.last.values():
        pacing = ((state or {}).get("controllers") or {}).get("writePacing")
        if state.get("role") == "leader" and pacing:
            late = pacing.get("heartbeatsAtRisk")
            return "; writes %s%s" % ("paced at %.0f/s" % pacing["rateLimit"] if pacing.get("paced") else "not paced",
                                      "" if late is None else " (%d nodes late)" % late)
    return ""


def _dumping(dumps):
    busy = dumps.in_progress() if dumps is not None else []
    return "; dumping: %s" % ", ".join(busy) if busy else ""


def log_counts(lc, ident):
    path = os.path.join(lc.dir, ident, "server.log")
    counts = {"failed _onTick": 0, "pickle data was truncated": 0, "ERROR": 0}
    try:
        with open(path, errors="replace") as fh:
            for line in fh:
                for k in counts:
                    if k in line:
                        counts[k] += 1
    except OSError:
        pass
    return counts


def report(bc, args, converged, terms, final, probes, res, dumps, killed, fleet_cpu, fleet_rss):
    lc = bc.cluster
    say()
    say("results (%d nodes, %d pods in %d Deployments, lease %.0f s, status %.0f s)"
        % (args.nodes, args.pods, args.deployments, args.lease_interval, args.status_interval))
    say("  time until all pods Running:   %s" % ("%.1f s" % converged if converged else
                                                 "NOT converged in %.0f s (%d Running)" % (
                                                     args.converge_timeout, final["pods"]["running"])))
    say("  leader changes: %d (terms %s -> %s: %s elections); leaders seen %s" % (
        terms["leader_changes"], terms["term_start"], terms["term_end"], terms["elections"],
        ", ".join("%s@%d" % (i, t) for _, i, t in terms["leaders"][:8])))
    for ident, row in sorted(terms["per_replica"].items()):
        say("    %s: term %s -> %s, leadership losses seen %d, controller activations %s -> %s"
            % (ident, row["term_start"], row["term_end"], row["leadership_losses"], *row["controller_activations"]))
    rd = final["readiness"]
    say("  nodes falsely NotReady: %d (%d transitions, %d of them after a renewal the control plane acknowledged "
        "within the grace period, the others after every renewal of the period failed); NotReady because the fleet "
        "itself sent no renewal in the grace period: %d; NotReady at the end: %d"
        % (rd["false_not_ready"], rd["false_not_ready_events"], rd["false_not_ready_acked"],
           rd["fleet_late_not_ready"], len(rd["not_ready_now"])))
    if rd["false_not_ready_acked"]:
        lags = rd["false_not_ready_acked_lags"]
        say("    of the %d after an acknowledged renewal: %d at the border (the two newest acks nearly a grace period "
            "apart: the renewals between failed, the last one came just too late); %d where the controller's view "
            "lagged (transition minus newest ack: %s s)"
            % (rd["false_not_ready_acked"], rd["false_not_ready_acked_border"], len(lags),
               ", ".join("%.1f" % x for x in lags[:20]) or "-"))
    say("  pods of the run deleted (nothing but evictions deletes them here; a watch re-list misses some): %d"
        % final.get("pods_deleted", 0))
    fenced, gaps, dropped = [], [], []
    for ident in bc.ids():
        text = metrics_text(lc.replica(ident)["api"])
        fenced.append("%s %s" % (ident, _num(metric(text, "shepherd_fsm_fenced_rejections_total"))))
        dropped.append("%s %s" % (ident, _num(metric(text, "shepherd_controller_events_dropped_total"))))
        found = metric_like(text, TICK_GAP)
        gaps.append("%s %s" % (ident, ", ".join("%s=%.3f s" % kv for kv in found.items()) if found else "n/a"))
    say("  fenced controller writes: %s" % "; ".join(fenced))
    say("  controller events dropped over --event-qps (counted by each replica while it led): %s"
        % "; ".join(dropped))
    say("  longest Raft tick gap: %s" % "; ".join(gaps))
    say("  fleet: %d renewals (%d failed, %d overran %.0f s), %d status posts (%d failed), %d pod status writes "
        "(%d conflicts, %d failed, %d given up, %d crashed), %d watch events, %d re-lists"
        % (final["renewals"], final["renew_failures"], final["renew_overruns"], args.lease_interval,
           final["status_posts"], final["status_failures"], final["pod_patches"], final["pod_conflicts"],
           final["pod_failures"], final["pod_gave_up"], final["kubelet_crashes"], final["watch_events"],
           final["relists"]))
    gaps = sorted(final.get("renew_gaps") or [])
    grace = float(common_opt(args, "node_grace_period", 15.0))
    say("  renewal gaps (a node's time between two acknowledged renewals, over 1.5 intervals): %d; over 10 s: %d; "
        "over the %.0f s grace period: %d; longest %s"
        % (len(gaps), sum(1 for g in gaps if g > 10.0), grace, sum(1 for g in gaps if g > grace),
           "%.1f s" % gaps[-1] if gaps else "-"))
    if "node_watches" in final:
        nw = final["node_watches"]
        say("  node watches: %d opened (each watch counts again when it resumes), %d events, %d re-lists, "
            "%d refused with 429, %d failed and resumed, %d crashed (bugs)" % (
                nw["opened"], nw["events"], nw["relists"], nw["throttled"], nw["errors"], nw["crashes"]))
    say("  hollow nodes' connections the server had closed when reused: %d requests sent again on a new one"
        % final.get("stale_retries", 0))
    if final["errors"] or final["crashes"]:
        say("  fleet request failures (retried on the next replica): %s; node loop crashes %d" % (
            "; ".join("%s x%d" % kv for kv in sorted(final["errors"].items(), key=lambda kv: -kv[1])[:6]),
            final["crashes"]))
    say("  fleet's own CPU (its 2 processes): %.2f cores until converged, %.2f cores in steady state; RSS %s MB; "
        "its loop woke up at most %.2f s late (%d times over 1 s)" % (fleet_cpu[0], fleet_cpu[1],
                                                                      _num(fleet_rss, "%.0f"), final["loop_lag_max"],
                                                                      final["loop_lags_over_1s"]))
    say()
    say("steady state, %.0f s (latency of 2xx answers; ms)" % args.steady_seconds)
    rows = [(p.label, len(p.latencies), p.errors, ms(percentile(p.latencies, 50)), ms(percentile(p.latencies, 99)),
             ms(max(p.latencies) if p.latencies else None), _codes(p.codes)) for p in probes]
    lat = final["renew_latencies"]
    rows.append(("lease renewal (fleet)", len(lat), "-", ms(percentile(lat, 50)), ms(percentile(lat, 99)),
                 ms(max(lat) if lat else None), ""))
    table(["request", "n", "errors", "p50", "p99", "max", "codes"], rows)
    for p in probes:
        if p.worst is not None and p.worst[0] > SLO:
            say("  slowest %s: %.0f ms, sent to r%d %.1f s into the steady state" % (
                p.label, p.worst[0] * 1000, p.worst[2] + 1, p.worst[1] - p.began))
    say()
    say("replica processes (CPU: cores averaged over the phase)")
    conv = dict(((r[0], r[1]), r) for r in res.rows("t0", "converged"))
    rows = []
    for r in res.rows("converged", "end"):
        c = conv.get((r[0], r[1]))
        rows.append((r[0], r[1], r[2], "%.0f" % r[3], "%.0f" % r[4], "%.2f" % c[6] if c else "-", "%.2f" % r[6]))
    table(["replica", "pid", "process", "RSS MB", "peak MB", "cores to converge", "cores steady"], rows)
    peaks = res.replica_peak_mb()
    say("  peak memory per replica (its processes alive at one sample; RSS counts shared pages in each, PSS "
        "splits them): %s" % ", ".join("%s RSS %.0f MB, PSS %.0f MB" % (r, rss, pss)
                                       for r, (rss, pss) in sorted(peaks.items())))
    say()
    say("store on disk and dumps")
    for ident in bc.ids():
        d = os.path.join(lc.dir, ident, "data")
        files = data_files(d)
        say("  %s: %.1f MB (%s)" % (ident, dir_size(d) / 1e6, ", ".join("%s %.1f MB" % (k, v / 1e6)
                                                                       for k, v in sorted(files.items()))))
    if dumps.dumps:
        times = [t for _, t, _ in dumps.dumps if t is not None]
        say("  dumps seen: %d; dump time (temp file first seen -> renamed, +-0.1 s) median %s s, max %s s; "
            "last dump %.1f MB" % (len(dumps.dumps), _num(percentile(times, 50), "%.2f"),
                                   _num(max(times) if times else None, "%.2f"), dumps.dumps[-1][2] / 1e6))
        failed = final.get("renew_failure_times", [])
        inside, covered = dumps.count_during(failed)
        writing, writing_s = dumps.count_during(failed, after=0.0)
        say("  two or more replicas writing a dump at once: %.1f s; failed renewals while a dump was written or "
            "in the 5 s after: %d of %d (those windows: %.0f s); while written alone: %d (%.0f s)"
            % (dumps.seconds_at_once(), inside, len(failed), covered, writing, writing_s))
    else:
        say("  no dump (snapshot) was written during the run")
    say()
    say("replica logs")
    for ident in bc.ids():
        say("  %s: %s" % (ident, ", ".join("%s: %d" % kv for kv in log_counts(lc, ident).items())))
    say()
    kill_ok = None
    if killed is not None:
        kill_ok = fleet_leader_kill.report(killed, say)
        say()
    say("targets (issue 13)")
    common.target_line("all Running", "%s s" % _num(converged, "%.1f") if converged else "not converged", "<= 60 s",
                       converged is not None and converged <= 60)
    common.target_line("leader changes", str(terms["elections"]), "0", terms["elections"] == 0)
    common.target_line("nodes falsely NotReady", str(rd["false_not_ready"]), "0", rd["false_not_ready"] == 0)
    for label, values in [(p.label, p.latencies) for p in probes] + [("lease renewal", lat)]:
        p99 = percentile(values, 99)
        common.target_line("p99 " + label, "%s ms" % _num(p99 and p99 * 1000, "%.0f"), "<= 1000 ms",
                           p99 is not None and p99 <= SLO)
    worst = max(pss for _, pss in peaks.values()) if peaks else None
    common.target_line("memory per replica (peak PSS)", "%s MB" % _num(worst, "%.0f"), "<= 500 MB",
                       worst is not None and worst <= 500)
    if kill_ok is not None:
        common.target_line("leader kill under the fleet", "passed" if kill_ok else "FAILED",
                           "nothing acked lost, converged", kill_ok)


def _num(value, fmt="%g"):
    return "n/a" if value is None else fmt % value


def _codes(codes):
    """'200:489 503:13 timeout/error:6' (None: no answer within 10 s, or the connection failed)."""
    return " ".join("%s:%d" % ("timeout/error" if k is None else k, v)
                    for k, v in sorted(codes.items(), key=lambda kv: str(kv[0])))


if __name__ == "__main__":
    main()
