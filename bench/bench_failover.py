#!/usr/bin/env python3
"""Leader failover: the write gap a client sees when the leader is SIGKILLed, and
spurious elections in an idle cluster.

A fresh 3-replica LocalCluster in a temp dir. One writer thread creates pods
through the HTTP API (http.client, one keep-alive connection, client timeout
--client-timeout, default 0.5 s), paced at --rate writes/s; on a connection
error, a timeout or a 503 it moves to the next replica and retries the same
write with the same Idempotency-Key. The drill, --kills times: find the leader
(GET /shepherd/v1/replica on every replica), SIGKILL it (LocalCluster.kill),
and measure the write gap = time of the first write acknowledged after the kill
minus time of the last write acknowledged before it. Then restart the killed
replica and wait until every replica is ready (and a little longer) before the
next kill. At the end every replica's store digest is compared and every
acknowledged pod is looked up in a linearizable list.

--idle-minutes M then stops the writer and leaves the cluster idle for M minutes,
comparing Raft terms before and after (and polling them every 10 s): every term
increase is an election nobody needed.
"""
import argparse
import bisect
import collections
import json
import os
import random
import socket
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import percentile, say  # noqa: E402

TARGET_MEDIAN = 0.5
TARGET_MAX = 1.5


class Writer(common.AckLog, threading.Thread):
    """Creates pods one at a time, failing over between replicas; records ack times."""

    def __init__(self, urls, timeout, rate, size):
        super().__init__(name="writer", daemon=True)
        self.urls = list(urls)
        self.timeout = timeout
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.template = common.pod_template(size, name_len=22)
        self.prefix = "f" + uuid.uuid4().hex[:6]
        self.acks = []                  # monotonic time of each acknowledged write, in order
        self.acked_names = []
        self.outcomes = collections.Counter()
        self.stop_event = threading.Event()
        self.current = random.randrange(len(self.urls))

    def run(self):
        conns = {}
        headers = {"Content-Type": "application/json"}
        n = 0
        failures_in_a_row = 0
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            name = "%s-%014d" % (self.prefix, n)
            headers["Idempotency-Key"] = name
            body = common.pod_body(self.template, name)
            while not self.stop_event.is_set():          # the same write until acknowledged
                url = self.urls[self.current]
                conn = conns.get(url) or conns.setdefault(url, common.KeepAlive(url, self.timeout))
                try:
                    status, data = conn.post(common.PODS_PATH, body, headers)
                    kind = str(status)
                except socket.timeout:
                    kind = "timeout"
                except ConnectionRefusedError:
                    kind = "refused"
                except (OSError, common.http.client.HTTPException):
                    kind = "conn-error"
                now = time.monotonic()
                if kind in ("201", "200"):
                    self.acks.append(now)
                    self.acked_names.append(name)
                    self.outcomes["ack"] += 1
                    failures_in_a_row = 0
                    break
                self.outcomes[kind] += 1
                if kind == "409":
                    # AlreadyExists for our own retried write: the first copy applied and
                    # its key is no longer remembered. Count it, do not count it as an ack.
                    break
                failures_in_a_row += 1
                self.current = (self.current + 1) % len(self.urls)
                if failures_in_a_row % len(self.urls) == 0:
                    self.stop_event.wait(0.02)       # every replica failed once: breathe
            n += 1
            if self.interval:
                next_at = max(next_at + self.interval, time.monotonic() - 1.0)
                delay = next_at - time.monotonic()
                if delay > 0:
                    self.stop_event.wait(delay)
        for conn in conns.values():
            conn.close()


def states(bc, digest=False):
    """{id: replica status or None}."""
    out = {}
    for member in bc.cluster.spec()["replicas"]:
        path = "/shepherd/v1/replica" + ("?digest=1" if digest else "")
        out[member["id"]] = common.get_json(member["api"], path, timeout=5.0 if digest else 0.5)
    return out


def leader_of(st):
    leaders = [s for s in st.values() if s and s["role"] == "leader"]
    return max(leaders, key=lambda s: s["term"]) if leaders else None


