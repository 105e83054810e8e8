#!/usr/bin/env python3
"""What open connections cost an API worker: waitress's poll() loop against ours on
epoll (shepherd_ha/api/epoll_loop.py), with N idle keep-alive connections held open
(a fleet's agents between renewals) while a few clients send GET /healthz.

Each variant serves in a child process through shepherd_ha.api.http_server.serve
(the limits, channel class and maintenance the API uses) with a bare WSGI app, so
the difference is the loop alone. Variants alternate; each run prints requests/s,
p50/p99 and the server's CPU per request (from its process times).

  python bench/bench_idle_connections.py [--idle 700] [--clients 8] [--duration 10] [--repeat 3]
"""
import argparse
import http.client
import os
import socket
import subprocess
import sys
import threading
import time

import psutil

HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (HERE, os.path.dirname(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import common  # noqa: E402
from common import ms, percentile, say  # noqa: E402
from shepherd_ha.cli.open_files import raise_open_file_limit  # noqa: E402

LOOPS = ("poll", "epoll")
SOURCES = ["127.0.0.%d" % i for i in range(2, 30)]


def _serve(loop, port, threads):
    from shepherd_ha.api import http_server

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]
    raise_open_file_limit()
    http_server.serve(app, http_server.Limits(0, 0), 1 << 20, idle_timeout=600, event_loop=loop,
                      host="127.0.0.1", port=port, threads=threads, _quiet=True)


def _client(port, stop, latencies, errors):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            latencies.append(time.perf_counter() - t0)
        except (OSError, http.client.HTTPException):
            errors.append(1)
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.close()


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_one(loop, args):
    port = _free_port()
    child = subprocess.Popen([sys.executable, __file__, "--serve", loop, "--port", str(port),
                              "--threads", str(args.threads)])
    idle = []
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or child.poll() is not None:
                    raise SystemExit("the %s server did not start" % loop)
                time.sleep(0.05)
        for i in range(args.idle):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5,
                                                 source_address=(SOURCES[i % len(SOURCES)], 0)))
        proc = psutil.Process(child.pid)
        stop, latencies, errors = threading.Event(), [], []
        clients = [threading.Thread(target=_client, args=(port, stop, latencies, errors), daemon=True)
                   for _ in range(args.clients)]
        for t in clients:
            t.start()
        time.sleep(args.warmup)
        del latencies[:]
        cpu0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
        time.sleep(args.duration)
        cpu1, t1 = sum(proc.cpu_times()[:2]), time.monotonic()
        done = len(latencies)
        stop.set()
        for t in clients:
            t.join(15)
        return {"loop": loop, "rate": done / (t1 - t0), "p50": percentile(latencies[:done], 50),
                "p99": percentile(latencies[:done], 99), "cpu_per_request": (cpu1 - cpu0) / max(1, done),
                "cores": (cpu1 - cpu0) / (t1 - t0), "errors": len(errors)}
    finally:
        for sock in idle:
            sock.close()
        child.terminate()
        child.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", type=int, default=700, help="idle keep-alive connections held (default 700)")
    parser.add_argument("--clients", type=int, default=8, help="client threads sending requests (default 8)")
    parser.add_argument("--threads", type=int, default=48, help="waitress threads (default 48)")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per run (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds first (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per loop, alternated (default 3)")
    parser.add_argument("--serve", choices=LOOPS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return _serve(args.serve, args.port, args.threads)
    raise_open_file_limit()
    say("bench_idle_connections: %d idle connections, %d clients, %d waitress threads, %.0f s x %d per loop"
        % (args.idle, args.clients, args.threads, args.duration, args.repeat))
    common.print_machine()
    results = []
    for i in range(args.repeat):
        for loop in (LOOPS if i % 2 == 0 else LOOPS[::-1]):
            r = run_one(loop, args)
            results.append(r)
            say("  %-5s  %7.0f req/s  p50 %6s ms  p99 %6s ms  server %.3f ms CPU per request (%.2f cores)  errors %d"
                % (r["loop"], r["rate"], ms(r["p50"]), ms(r["p99"]), r["cpu_per_request"] * 1000, r["cores"],
                   r["errors"]))
    say()
    for loop in LOOPS:
        mine = [r for r in results if r["loop"] == loop]
        say("  %-5s  median %7.0f req/s, %.3f ms CPU per request" % (
            loop, percentile([r["rate"] for r in mine], 50),
            percentile([r["cpu_per_request"] for r in mine], 50) * 1000))
    poll_cpu = percentile([r["cpu_per_request"] for r in results if r["loop"] == "poll"], 50)
    epoll_cpu = percentile([r["cpu_per_request"] for r in results if r["loop"] == "epoll"], 50)
    say("  epoll / poll CPU per request: %.2f" % (epoll_cpu / poll_cpu))


if __name__ == "__main__":
    main()
