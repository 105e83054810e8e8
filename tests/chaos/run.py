"""Chaos run: a real Shepherd HA cluster under concurrent clients while replicas are
killed, paused and cut off; the recorded history is then checked (tests/chaos/checker.py)
together with the cluster invariants at quiescence, and a one-page report is written.

  python3 -m tests.chaos.run --leader-kills 100 --replicas 5 --report out.md
  python3 -m tests.chaos.run --faults kill-leader,pause,cut,full-restart --leader-kills 10

Faults (--faults, comma-separated, default all): kill-leader (--leader-kills of them),
kill-random, pause, cut, full-restart (--fault-count of each). They run one after the
other in a seeded random order, --interval s apart; each heals before the next. The
workload runs for at least --duration s. As root the replicas and agents each get a
network namespace (a cut needs that); otherwise they run on loopback and a cut fails.
With --target netns|vagrant the run goes against the failure drills' hosts instead
(vagrant/drills/README.md: network namespaces, or the VMs of `make vagrant-up`), whose
own workers are the agents; a kill is then a power-off.
Exit status 0 when every check passed, 1 when one failed, 2 when the run could not be set up.
"""
import argparse
import json
import os
import signal
import sys
import time

from shepherd_ha.client import Client

from . import apps, credentials, faults, figures, quiescence, report
from .cluster import ChaosCluster, ChaosSetupError, have_root
from .probes import ControllerProbe, GapProbe
from .recorder import Recorder
from .target_cluster import TargetCluster, load_target
from .workload import Workload


def log(message=""):
    print("[chaos %s] %s" % (time.strftime("%H:%M:%S"), message) if message else "", flush=True)


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m tests.chaos.run", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replicas", type=int, default=3, help="replicas (3 or 5; default 3)")
    p.add_argument("--leader-kills", type=int, default=10, help="leader SIGKILLs (default 10)")
    p.add_argument("--faults", default=",".join(faults.KINDS),
                   help="fault kinds, comma-separated (default: %s)" % ",".join(faults.KINDS))
    p.add_argument("--fault-count", type=int, default=1, help="faults of each kind other than kill-leader (default 1)")
    p.add_argument("--interval", type=float, default=1.0, help="seconds between faults (default 1)")
    p.add_argument("--duration", type=float, default=0.0, help="run the workload at least this long (s)")
    p.add_argument("--clients", type=int, default=4, help="client processes (default 4)")
    p.add_argument("--keys", type=int, default=8, help="registers k00.. (default 8)")
    p.add_argument("--agents", type=int, default=2, help="hollow node agents (default 2)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock, printed)")
    p.add_argument("--gap-rate", type=float, default=50.0, help="gap probe writes/s (default 50)")
    p.add_argument("--etcd-kills", type=int, default=0,
                   help="after the run, also measure the write gap over this many leader kills of Shepherd HA and "
                   "of a 3-member etcd side by side (bench/bench_failover_vs_etcd.py; needs scripts/setup-etcd.sh)")
    p.add_argument("--no-netns", action="store_true", help="run on loopback even as root (no cut faults)")
    p.add_argument("--target", choices=("netns", "vagrant"), default=None,
                   help="run against the drills' hosts (vagrant/drills/target.py) instead of a cluster of its own; "
                   "--replicas, --agents and --no-netns are then the target's")
    p.add_argument("--out", default=None, help="directory for the history (default: a new temp dir)")
    p.add_argument("--report", default=None, help="write the markdown report here")
    p.add_argument("--keep", action="store_true", help="keep the cluster directory")
    args = p.parse_args(argv)
    args.fault_kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    bad = [k for k in args.fault_kinds if k not in faults.KINDS]
    if bad:
        p.error("unknown fault kind(s) %s: use %s" % (", ".join(bad), ",".join(faults.KINDS)))
    if args.replicas < 3:
        p.error("--replicas %d: chaos needs at least 3 (a majority must survive one fault)" % args.replicas)
    if args.clients < 1 or args.keys < 1:
        p.error("--clients and --keys must be at least 1")
    if args.seed is None:
        args.seed = int(time.time()) % 100000
    return args