def wait_acks_flowing(writer, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if writer.acks and time.monotonic() - writer.acks[-1] < 0.2:
            return True
        time.sleep(0.05)
    return False


def max_interval(acks, since, until):
    """Longest time without an ack between `since` (an ack time) and `until`."""
    i = bisect.bisect_left(acks, since)
    j = bisect.bisect_right(acks, until)
    window = acks[i:j]
    if not window:
        return None
    worst = max((b - a for a, b in zip(window, window[1:])), default=0.0)
    return max(worst, until - window[-1]) if j == len(acks) else worst


def drill(bc, writer, kills, settle, max_gap_wait, observe):
    rows = []
    for k in range(1, kills + 1):
        if not wait_acks_flowing(writer):
            say("  kill %d: the writer has not been acknowledged for 30 s; stopping the drill" % k)
            break
        st = states(bc)
        lead = leader_of(st)
        if lead is None:
            say("  kill %d: no leader found; stopping the drill" % k)
            break
        victim, term = lead["id"], lead["term"]
        before = dict(writer.outcomes)
        t_kill = time.monotonic()
        bc.cluster.kill(victim)
        deadline = t_kill + max_gap_wait
        while writer.first_ack_after(t_kill) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        first, last = writer.first_ack_after(t_kill), writer.last_ack_before(t_kill)
        gap = first - last if first is not None and last is not None else None
        # Keep writing a little: the first ack after the kill may be a write the old
        # leader had already committed (its answer was on the wire), so the longest
        # stretch without acks around the kill is the outage the client really saw.
        time.sleep(observe)
        outage = max_interval(writer.acks, last, time.monotonic()) if last is not None else None
        failed = {kk: v - before.get(kk, 0) for kk, v in writer.outcomes.items()
                  if kk != "ack" and v != before.get(kk, 0)}
        after = leader_of(states(bc))
        # Restart the victim; watch for disruption while it rejoins.
        t_restart = time.monotonic()
        last_before_restart = writer.last_ack_before(t_restart)
        bc.cluster.start(victim)
        bc.cluster.wait_ready(90, ids=bc.ids())
        time.sleep(settle)
        rejoin_gap = max_interval(writer.acks, last_before_restart, time.monotonic()) if last_before_restart else None
        settled = leader_of(states(bc))
        row = {"kill": k, "victim": victim, "term": term, "gap": gap, "outage": outage,
               "new_leader": after["id"] if after else None, "new_term": after["term"] if after else None,
               "failed": failed, "kill_to_ack": first - t_kill if first is not None else None,
               "rejoin_gap": rejoin_gap, "rejoin_ready": time.monotonic() - settle - t_restart,
               "term_after_rejoin": settled["term"] if settled else None}
        rows.append(row)
        say("  kill %2d/%d: %s (leader, term %d) -> write gap %s s, longest ack-less stretch %s s, new leader %s "
            "term %s, failed attempts %s; restarted %s ready in %.1f s, longest ack-less stretch while it rejoined "
            "%s s, term then %s"
            % (k, kills, victim, term, "%.3f" % gap if gap is not None else "none within %.0f s" % max_gap_wait,
               "%.3f" % outage if outage is not None else "-", row["new_leader"], row["new_term"],
               ", ".join("%s %d" % kv for kv in sorted(failed.items())) or "none", victim, row["rejoin_ready"],
               "%.3f" % rejoin_gap if rejoin_gap is not None else "-", row["term_after_rejoin"]))
    return rows


def check_consistency(bc, writer):
    say("consistency after the drill:")
    st = states(bc, digest=True)
    for ident, s in sorted(st.items()):
        say("  %s: %s term %s, revision %s, objects %s, digest %s" % (
            ident, s["role"] if s else "down", s and s["term"], s and s["revision"], s and s["objects"],
            (s.get("digest") or "n/a")[:16] if s else "-"))
    digests = {(s["revision"], s.get("digest")) for s in st.values() if s}
    same = len(digests) == 1
    say("  store digests %s" % ("identical on every replica" if same else "DIFFER (same revision?) %s" % digests))
    lead = leader_of(st)
    url = bc.cluster.replica(lead["id"])["api"] if lead else bc.urls()[0]
    listing = None
    for _ in range(3):
        listing = common.get_json(url, common.PODS_PATH, timeout=60)
        if listing:
            break
        time.sleep(1)
    missing = None
    if listing:
        present = {item["metadata"]["name"] for item in listing["items"]}
        missing = [n for n in writer.acked_names if n not in present]
        say("  %d acknowledged creates, %d missing from a linearizable list of %d pods%s"
            % (len(writer.acked_names), len(missing), len(present),
               (": " + ", ".join(missing[:5])) if missing else ""))
    else:
        say("  could not list pods to check acknowledged writes")
    return same, missing


def idle_check(bc, minutes, poll=10.0):
    say("idle check: no client traffic for %.1f minute(s); terms polled every %.0f s" % (minutes, poll))
    bc.cluster.wait_ready(60, ids=bc.ids())
    before = states(bc)
    say("  terms before: %s" % ", ".join("%s=%s(%s)" % (i, s and s["term"], s and s["role"])
                                          for i, s in sorted(before.items())))
    pids = bc.pids()
    meter = common.CpuMeter(pids).start()
    end = time.monotonic() + minutes * 60
    changes = []
    last_terms = {i: s and s["term"] for i, s in before.items()}
    last_print = time.monotonic()
    while time.monotonic() < end:
        time.sleep(min(poll, max(0.0, end - time.monotonic())))
        st = states(bc)
        for i, s in st.items():
            t = s and s["term"]
            if t is not None and last_terms.get(i) is not None and t != last_terms[i]:
                changes.append((time.monotonic() - (end - minutes * 60), i, last_terms[i], t))
                say("  ... %.0f s: %s term %s -> %s (role %s)" % (changes[-1][0], i, last_terms[i], t, s["role"]))
            if t is not None:
                last_terms[i] = t
        if time.monotonic() - last_print >= 60 or time.monotonic() >= end:
            left = max(0.0, end - time.monotonic())
            lead = leader_of(st)
            progress_line = "idle %.1f of %.1f min; leader %s term %s; %d term change(s) so far" % (
                minutes - left / 60, minutes, lead and lead["id"], lead and lead["term"], len(changes))
            common.progress(progress_line)
            last_print = time.monotonic()
    cpu = meter.stop()
    after = states(bc)
    say("  terms after:  %s" % ", ".join("%s=%s(%s)" % (i, s and s["term"], s and s["role"])
                                          for i, s in sorted(after.items())))
    t0 = max((s["term"] for s in before.values() if s), default=0)
    t1 = max((s["term"] for s in after.values() if s), default=0)
    elections = t1 - t0
    rss = {i: common.rss_mb(p)[0] for i, p in pids.items()}
    say("  idle CPU per replica (%% of one core): %s; whole machine %.2f cores busy (%.2f not ours)"
        % (", ".join("%s %.1f%%" % (i, 100 * v) for i, v in sorted(cpu["per_process"].items())),
           cpu["machine_cores_busy"], cpu["others_cores_busy"]))
    say("  RSS after idle: %s" % ", ".join("%s %.1f MB" % (i, v) for i, v in sorted(rss.items()) if v))
    return elections, before, after, cpu


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--kills", type=int, default=20, help="leader SIGKILLs (default 20)")
    parser.add_argument("--idle-minutes", type=float, default=0.0,
                        help="then leave the cluster idle this long and count elections (default 0; docs use 10)")
    parser.add_argument("--rate", type=float, default=200.0,
                        help="writer pace in writes/s, 0 = as fast as it can (default 200: 5 ms resolution)")
    parser.add_argument("--client-timeout", type=float, default=0.5, help="writer socket timeout in s (default 0.5)")
    parser.add_argument("--size", type=int, default=1024, help="pod body bytes (default 1024)")
    parser.add_argument("--settle", type=float, default=2.0,
                        help="seconds to keep writing after the restarted replica is ready, before the next kill "
                        "(default 2)")
    parser.add_argument("--observe", type=float, default=1.0,
                        help="seconds to keep watching acks after the first one following a kill (default 1)")
    parser.add_argument("--max-gap", type=float, default=30.0, help="give up waiting for an ack after a kill after "
                        "this many s (default 30)")
    parser.add_argument("--keep", action="store_true", help="keep the temp cluster directory")
    args = parser.parse_args(argv)
    common.exit_on_sigterm()

    say("bench_failover: %d leader SIGKILL(s), writer at %s writes/s with a %.1f s client timeout%s"
        % (args.kills, "%.0f" % args.rate if args.rate else "max", args.client_timeout,
           "; then %.1f idle minute(s)" % args.idle_minutes if args.idle_minutes else ""))
    common.print_machine()
    common.print_background_load()
    rows, elections, same, missing = [], None, None, None
    with common.BenchCluster(keep=args.keep) as bc:
        if args.kills:
            writer = Writer(bc.urls(), args.client_timeout, args.rate, args.size)
            writer_started = time.monotonic()
            writer.start()
            try:
                rows = drill(bc, writer, args.kills, args.settle, args.max_gap, args.observe)
            finally:
                writer.stop_event.set()
                writer.join(5)
            took = time.monotonic() - writer_started
            say("writer outcomes: %s; %.0f acknowledged writes/s on average over %.0f s (the gap figures are "
                "only as fine as the time between two writes)" % (json.dumps(dict(writer.outcomes), sort_keys=True),
                                                                  writer.outcomes["ack"] / took, took))
            same, missing = check_consistency(bc, writer)
        if args.idle_minutes > 0:
            elections, _, _, _ = idle_check(bc, args.idle_minutes)

    say()
    if rows:
        gaps = [r["gap"] for r in rows if r["gap"] is not None]
        lost = len(rows) - len(gaps)
        say("summary: write gap per leader SIGKILL (s)")
        say("  gap = first ack after the kill - last ack before it; stretch = longest time without any ack from")
        say("  that last ack until %.1f s after the first one (>= gap); rejoin = longest ack-less time while the "
            "killed replica restarted and caught up" % args.observe)
        common.table(["kill", "killed", "term", "gap s", "stretch s", "new leader", "new term", "failed attempts",
                      "rejoin s", "term after rejoin"],
                     [[r["kill"], r["victim"], r["term"], "%.3f" % r["gap"] if r["gap"] is not None else "none",
                       "%.3f" % r["outage"] if r["outage"] is not None else "-",
                       r["new_leader"], r["new_term"],
                       ", ".join("%s %d" % kv for kv in sorted(r["failed"].items())) or "-",
                       "%.3f" % r["rejoin_gap"] if r["rejoin_gap"] is not None else "-",
                       r["term_after_rejoin"]] for r in rows])
        for label, key in (("gap", "gap"), ("stretch", "outage"), ("rejoin", "rejoin_gap")):
            vals = [r[key] for r in rows if r[key] is not None]
            if vals:
                say("  %-8s median %.3f s, p90 %.3f s, max %.3f s, min %.3f s over %d kills%s"
                    % (label, percentile(vals, 50), percentile(vals, 90), max(vals), min(vals), len(vals),
                       ", %d with none" % (len(rows) - len(vals)) if len(vals) < len(rows) else ""))
        extra = [r for r in rows if r["term_after_rejoin"] is not None and r["new_term"] is not None
                 and r["term_after_rejoin"] > r["new_term"]]
        say("  elections caused by a restarted replica rejoining: %d of %d restarts" % (len(extra), len(rows)))
    say()
    say("targets:")
    if rows:
        for label, key in (("write gap", "gap"), ("longest ack-less stretch", "outage")):
            vals = [r[key] for r in rows if r[key] is not None]
            med = percentile(vals, 50) if vals else None
            worst = max(vals) if vals and len(vals) == len(rows) else None
            common.target_line("median %s (%d kills)" % (label, len(rows)),
                               "%.3f s" % med if med is not None else "n/a", "<= 0.5 s",
                               med is not None and med <= TARGET_MEDIAN)
            common.target_line("max %s" % label, "%.3f s" % worst if worst is not None else "unbounded",
                               "<= 1.5 s", worst is not None and worst <= TARGET_MAX)
        if same is not None:
            say("  %-44s %s" % ("replica store digests after the drill", "identical" if same else "DIFFER"))
        if missing is not None:
            say("  %-44s %d" % ("acknowledged creates missing", len(missing)))
    if elections is not None:
        common.target_line("elections in %.1f idle minutes" % args.idle_minutes, str(elections), "0",
                           elections == 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
