#!/usr/bin/env python3
"""Write gap after a leader SIGKILL: Shepherd HA next to etcd, same client loop, same run.

Two clusters on 127.0.0.1, both up for the whole run: a 3-replica Shepherd HA
LocalCluster and a 3-member etcd cluster (Debian's etcd-server, data in a temp dir,
etcd's default 1000 ms election timeout / 100 ms heartbeat unless --etcd-election-ms).

One client loop for both (Writer below): one writer thread per system doing
sequential writes of about --size bytes, paced at --rate writes/s, each request with a
--client-timeout socket timeout on one keep-alive connection; on a connection error,
a timeout or a non-success status it moves round-robin to the next member and retries
the same write. Shepherd HA: POST a pod (with an Idempotency-Key) to the HTTP API;
etcd: POST /v3/kv/put (base64 key and value) to the v3 JSON gateway on each member's
client URL. Only one writer runs at a time; the other is paused.

The drill, --kills rounds; in each round each system in turn (the order alternates
between rounds so neither always goes first on a drifting machine): resume its
writer, find the leader (Shepherd: GET /shepherd/v1/replica; etcd: POST
/v3/maintenance/status), SIGKILL it by its recorded PID, wait for an acknowledged
write, keep writing --observe s, then restart the killed member and wait until it has
rejoined (Shepherd: every replica ready; etcd: every member healthy and applied up to
the leader's index), keep writing --settle s and pause the writer.

Write gap of a kill = the longest interval between two consecutive acknowledged
writes, among those that start between the last ack before the kill and --observe s
after the first ack after it (the first ack after the kill can be a write the old
leader committed just before, so the longest ack-less stretch is what the client
really saw). The figures are only
as fine as the pace (5 ms at 200 writes/s). Summary: median and max per system, and
their ratio (Shepherd HA / etcd: below 1 means Shepherd HA recovers faster).

At the end, every acknowledged write is looked up: Shepherd HA pods in a
linearizable list, etcd keys in a linearizable range read.

`compare(kills=..., progress=...)` runs all of it and returns a dict (for the chaos
harness); `--json` prints that dict on stdout (the human report then goes to stderr).
"""
import argparse
import bisect
import collections
import contextlib
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
from etcd_cluster import EtcdCluster, EtcdError, b64, etcd_version, post_json  # noqa: E402
import bench_failover  # noqa: E402  (replica states and the consistency check of the Shepherd drill)
from shepherd_ha.cli.local_cluster import LocalClusterError  # noqa: E402

SHEPHERD, ETCD = "shepherd", "etcd"
LABELS = {SHEPHERD: "Shepherd HA", ETCD: "etcd"}


# ---- what the writer sends to each system ----

class ShepherdWrites:
    """Pod creates through the HTTP API, retried with the same Idempotency-Key."""

    def __init__(self, size):
        self.template = common.pod_template(size, name_len=22)
        self.prefix = "g" + uuid.uuid4().hex[:6]

    def request(self, n):
        name = "%s-%014d" % (self.prefix, n)
        return name, common.PODS_PATH, common.pod_body(self.template, name), {
            "Content-Type": "application/json", "Idempotency-Key": name}

    @staticmethod
    def outcome(status, data):
        if status in (200, 201):
            return "ack"
        # 409 for our own retried create: the first copy applied and its key is no longer
        # remembered. Not counted as an ack (as in bench_failover); the writer moves on.
        return "done-409" if status == 409 else str(status)


class EtcdWrites:
    """Puts through etcd's v3 JSON gateway; a retried put writes the same key and value."""

    def __init__(self, size):
        self.prefix = "/bench/" + uuid.uuid4().hex[:6] + "/"
        self.value = b64(("v" * size).encode())

    def request(self, n):
        key = "%s%014d" % (self.prefix, n)
        body = json.dumps({"key": b64(key), "value": self.value}).encode()
        return key, "/v3/kv/put", body, {"Content-Type": "application/json"}

    @staticmethod
    def outcome(status, data):
        if status == 200 and b'"header"' in data:
            return "ack"
        return str(status)


# ---- the one client loop ----

