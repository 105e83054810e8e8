#!/usr/bin/env python3
"""Where the HTTP floor comes from: GET /healthz on one waitress server, three ways.

  wsgi       a bare WSGI callable (waitress alone)
  flask      a Flask app with one route (waitress + Flask)
  shepherd   Shepherd HA's own app (create_app: every route, the request hooks and
             metrics, error handlers, the streaming wrapper) over a replica stand-in
             that /healthz never touches

Each runs in its own process with the waitress options and thread count the server
uses (shepherd_ha.cli.server.WAITRESS_OPTIONS), under the same client threads as
`bench_writes.py --http-floor` (keep-alive http.client, several processes). Prints
requests/s, p50/p99 and the server's CPU per request, and the differences: what
Flask adds to waitress, and what Shepherd's app adds to Flask. A create pays that
floor once, on the replica it is sent to, before any validation or Raft.

  python bench/bench_http_stack.py [--clients 32] [--duration 10] [--repeat 2]
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from bench_writes import run_api_phase  # noqa: E402
from common import ms, say  # noqa: E402

VARIANTS = ("wsgi", "flask", "shepherd")
HEALTH_PATH = "/healthz"


# ====================================================================== servers (child processes)

def _wsgi_app():
    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]
    return app


def _flask_app():
    from flask import Flask, Response
    app = Flask("bench")

    @app.get(HEALTH_PATH)
    def healthz():
        return Response("ok\n", mimetype="text/plain")
    return app


def _shepherd_app():
    from shepherd_ha.api.app import create_app
    # /healthz answers without asking the replica; building the app only stores it.
    return create_app(object())


def serve(variant, port, threads):
    import waitress
    from shepherd_ha.cli.server import WAITRESS_OPTIONS
    app = {"wsgi": _wsgi_app, "flask": _flask_app, "shepherd": _shepherd_app}[variant]()
    waitress.serve(app, host="127.0.0.1", port=port, threads=threads, **WAITRESS_OPTIONS)


# ====================================================================== driver

def start_server(variant, threads):
    port = common.find_base_port(1)
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", variant, "--port", str(port),
                             "--threads", str(threads)])
    url = "http://127.0.0.1:%d" % port
    deadline = time.monotonic() + 20
    while not _answers(url):
        if proc.poll() is not None:
            raise RuntimeError("the %s server exited with %s" % (variant, proc.returncode))
        if time.monotonic() >= deadline:
            stop_server(proc)
            raise RuntimeError("the %s server did not answer on %s within 20 s" % (variant, url))
        time.sleep(0.1)
    return proc, url


def _answers(url):
    host, port = common.split_url(url)
    conn = common.http.client.HTTPConnection(host, port, timeout=1)
    try:
        conn.request("GET", HEALTH_PATH)
        return conn.getresponse().status == 200
    except (OSError, common.http.client.HTTPException):
        return False
    finally:
        conn.close()


def stop_server(proc):
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def measure(variant, args):
    proc, url = start_server(variant, args.threads)
    try:
        return run_api_phase([url], args.clients, args.processes, args.duration, args.warmup, 0, args.timeout,
                             {variant: proc.pid}, floor=True)
    finally:
        stop_server(proc)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    parser.add_argument("--processes", type=int, default=4, help="client processes (default 4)")
    parser.add_argument("--threads", type=int, default=48, help="waitress threads (default 48, as the server)")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds per run (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds first (default 2)")
    parser.add_argument("--timeout", type=float, default=10.0, help="client socket timeout (default 10)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per variant, interleaved (default 2)")
    parser.add_argument("--quiet-wait", type=float, default=30.0, help="wait up to this many s before each run "
                        "for other processes to use < 0.25 cores (default 30)")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve, args.port, args.threads)
        return 0
    common.exit_on_sigterm()
    say("bench_http_stack: GET %s on one waitress server (%d threads), %d clients in %d processes; %.0f s per run, "
        "%d run(s) per variant" % (HEALTH_PATH, args.threads, args.clients, args.processes, args.duration,
                                   args.repeat))
    common.print_machine()
    common.print_background_load()
    runs = {v: [] for v in VARIANTS}
    for n in range(args.repeat):
        for variant in VARIANTS:          # interleaved, so slow drift in the machine hits all alike
            common.wait_for_quiet(args.quiet_wait)
            common.progress("run %d/%d: %s ..." % (n + 1, args.repeat, variant))
            r = measure(variant, args)
            runs[variant].append(r)
            say("    %s: %.0f requests/s, p50 %s ms, p99 %s ms, server CPU %.3f ms/request, errors %s; machine %.2f "
                "of 2 cores busy, of which %.2f not ours" % (
                    variant, r["rate"], ms(r["p50"]), ms(r["p99"]), r["server_ms_per_op"], r["errors"] or "none",
                    r["cpu"]["machine_cores_busy"], r["cpu"]["others_cores_busy"]))
    say()
    rows, cost = [], {}
    for variant in VARIANTS:
        rs = sorted(runs[variant], key=lambda r: r["rate"])
        mid = rs[len(rs) // 2]
        cost[variant] = sorted(r["server_ms_per_op"] for r in rs)[len(rs) // 2]
        rows.append([variant, "%.0f" % mid["rate"], "%.0f-%.0f" % (rs[0]["rate"], rs[-1]["rate"]),
                     ms(mid["p50"]), ms(mid["p99"]), "%.3f" % cost[variant]])
    say("summary (median run; server CPU per request is the median over runs)")
    common.table(["server", "requests/s", "range", "p50 ms", "p99 ms", "server ms CPU/request"], rows)
    say()
    say("  waitress alone                      %.3f ms CPU per request" % cost["wsgi"])
    say("  Flask adds                          %.3f ms" % (cost["flask"] - cost["wsgi"]))
    say("  Shepherd's app adds (over Flask)    %.3f ms" % (cost["shepherd"] - cost["flask"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