def validate(args):
    """Refuse what cannot be run as asked, before starting anything."""
    if args.target == "netns" and not have_root():
        raise ChaosSetupError("the netns target puts every host in a network namespace, which needs root")
    if args.target:
        return
    if "cut" in args.fault_kinds and (args.no_netns or not have_root()):
        raise ChaosSetupError("the cut fault needs each replica in its own network namespace, which needs root%s: "
                              "run as root, or leave cut out of --faults"
                              % (" and no --no-netns" if args.no_netns else ""))


def run_checker(history_path):
    """(passed, text) from tests/chaos/checker.py."""
    from .checker import check
    result = check(history_path)
    return bool(result.ok), result.render()


def judge(history_path, quiescence_record, fault_records, expect_faults=True):
    """Every check of a run: [(name, passed, detail)], and the checker's text."""
    checks = []
    try:
        passed, text = run_checker(history_path)
    except Exception as exc:  # noqa: BLE001 - a checker crash is a failed check, with the reason
        passed, text = False, "the checker raised %s: %s" % (type(exc).__name__, exc)
    checks.append(("history checker (durability, no duplicates, linearizable registers, no stale reads)",
                   passed, "" if passed else text.strip().splitlines()[0][:200] if text.strip() else ""))
    checks += quiescence.quiescence_checks(quiescence_record)
    if expect_faults:
        not_ready = [r for r in fault_records if not r.get("ready")]
        checks.append(("every fault healed and the cluster whole again", not not_ready,
                       "; ".join("%s: %s" % (r["kind"], r.get("error", "not ready")) for r in not_ready)))
        kills = [r for r in fault_records if r["kind"] == "kill-leader"]
        moved = [r for r in kills if r.get("killed") and r.get("term_after") and r.get("term_before")
                 and r["term_after"] > r["term_before"]]
        checks.append(("leader kills happened (killed, term grew)", len(moved) == len(kills),
                       "%d of %d" % (len(moved), len(kills))))
        displaced = [r for r in fault_records if r["kind"] in ("pause", "cut")]
        # A pause fault may pause several leaders in turn (faults._pause): each must have been replaced.
        elsewhere = [r for r in displaced if all(
            during and during != victim for victim, during in zip(r.get("victims", [r.get("victim")]),
                                                                 r.get("leaders_during", [r.get("leader_during")])))]
        checks.append(("paused or cut-off leaders were replaced while out", len(elsewhere) == len(displaced),
                       "%d of %d" % (len(elsewhere), len(displaced))))
        skipped = [r for r in fault_records if r.get("skipped")]
        checks.append(("no fault skipped", not skipped, "; ".join("%s: %s" % (r["kind"], r["skipped"])
                                                                 for r in skipped)))
    return checks, text


def open_cluster(args, out):
    """The cluster under test, not entered yet: the drills' target, or one of its own."""
    if args.target:
        return TargetCluster(load_target(args.target), say=log)
    return ChaosCluster(args.replicas, netns=not args.no_netns and have_root(), keep=args.keep, say=log,
                        logs_to=os.path.join(out, "logs"))