class Writer(common.AckLog, threading.Thread):
    """Sequential writes with failover between members; records the time of every ack.
    pause()/resume() let two writers take turns without loading the machine together."""

    def __init__(self, system, urls, writes, timeout, rate):
        super().__init__(name="writer-" + system, daemon=True)
        self.urls = list(urls)
        self.writes = writes
        self.timeout = timeout
        self.interval = 1.0 / rate if rate > 0 else 0.0
        self.acks = []                  # monotonic time of each acknowledged write, in order
        self.acked = []                 # the names/keys acknowledged
        self.outcomes = collections.Counter()
        self.stop_event = threading.Event()
        self.running = threading.Event()
        self.current = random.randrange(len(self.urls))

    def pause(self):
        self.running.clear()

    def resume(self):
        self.running.set()

    def stop(self):
        self.stop_event.set()
        self.running.set()
        self.join(10)

    def run(self):
        conns = {}
        n = 0
        failures_in_a_row = 0
        next_at = time.monotonic()
        while not self.stop_event.is_set():
            if not self.running.is_set():
                self.running.wait()
                next_at = time.monotonic()
                continue
            name, path, body, headers = self.writes.request(n)
            while not self.stop_event.is_set():          # the same write until acknowledged
                url = self.urls[self.current]
                conn = conns.get(url) or conns.setdefault(url, common.KeepAlive(url, self.timeout))
                try:
                    status, data = conn.post(path, body, headers)
                    kind = self.writes.outcome(status, data)
                except socket.timeout:
                    kind = "timeout"
                except ConnectionRefusedError:
                    kind = "refused"
                except (OSError, common.http.client.HTTPException):
                    kind = "conn-error"
                now = time.monotonic()
                if kind == "ack":
                    self.acks.append(now)
                    self.acked.append(name)
                    self.outcomes["ack"] += 1
                    failures_in_a_row = 0
                    break
                self.outcomes[kind] += 1
                if kind.startswith("done-"):
                    break
                failures_in_a_row += 1
                self.current = (self.current + 1) % len(self.urls)
                if failures_in_a_row % len(self.urls) == 0:
                    self.stop_event.wait(0.02)       # every member failed once: breathe
            n += 1
            if self.interval:
                next_at = max(next_at + self.interval, time.monotonic() - 1.0)
                delay = next_at - time.monotonic()
                if delay > 0:
                    self.stop_event.wait(delay)
        for conn in conns.values():
            conn.close()

    def acks_flowing(self, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.acks and time.monotonic() - self.acks[-1] < 0.2:
                return True
            time.sleep(0.05)
        return False


def longest_interval(acks, since, until):
    """Longest time from an ack in [since, until] (since is an ack time) to the ack that
    follows it, which may come after `until`; None when an ack in the window has no
    successor yet (the stretch has not ended)."""
    i = bisect.bisect_left(acks, since)
    j = bisect.bisect_right(acks, until)
    if i >= j or j >= len(acks):
        return None
    return max(acks[n + 1] - acks[n] for n in range(i, j))


# ---- the two systems, as the drill sees them ----

def process_alive(pid):
    """True while `pid` exists and is not a zombie."""
    if not pid:
        return False
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def start_with_retries(start, running_pid, deadline, attempts=5):
    """start(); if the process is gone half a second later (a port not free yet), again."""
    for _ in range(attempts):
        start()
        time.sleep(0.5)
        if running_pid() or time.monotonic() >= deadline:
            return
        time.sleep(1.0)


class ShepherdSystem:
    name = SHEPHERD

    def __init__(self, bc):
        self.bc = bc
        self.killed_pid = None

    def urls(self):
        return self.bc.urls()

    def leader(self):
        """(id, term) of the leader, or None."""
        lead = bench_failover.leader_of(bench_failover.states(self.bc))
        return (lead["id"], lead["term"]) if lead else None

    def kill(self, ident):
        self.killed_pid = self.bc.cluster.pid(ident)
        return self.bc.cluster.kill(ident)

    def restart(self, ident, timeout):
        deadline = time.monotonic() + timeout
        # A SIGKILLed replica in the middle of an fsync on a loaded disk can hold its ports
        # for seconds: start again only once it is gone, and again if the start dies at once.
        while process_alive(self.killed_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        start_with_retries(lambda: self.bc.cluster.start(ident), lambda: self.bc.cluster.pid(ident), deadline)
        self.bc.cluster.wait_ready(max(1.0, deadline - time.monotonic()), ids=self.bc.ids())

    def check(self, writer):
        """(store digests identical on every replica, [acknowledged pods missing])."""
        writer.acked_names = writer.acked          # the names check_consistency looks up
        return bench_failover.check_consistency(self.bc, writer)


class EtcdSystem:
    name = ETCD

    def __init__(self, ec):
        self.ec = ec

    def urls(self):
        return self.ec.urls()

    def leader(self):
        statuses = self.ec.statuses()
        lead = self.ec.leader(statuses)
        return (lead, int(statuses[lead]["raftTerm"])) if lead else None

    def kill(self, name):
        return self.ec.kill(name)

    def restart(self, name, timeout):
        deadline = time.monotonic() + timeout
        start_with_retries(lambda: self.ec.start(name), lambda: self.ec.pid(name), deadline)
        self.ec.wait_ready(max(1.0, deadline - time.monotonic()))

    def check(self, writer):
        """(every member at the same revision and applied index, [acknowledged keys missing])."""
        say("etcd consistency after the drill:")
        statuses = self.ec.statuses(timeout=5.0)
        for name, st in sorted(statuses.items()):
            say("  %s: %s, revision %s, raft term %s, applied index %s" % (
                name, "down" if not st else ("leader" if st["leader"] == st["header"]["member_id"] else "follower"),
                st and st["header"]["revision"], st and st["raftTerm"], st and st["raftAppliedIndex"]))
        same = len({(st["header"]["revision"], st["raftAppliedIndex"]) for st in statuses.values() if st}) == 1 \
            and all(statuses.values())
        prefix = writer.writes.prefix
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        reply = None
        for url in self.ec.urls():
            reply = post_json(url, "/v3/kv/range", {"key": b64(prefix), "range_end": b64(end), "keys_only": True},
                              timeout=60)
            if reply is not None:
                break
        if reply is None:
            say("  could not read the acknowledged keys back")
            return same, None
        import base64
        present = {base64.b64decode(kv["key"]).decode() for kv in reply.get("kvs", [])}
        missing = [k for k in writer.acked if k not in present]
        say("  members %s; %d acknowledged puts, %d missing from a linearizable range read of %d keys%s"
            % ("agree" if same else "DIFFER", len(writer.acked), len(missing), len(present),
               (": " + ", ".join(missing[:5])) if missing else ""))
        return same, missing


# ---- the drill ----

def one_kill(system, writer, k, kills, observe, settle, max_gap, rejoin_timeout, report):
    """SIGKILL the leader once with the writer running; a row of figures, or None when the
    drill cannot go on (no acks, no leader)."""
    writer.resume()
    try:
        if not writer.acks_flowing():
            report("%s kill %d: no write acknowledged for 30 s; stopping its drill" % (LABELS[system.name], k))
            return None
        lead = system.leader()
        if lead is None:
            report("%s kill %d: no leader found; stopping its drill" % (LABELS[system.name], k))
            return None
        victim, term = lead
        before = dict(writer.outcomes)
        t_kill = time.monotonic()
        system.kill(victim)
        deadline = t_kill + max_gap
        while writer.first_ack_after(t_kill) is None and time.monotonic() < deadline:
            time.sleep(0.01)
        first, last = writer.first_ack_after(t_kill), writer.last_ack_before(t_kill)
        gap = None
        if first is not None and last is not None:
            # The first ack after the kill may be a write the old leader committed just before
            # it: watch `observe` s more, and if acks stopped in that time, wait for them to resume.
            time.sleep(max(0.0, first + observe - time.monotonic()))
            while writer.acks[-1] <= first + observe and time.monotonic() < deadline:
                time.sleep(0.01)
            gap = longest_interval(writer.acks, last, first + observe)
        failed = {kk: v - before.get(kk, 0) for kk, v in writer.outcomes.items()
                  if kk != "ack" and v != before.get(kk, 0)}
        after = wait_leader(system)
        t_restart = time.monotonic()
        try:
            system.restart(victim, rejoin_timeout)
            rejoined = time.monotonic() - t_restart
        except (EtcdError, LocalClusterError) as exc:
            report("%s kill %d: %s did not rejoin: %s" % (LABELS[system.name], k, victim, exc))
            rejoined = None
        time.sleep(settle)
        settled = wait_leader(system)
        row = {"kill": k, "victim": victim, "term": term, "gap": gap,
               "first_ack_gap": first - last if first is not None and last is not None else None,
               "kill_to_ack": first - t_kill if first is not None else None,
               "new_leader": after and after[0], "new_term": after and after[1],
               "failed": failed, "rejoin_s": rejoined,
               "term_after_rejoin": settled and settled[1],
               "acks_after_kill": writer.acks_between(t_kill, time.monotonic())}
    finally:
        writer.pause()
    report("%-11s kill %2d/%d: %s (leader, term %s) -> write gap %s s (kill to first ack %s s), new leader %s "
           "term %s, failed attempts %s; rejoined in %s s; %d acks since the kill"
           % (LABELS[system.name], k, kills, victim, term, fmt(row["gap"], "none within %.0f s" % max_gap),
              fmt(row["kill_to_ack"]), row["new_leader"], row["new_term"],
              ", ".join("%s %d" % kv for kv in sorted(failed.items())) or "none",
              "%.1f" % rejoined if rejoined is not None else "NOT",
              row["acks_after_kill"]))
    return row


def wait_leader(system, timeout=5.0):
    """(id, term) of the leader, polling a few seconds (a status call can time out on a busy machine)."""
    deadline = time.monotonic() + timeout
    while True:
        lead = system.leader()
        if lead or time.monotonic() >= deadline:
            return lead
        time.sleep(0.1)


def fmt(value, none="-"):
    return "%.3f" % value if value is not None else none


def summarize(rows, kills):
    gaps = [r["gap"] for r in rows if r["gap"] is not None]
    complete = len(gaps) == kills
    return {"kills_done": len(rows), "kills_asked": kills, "gaps": gaps,
            "median": percentile(gaps, 50), "p90": percentile(gaps, 90),
            "max": max(gaps) if complete else None,       # unbounded if any kill had no gap
            "min": min(gaps) if gaps else None,
            "all_recovered": complete and all(r["acks_after_kill"] > 0 and r["rejoin_s"] is not None for r in rows)}


def method_text(args):
    return ("3 Shepherd HA replicas (LocalCluster) and 3 %s members, all on 127.0.0.1 of this machine, both "
            "clusters up for the whole run; one writer thread per system, only one writing at a time: sequential "
            "writes of ~%d bytes (Shepherd: pod create via the HTTP API with an Idempotency-Key; etcd: PUT via the "
            "v3 JSON gateway), paced at %s writes/s, %.2f s socket timeout per request, round-robin failover to the "
            "next member on a timeout, connection error or error status. Per round, each system in turn (order "
            "alternating): SIGKILL its leader, write gap = longest interval between consecutive acknowledged writes, "
            "among those starting from the last ack before the kill to %.1f s after the first ack after it; then "
            "restart the killed "
            "member, wait until it has rejoined, write %.1f s more. Election timeouts: Shepherd HA 0.3-0.6 s "
            "(its defaults, heartbeat 0.05 s) plus an early election when a follower sees its connection to the "
            "leader drop; etcd %s."
            % (args["etcd_version"], args["size"], "%.0f" % args["rate"] if args["rate"] else "max",
               args["client_timeout"], args["observe"], args["settle"],
               "%d ms (heartbeat %d ms)" % (args["etcd_election_ms"], args["etcd_heartbeat_ms"])
               if args["etcd_election_ms"] else "1000 ms (etcd's default; heartbeat 100 ms)"))


def compare(kills=10, etcd_election_ms=None, rate=200.0, client_timeout=0.5, size=1024, observe=1.0, settle=2.0,
            max_gap=30.0, rejoin_timeout=90.0, progress=None):
    """Run the drill on both systems; returns {"machine", "method", "settings", "systems": {shepherd, etcd:
    {"rows", "summary", "outcomes", "consistent", "missing"}}, "ratio": {"median", "max"}}.
    Raises EtcdError when etcd is not installed (run scripts/setup-etcd.sh)."""
    from etcd_cluster import heartbeat_for
    report = progress or common.progress
    if kills < 1:
        raise ValueError("kills must be at least 1, not %d" % kills)
    settings = {"kills": kills, "etcd_election_ms": etcd_election_ms,
                "etcd_heartbeat_ms": heartbeat_for(etcd_election_ms) if etcd_election_ms else None,
                "rate": rate, "client_timeout": client_timeout, "size": size, "observe": observe,
                "settle": settle, "max_gap": max_gap, "etcd_version": etcd_version()}
    result = {"machine": dict(common.machine()) | {"etcd": settings["etcd_version"] + ", Debian etcd-server"},
              "method": method_text(settings), "settings": settings, "systems": {}}
    with EtcdCluster(3, election_ms=etcd_election_ms, progress=report) as ec, \
            common.BenchCluster() as bc:
        systems = {ETCD: EtcdSystem(ec), SHEPHERD: ShepherdSystem(bc)}
        writers = {ETCD: Writer(ETCD, ec.urls(), EtcdWrites(size), client_timeout, rate),
                   SHEPHERD: Writer(SHEPHERD, bc.urls(), ShepherdWrites(size), client_timeout, rate)}
        rows = {ETCD: [], SHEPHERD: []}
        stopped = set()
        for w in writers.values():
            w.start()
        try:
            for k in range(1, kills + 1):
                order = [ETCD, SHEPHERD] if k % 2 else [SHEPHERD, ETCD]
                for name in order:
                    if name in stopped:
                        continue
                    row = one_kill(systems[name], writers[name], k, kills, observe, settle, max_gap,
                                   rejoin_timeout, report)
                    if row is None:
                        stopped.add(name)
                    else:
                        rows[name].append(row)
                        if row["rejoin_s"] is None:
                            stopped.add(name)          # a member short: later kills would measure something else
                if len(stopped) == 2:
                    break
        finally:
            for w in writers.values():
                w.stop()
        for name in (SHEPHERD, ETCD):
            consistent, missing = systems[name].check(writers[name])
            result["systems"][name] = {"label": LABELS[name], "rows": rows[name],
                                       "summary": summarize(rows[name], kills),
                                       "outcomes": dict(writers[name].outcomes),
                                       "consistent": consistent,
                                       "missing": None if missing is None else len(missing)}
    sh, et = result["systems"][SHEPHERD]["summary"], result["systems"][ETCD]["summary"]
    result["ratio"] = {key: (sh[key] / et[key] if sh[key] is not None and et[key] else None)
                       for key in ("median", "max")}
    return result


# ---- report ----

def print_report(result):
    say()
    for name in (SHEPHERD, ETCD):
        sysres = result["systems"][name]
        say("%s: write gap per leader SIGKILL (s); writer outcomes %s"
            % (sysres["label"], json.dumps(sysres["outcomes"], sort_keys=True)))
        common.table(["kill", "killed", "term", "gap s", "first-ack gap s", "kill->ack s", "new leader", "new term",
                      "failed attempts", "rejoin s", "term after", "acks after"],
                     [[r["kill"], r["victim"], r["term"], fmt(r["gap"], "none"), fmt(r["first_ack_gap"]),
                       fmt(r["kill_to_ack"]), r["new_leader"], r["new_term"],
                       ", ".join("%s %d" % kv for kv in sorted(r["failed"].items())) or "-",
                       "%.1f" % r["rejoin_s"] if r["rejoin_s"] is not None else "NO", r["term_after_rejoin"],
                       r["acks_after_kill"]]
                      for r in sysres["rows"]])
        say()
    sh, et = (result["systems"][n]["summary"] for n in (SHEPHERD, ETCD))
    say("machine:")
    for label, value in result["machine"].items():
        say("  %-11s %s" % (label, value))
    say("method: " + result["method"])
    say()
    say("write gap after a leader SIGKILL (s), side by side:")
    ratio = {key: "%.2f" % value if value else "-" for key, value in result["ratio"].items()}
    common.table(["", "Shepherd HA", "etcd", "ratio Shepherd/etcd"],
                 [["median", fmt(sh["median"]), fmt(et["median"]), ratio["median"]],
                  ["p90", fmt(sh["p90"]), fmt(et["p90"]), "-"],
                  ["max", fmt(sh["max"], "unbounded"), fmt(et["max"], "unbounded"), ratio["max"]],
                  ["min", fmt(sh["min"]), fmt(et["min"]), "-"],
                  ["kills measured", "%d/%d" % (len(sh["gaps"]), sh["kills_asked"]),
                   "%d/%d" % (len(et["gaps"]), et["kills_asked"]), "-"]])
    say()
    for name in (SHEPHERD, ETCD):
        sysres = result["systems"][name]
        say("  %-11s recovered after every kill: %s; members agree at the end: %s; acknowledged writes missing: %s"
            % (sysres["label"], "yes" if sysres["summary"]["all_recovered"] else "NO",
               {True: "yes", False: "NO", None: "unknown"}[sysres["consistent"]],
               "unknown" if sysres["missing"] is None else sysres["missing"]))
    common.target_line("Shepherd HA median write gap", fmt(sh["median"], "n/a") + " s", "<= 0.5 s",
                       sh["median"] is not None and sh["median"] <= bench_failover.TARGET_MEDIAN)
    common.target_line("Shepherd HA max write gap", fmt(sh["max"], "unbounded") + " s", "<= 1.5 s",
                       sh["max"] is not None and sh["max"] <= bench_failover.TARGET_MAX)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--kills", type=int, default=10, help="leader SIGKILLs per system (default 10)")
    parser.add_argument("--etcd-election-ms", type=int, default=None,
                        help="etcd --election-timeout in ms (default: etcd's own, 1000; the heartbeat stays 100 ms "
                        "unless this is under 500, then it is a fifth of it)")
    parser.add_argument("--rate", type=float, default=200.0,
                        help="writer pace in writes/s, 0 = as fast as it can (default 200: 5 ms resolution)")
    parser.add_argument("--client-timeout", type=float, default=0.5, help="per-request socket timeout in s "
                        "(default 0.5)")
    parser.add_argument("--size", type=int, default=1024, help="bytes per write (default 1024)")
    parser.add_argument("--observe", type=float, default=1.0,
                        help="seconds to keep watching acks after the first one following a kill (default 1)")
    parser.add_argument("--settle", type=float, default=2.0,
                        help="seconds to keep writing after the killed member rejoined (default 2)")
    parser.add_argument("--max-gap", type=float, default=30.0,
                        help="give up waiting for an ack after a kill after this many s (default 30)")
    parser.add_argument("--wait-quiet", type=float, default=0.0, metavar="S",
                        help="first wait up to S s for other processes to use under 0.25 cores (default 0)")
    parser.add_argument("--json", action="store_true",
                        help="print the result as one JSON document on stdout (the report goes to stderr)")
    args = parser.parse_args(argv)
    if args.kills < 1:
        parser.error("--kills must be at least 1")
    if args.client_timeout <= 0:
        parser.error("--client-timeout must be positive")
    common.exit_on_sigterm()
    out = sys.stderr if args.json else sys.stdout
    with contextlib.redirect_stdout(out):
        say("bench_failover_vs_etcd: %d leader SIGKILL(s) per system, writers at %s writes/s with a %.2f s client "
            "timeout" % (args.kills, "%.0f" % args.rate if args.rate else "max", args.client_timeout))
        if args.wait_quiet > 0:
            common.wait_for_quiet(args.wait_quiet)
        common.print_background_load()
        try:
            result = compare(kills=args.kills, etcd_election_ms=args.etcd_election_ms, rate=args.rate,
                             client_timeout=args.client_timeout, size=args.size, observe=args.observe,
                             settle=args.settle, max_gap=args.max_gap)
        except EtcdError as exc:
            say("error: %s" % exc)
            return 2
        print_report(result)
    if args.json:
        json.dump(result, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
    ok = all(result["systems"][n]["summary"]["all_recovered"] for n in (SHEPHERD, ETCD))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
