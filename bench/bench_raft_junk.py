#!/usr/bin/env python3
"""Junk on the Raft port under write load: the write gap a client sees, and elections.

A fresh 3-replica LocalCluster. One writer (bench_failover's: pods one at a time,
failing over between replicas, same Idempotency-Key until acknowledged) runs for
--baseline seconds alone, then for --rounds rounds in which every replica's Raft port
gets, at once, a 0x7fffffff length prefix followed by --junk-mb MB of junk, --junk-mb
MB of plain random bytes, and --idle idle connections. Printed: the longest gap between
two acknowledged writes with and without junk, how many junk bytes each sender got in
before the replica closed its connection, and the Raft terms before and after (a term
that moved is an election). Issue 14's target: no election, no write gap over 1 s.
"""
import argparse
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import ms, say  # noqa: E402
from bench_failover import Writer, states  # noqa: E402

from shepherd_ha.store.pysyncobj_overrides.transport import HANDSHAKE_SECONDS  # noqa: E402
from tests.integration.raft_wire import send_junk  # noqa: E402

TARGET_GAP = 1.0


def max_gap(acks, t0, t1):
    inside = [t for t in acks if t0 <= t <= t1]
    if len(inside) < 2:
        return None
    return max(b - a for a, b in zip(inside, inside[1:]))


def idle_connections(address, count):
    host, _, port = address.rpartition(":")
    socks = []
    for _ in range(count):
        try:
            socks.append(socket.create_connection((host, int(port)), timeout=2.0))
        except OSError:
            pass
    return socks


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--junk-mb", type=int, default=32)
    parser.add_argument("--idle", type=int, default=100)
    parser.add_argument("--rate", type=float, default=100.0, help="writes per second")
    args = parser.parse_args()
    common.exit_on_sigterm()
    common.print_machine()
    with common.BenchCluster(3) as bc:
        raft = {m["id"]: m["raft"] for m in bc.cluster.spec()["replicas"]}
        writer = Writer(bc.urls(), timeout=2.0, rate=args.rate, size=1024)
        writer.start()
        time.sleep(1.0)
        before = {i: (s or {}).get("term") for i, s in states(bc).items()}
        t0 = time.monotonic()
        time.sleep(args.baseline)
        t1 = time.monotonic()
        results, sockets = [], []
        for _ in range(args.rounds):
            threads = []
            for ident, address in sorted(raft.items()):
                for prefix in (struct.pack("i", 0x7fffffff), b""):
                    def run(address=address, prefix=prefix, ident=ident):
                        results.append((ident, "0x7fffffff prefix" if prefix else "random",
                                        send_junk(address, prefix, args.junk_mb << 20)))
                    threads.append(threading.Thread(target=run, daemon=True))
                sockets += idle_connections(address, args.idle)
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            time.sleep(1.0)
        t2 = time.monotonic()
        time.sleep(HANDSHAKE_SECONDS + 1.0)       # the idle connections' deadline
        writer.stop_event.set()
        writer.join(10)
        after = {i: (s or {}).get("term") for i, s in states(bc).items()}
        closed = 0
        for sock in sockets:
            sock.settimeout(0.01)
            try:
                closed += sock.recv(1) == b""
            except (ConnectionResetError, BrokenPipeError):
                closed += 1
            except OSError:
                pass
            sock.close()
    base_gap, junk_gap = max_gap(writer.acks, t0, t1), max_gap(writer.acks, t1, t2)
    say("")
    say("writes acknowledged: %d (outcomes %s)" % (len(writer.acks), dict(writer.outcomes)))
    common.table(["phase", "seconds", "acks", "longest gap (ms)"],
                 [["writes alone", "%.1f" % (t1 - t0), writer.acks_between(t0, t1), ms(base_gap)],
                  ["writes + junk", "%.1f" % (t2 - t1), writer.acks_between(t1, t2), ms(junk_gap)]])
    say("")
    per = {}
    for ident, kind, sent in results:
        per.setdefault((ident, kind), []).append(sent)
    common.table(["replica", "junk", "bytes sent before the close (per round)"],
                 [[i, k, ", ".join(str(v) for v in vals)] for (i, k), vals in sorted(per.items())])
    say("")
    say("idle connections closed by the replicas %.0f s after the last round: %d of %d"
        % (HANDSHAKE_SECONDS + 1.0, closed, len(sockets)))
    say("Raft terms before %s, after %s: %s" % (before, after, "no election" if before == after else "ELECTION"))
    common.target_line("longest write gap under junk", ms(junk_gap), "< %s" % ms(TARGET_GAP),
                       junk_gap is not None and junk_gap < TARGET_GAP)


if __name__ == "__main__":
    main()