def run(args):
    """Run the chaos scenario; returns the result dict (also written as report/JSON)."""
    validate(args)
    out = args.out or __import__("tempfile").mkdtemp(prefix="shepherd-chaos-out-")
    os.makedirs(out, exist_ok=True)
    history_path = os.path.join(out, "history.jsonl")
    plan = faults.schedule(args.leader_kills, args.fault_kinds, args.fault_count, args.seed)
    log("seed %d; %d replicas; %d clients on %d keys; faults: %s" % (
        args.seed, args.replicas, args.clients, args.keys,
        ", ".join("%s x%d" % (k, plan.count(k)) for k in args.fault_kinds) or "none"))
    log("history: %s" % history_path)
    with open_cluster(args, out) as cluster:
        urls = cluster.urls()
        replicas = len(urls)          # the target's, with --target (read here: the cluster is gone after)
        admin = Client(list(urls.values()), timeout=2.5, retry_deadline=30.0, user_agent="shepherd-chaos/admin",
                       ca_file=cluster.ca_file, token=credentials.token())
        apps.setup(admin)
        ctl_probe = ControllerProbe(cluster, admin, say=log)
        ctl_probe.setup()
        cluster.add_hollow_agents(args.agents)
        log("namespaces, deployments and %s set up" % ("the target's workers" if args.target else
                                                        "%d hollow agents" % args.agents))
        recorder = Recorder(history_path)
        workload = Workload(urls, recorder, clients=args.clients, keys=args.keys, seed=args.seed,
                            ca_file=cluster.ca_file)
        gap_probe = GapProbe(list(urls.values()), rate=args.gap_rate, ca_file=cluster.ca_file)
        scaler = apps.Scaler(admin, seed=args.seed)
        nemesis = faults.Nemesis(cluster, gap_probe, ctl_probe, say=log, seed=args.seed)
        t0 = time.monotonic()
        workload.start()
        gap_probe.start()
        scaler.start()
        errors = []
        try:
            time.sleep(2.0)
            for n, kind in enumerate(plan, 1):
                rec = nemesis.inject(kind)
                log("fault %d/%d %s: %s" % (n, len(plan), kind, describe_fault(rec)))
                if not rec.get("ready"):
                    log("the cluster did not become whole after fault %d: no more faults (the run fails)" % n)
                    break
                time.sleep(args.interval)
            left = args.duration - (time.monotonic() - t0)
            if left > 0:
                log("faults done; workload continues %.0f s more (--duration)" % left)
                time.sleep(left)
        finally:
            scaler.stop.set()
            gap_probe.stop.set()
            errors += workload.finish()
            duration = time.monotonic() - t0
            scaler.join(10)
            gap_probe.join(5)
        log("workload stopped after %.0f s: %s" % (duration, ", ".join(
            "%s %d" % kv for kv in sorted(recorder.outcome_totals().items()))))
        log("waiting for quiescence")
        try:
            q = quiescence.quiesce(cluster, admin, say=log)
            # A pause that caught the leader's controllers with work makes them write with a
            # stale epoch when they resume deposed: then the FSM must show refusals (check 6).
            q["fencing_exercised"] = any(r.get("kind") == "pause" and r.get("controller_burst") and r.get("paused")
                                         for r in nemesis.records)
            finals = quiescence.final_values(admin, workload.keys)
            for key, value in sorted(finals.items()):
                recorder.line({"final": True, "key": key, "value": value})
            recorder.line({"final_generated": True, "op_ids": quiescence.generated_counts(admin)})
            recorder.line({"quiescence": {k: v for k, v in q.items() if k != "pods_on_missing_nodes_sample"}})
        except Exception as exc:  # noqa: BLE001 - the run fails with the reason, and keeps the evidence
            log("the cluster did not quiesce: %s" % exc)
            for ident, line in sorted(cluster.brief_states().items()):
                log("  %s: %s" % (ident, line))
            q = {"error": str(exc)[:300]}
        finally:
            recorder.close()
            final_term = cluster.max_term()
            admin.close()
    checks, checker_text = judge(history_path, q, nemesis.records)
    checks.append(("every planned fault injected", len(nemesis.records) == len(plan),
                   "%d of %d" % (len(nemesis.records), len(plan))))
    if errors:
        checks.append(("client processes ran to the end", False, "; ".join(errors)))
    result = {"passed": all(c[1] for c in checks), "checks": checks, "checker_report": checker_text,
              "faults": nemesis.records, "quiescence": q, "final_term": final_term,
              "figures": figures.compute(nemesis.records, recorder.counts, duration),
              "history": history_path, "replicas": replicas, "netns": cluster.netns,
              "target": args.target,
              "clients": args.clients, "keys": args.keys, "seed": args.seed, "machine": report.machine(),
              "revision": report.revision(),
              "command": "python3 -m tests.chaos.run " + " ".join(sys.argv[1:]) if args.report else "tests.chaos"}
    if args.etcd_kills:
        result["etcd"] = etcd_comparison(args.etcd_kills)
    with open(os.path.join(out, "result.json"), "w") as fh:
        json.dump(result, fh, indent=1, default=str)
    if args.report:
        report.write(result, args.report)
    return result


