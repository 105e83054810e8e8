#!/usr/bin/env python3
"""CPU to write the JSON of a list of pods, as an API worker answers a list (api/bodies.py
dumps_list, in chunks) or a watch's events (one per pod): the stdlib's json.dumps
against the API's `dumps` (api/errors.py: orjson, json for what orjson refuses).

The pods are the store's shape after a hollow kubelet set them Running (agent/status.py),
with managedFields. Rounds alternate the two writers; prints milliseconds of CPU per
list (median of the rounds) and the ratio.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_interning import bound, running, template_pod  # noqa: E402
from common import print_machine, say, table  # noqa: E402

from shepherd_ha.api import bodies, errors  # noqa: E402

HEAD = {"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "123456"}}


def stdlib(obj):
    return json.dumps(obj, separators=(",", ":"))


def pods(count):
    out = []
    for i in range(count):
        pod = running(bound(template_pod(i, "5a0c9d1e-3b8f-4f7e-9c55-0c2b6f3e8a11"), i), i)
        pod["metadata"]["managedFields"] = [{
            "manager": "shepherd-controllers", "operation": "Update", "apiVersion": "v1",
            "time": "2026-12-03T09:00:00Z", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}}},
                         "f:spec": {"f:containers": {'k:{"name":"app"}': {".": {}, "f:image": {}, "f:name": {}}}}}}]
        out.append(json.loads(json.dumps(pod)))     # plain dicts, as decoded from the change stream
    return out


def cpu_ms(action, repeat):
    start = time.process_time()
    for _ in range(repeat):
        action()
    return 1000 * (time.process_time() - start) / repeat


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="500,30000", help="list sizes (pods), comma-separated")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    print_machine()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        items = pods(size)
        repeat = max(1, 20000 // size)
        assert b"".join(bodies.dumps_list(HEAD, items)).decode() == errors.dumps(dict(HEAD, items=items))
        assert json.loads(errors.dumps(items)) == json.loads(stdlib(items))
        runs = {"json.dumps": [], "api dumps": [], "watch json": [], "watch api": []}
        for _ in range(args.rounds):
            saved = errors.dumps
            try:
                bodies.dumps = stdlib
                runs["json.dumps"].append(cpu_ms(lambda: bodies.dumps_list(HEAD, items), repeat))
            finally:
                bodies.dumps = saved
            runs["api dumps"].append(cpu_ms(lambda: bodies.dumps_list(HEAD, items), repeat))
            event = {"type": "MODIFIED", "object": None}
            runs["watch json"].append(cpu_ms(lambda: [stdlib(dict(event, object=p)) for p in items], repeat))
            runs["watch api"].append(cpu_ms(lambda: [errors.dumps(dict(event, object=p)) for p in items], repeat))
        med = {k: statistics.median(v) for k, v in runs.items()}
        size_kb = len(errors.dumps(items)) / 1024
        rows.append(["list of %d pods (%.0f KiB)" % (size, size_kb), "%.2f" % med["json.dumps"],
                     "%.2f" % med["api dumps"], "%.1f" % (med["json.dumps"] / med["api dumps"])])
        rows.append(["%d watch events" % size, "%.2f" % med["watch json"], "%.2f" % med["watch api"],
                     "%.1f" % (med["watch json"] / med["watch api"])])
    say()
    say("CPU ms per body (median of %d alternated rounds)" % args.rounds)
    table(["body", "json.dumps", "api dumps (orjson)", "ratio"], rows)


if __name__ == "__main__":
    main()
