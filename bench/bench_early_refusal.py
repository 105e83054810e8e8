#!/usr/bin/env python3
"""CPU of a 429 in an API worker: refused before Flask (api/early_refusal.py) against
refused by the app's own admission hook (api/app.py `admit`), for a node's lease
renewal (a merge PATCH with a bearer token) whose `system` level is full.

In one process, no socket: the real app (create_app with tokens and flow control)
called as WSGI, with the environ waitress would build; the two paths are the same app
called at its outer `wsgi_app` (early refusal first) and at the one inside it (Flask
first). A GET /healthz through the whole app (admitted, exempt) is printed beside them
for scale. Waitress's own part of a request (~0.2-0.3 ms, bench_http_stack) is the same
for both and not included. Rounds alternate the paths; prints the median microseconds of
CPU per request and the ratio.

  python bench/bench_early_refusal.py [--requests 5000] [--rounds 5]
"""
import argparse
import io
import os
import statistics
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import print_machine, say, table  # noqa: E402

from shepherd_ha.api import auth  # noqa: E402
from shepherd_ha.api.app import create_app  # noqa: E402
from shepherd_ha.api.flow_control import SYSTEM, FlowControl  # noqa: E402

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/hollow-0001"
BODY = b'{"spec":{"holderIdentity":"hollow-0001","leaseDurationSeconds":40,"renewTime":"2026-12-03T12:00:01.000000Z"}}'
TOKEN = "node-token-0123456789abcdef"


def environ(method, path, body=b"", token=None):
    env = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
           "SERVER_PORT": "8080", "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1",
           "wsgi.url_scheme": "http", "wsgi.version": (1, 0), "wsgi.errors": sys.stderr,
           "wsgi.multithread": True, "wsgi.multiprocess": False, "wsgi.run_once": False,
           "HTTP_HOST": "127.0.0.1:8080", "HTTP_USER_AGENT": "shepherd-agent/1",
           "CONTENT_TYPE": "application/merge-patch+json", "CONTENT_LENGTH": str(len(body))}
    if token:
        env["HTTP_AUTHORIZATION"] = "Bearer " + token
    return env


def cpu_per_request(wsgi, method, path, body, token, count, want):
    codes = []

    def start_response(status, headers, exc_info=None):
        codes.append(status[:3])
    started = time.process_time()
    for _ in range(count):
        env = environ(method, path, body, token)
        env["wsgi.input"] = io.BytesIO(body)
        result = wsgi(env, start_response)
        for _chunk in result:
            pass
        close = getattr(result, "close", None)
        if close is not None:
            close()
    spent = time.process_time() - started
    wrong = [c for c in codes if c != want]
    if wrong:
        raise SystemExit("expected HTTP %s, got %s (%d times)" % (want, wrong[0], len(wrong)))
    return spent / count * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print_machine()
    tokens = auth.TokenTable({TOKEN: auth.User("system:node:hollow-0001", "n1", (auth.GROUP_NODES,))})
    flow = FlowControl(max_inflight=400, max_watches=100, queue_wait=1.0, replica_id="r1")
    replica = types.SimpleNamespace(id="r1", cluster_id=None)
    app = create_app(replica, tokens=tokens, flow=flow)
    system = flow.levels[SYSTEM]
    for _ in range(system.seats):             # every system seat busy and no queue: the fleet's overload
        system.acquire(0)
    system.queue_length = 0
    paths = {
        "429 before Flask (early refusal)": (app.wsgi_app, "PATCH", LEASE, BODY, TOKEN, "429"),
        "429 from the app's admit hook": (app.wsgi_app.wsgi_app, "PATCH", LEASE, BODY, TOKEN, "429"),
        "GET /healthz through the app (for scale)": (app.wsgi_app, "GET", "/healthz", b"", None, "200"),
    }
    figures = {name: [] for name in paths}
    for r in range(args.rounds):
        order = list(paths) if r % 2 == 0 else list(reversed(list(paths)))
        for name in order:
            figures[name].append(cpu_per_request(*paths[name][:5], args.requests, paths[name][5]))
        say("round %d of %d done" % (r + 1, args.rounds))
    say()
    say("CPU per request, median of %d rounds of %d requests (microseconds)" % (args.rounds, args.requests))
    rows = [(name, "%.1f" % statistics.median(v), " ".join("%.0f" % x for x in v)) for name, v in figures.items()]
    table(["path", "us CPU", "rounds"], rows)
    early, app_429 = (statistics.median(figures[n]) for n in list(paths)[:2])
    say("a refusal before Flask costs %.2f of one from the app (%.0f us less)" % (early / app_429, app_429 - early))
    # What every admitted request pays for the early look (its level has room).
    roomy = create_app(replica, tokens=tokens, flow=FlowControl(max_inflight=400, max_watches=100, queue_wait=1.0))
    check = roomy.wsgi_app._refusal
    env = environ("PATCH", LEASE, BODY, TOKEN)
    started = time.process_time()
    for _ in range(args.requests):
        assert check(env) is None
    say("the early look on a request that goes on: %.1f us CPU"
        % ((time.process_time() - started) / args.requests * 1e6))


if __name__ == "__main__":
    main()