def etcd_comparison(kills):
    """One line: the write gap of Shepherd HA and of etcd over the same client loop
    (bench/bench_failover_vs_etcd.compare, its own fresh clusters), with the ratio."""
    bench = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    log("etcd comparison: %d leader kills on a fresh Shepherd HA cluster and on a 3-member etcd" % kills)
    try:
        import bench_failover_vs_etcd as vs
        r = vs.compare(kills=kills, progress=log)
    except Exception as exc:  # noqa: BLE001 - the report says why the comparison is missing
        return "not measured: %s: %s" % (type(exc).__name__, exc)
    sh, et = r["systems"][vs.SHEPHERD]["summary"], r["systems"][vs.ETCD]["summary"]

    def pair(s):
        return "median %s, max %s over %d/%d kills" % (figures.fmt(s["median"]), figures.fmt(s["max"]),
                                                       len(s["gaps"]), s["kills_asked"])
    ratio = r["ratio"]
    return ("write gap after a leader SIGKILL, same client loop (%s): Shepherd HA %s; etcd %s; ratio "
            "Shepherd/etcd median %s, max %s" % (
                r["machine"].get("etcd", "etcd"), pair(sh), pair(et),
                "%.2f" % ratio["median"] if ratio["median"] else "-", "%.2f" % ratio["max"] if ratio["max"] else "-"))


def describe_fault(rec):
    parts = []
    for key in ("victim", "victims", "leader_during", "victim_role_during"):
        if rec.get(key) is not None:
            parts.append("%s %s" % (key.replace("_", " "), rec[key]))
    if rec.get("gap") is not None:
        parts.append("write gap %.3f s" % rec["gap"])
    ctl = rec.get("controllers") or {}
    if ctl.get("first_write") is not None:
        parts.append("first controller write %.3f s" % ctl["first_write"])
    parts.append("term %s -> %s" % (rec.get("term_before"), rec.get("term_after")))
    parts.append("ready" if rec.get("ready") else "NOT READY: %s" % rec.get("error"))
    if rec.get("skipped"):
        parts.append("SKIPPED: %s" % rec["skipped"])
    return ", ".join(parts)


def print_summary(result):
    f = result["figures"]
    g = f["write_gap"]
    log()
    log("checks:")
    for name, passed, detail in result["checks"]:
        log("  %-6s %s%s" % ("ok" if passed else "FAILED", name, (" (%s)" % detail) if detail else ""))
    if not result["passed"] and result.get("checker_report"):
        print(result["checker_report"])
    log("figures:")
    log("  write gap after leader SIGKILL: median %s, max %s over %d kills (target median <= %.1f s, max <= %.1f s)"
        % (figures.fmt(g["median"]), figures.fmt(g["max"]), g["n"], g["target_median"], g["target_max"]))
    c = f["kill_to_first_controller_write"]
    log("  leader SIGKILL -> first write of the new leader's controllers: median %s, max %s (n=%d)"
        % (figures.fmt(c["median"]), figures.fmt(c["max"]), c["n"]))
    if result.get("etcd"):
        log("  etcd comparison: " + result["etcd"])
    log("  %d operations, %.1f ops/s; %s" % (f["operations"], f["ops_per_second"] or 0,
                                           ", ".join("%s %d" % kv for kv in sorted(f["outcomes"].items()))))
    log("RESULT: %s" % ("PASS" if result["passed"] else "FAIL"))


def exit_on_sigterm():
    """SIGTERM -> SystemExit, so the cluster we started is stopped and its namespaces removed."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)


def main(argv=None):
    args = parse_args(argv)
    exit_on_sigterm()
    try:
        result = run(args)
    except ChaosSetupError as exc:
        print("chaos: %s" % exc, file=sys.stderr)
        return 2
    print_summary(result)
    if args.report:
        log("report written to %s" % args.report)
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
