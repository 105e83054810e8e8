#!/usr/bin/env python3
"""CPU per interned object (store/interning.py), as the FSM and every worker's mirror
pay it for each change they apply: a Deployment's pods created, bound, then set Running
(statuses as bench/hollow_kubelet.py writes them), each decoded afresh from a pickle as
the log and the change stream hand it over.

Each round runs every phase in both modes on fresh interners, alternated: `plain` interns every object on
its own (no prior), `prior` passes the previous version (for a create: the last pod
interned). Prints microseconds per object and the ratio, and checks that both give
equal objects holding the same memory.
"""
import argparse
import copy
import os
import pickle
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from agent import status as S  # noqa: E402
from shepherd_ha.store.interning import Interner  # noqa: E402


def template_pod(index, rs_uid):
    """A ReplicaSet's pod as the store holds it after create (defaults applied)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "bench", "labels": {"app": "web-3", "pod-template-hash": "t7tlkwkcsx"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "web-3-t7tlkwkcsx", "uid": rs_uid, "controller": True,
                                              "blockOwnerDeletion": True}],
                         "name": "web-3-t7tlkwkcsx-%05d" % index, "uid": str(uuid.uuid4()),
                         "creationTimestamp": "2026-12-02T20:41:%02dZ" % (index % 60),
                         "resourceVersion": str(1000 + index), "generation": 1},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                     "imagePullPolicy": "IfNotPresent",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                                   "limits": {"cpu": "10m", "memory": "16Mi"}},
                                     "terminationMessagePath": "/dev/termination-log",
                                     "terminationMessagePolicy": "File"}],
                     "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
                     "schedulerName": "default-scheduler", "enableServiceLinks": True,
                     "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                      "effect": "NoExecute", "tolerationSeconds": 300},
                                     {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
                                      "effect": "NoExecute", "tolerationSeconds": 300}]},
            "status": {"phase": "Pending", "qosClass": "Guaranteed"}}


def bound(pod, index):
    pod = copy.deepcopy(pod)
    pod["spec"]["nodeName"] = "hollow-%04d" % (index % 1000)
    pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                    "lastTransitionTime": "2026-12-02T20:42:%02dZ" % (index % 60)}]
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 100000)
    return pod


def running(pod, index):
    pod = copy.deepcopy(pod)
    now = "2026-12-02T20:43:%02dZ" % (index % 60)
    statuses = [S.container_status(c["name"], c["image"], S.running(now), ready=True,
                                   image_id="hollow://sha256:" + uuid.uuid5(uuid.NAMESPACE_URL, c["image"]).hex,
                                   container_id="hollow://%s-%s" % (pod["metadata"]["uid"][:12], c["name"]),
                                   started=True)
                for c in pod["spec"]["containers"]]
    pod["status"].update(S.build_pod_status(pod, statuses, "Running", "10.64.%d.%d" % (index // 256 % 256,
                                                                                        index % 256),
                                            "10.0.%d.%d" % (index // 256 % 4, index % 256), now, now))
    pod["metadata"]["resourceVersion"] = str(int(pod["metadata"]["resourceVersion"]) + 100000)
    return pod


def phases(count):
    """[(name, [(pickled object, index of its previous version or None)])]"""
    rs_uid = str(uuid.uuid4())
    created = [template_pod(i, rs_uid) for i in range(count)]
    binds = [bound(p, i) for i, p in enumerate(created)]
    runs = [running(p, i) for i, p in enumerate(binds)]
    return [("create", [pickle.dumps(p) for p in created]),
            ("bind", [pickle.dumps(p) for p in binds]),
            ("status Running", [pickle.dumps(p) for p in runs])]


def run(mode, data):
    """Intern every phase in order; {phase: seconds of CPU}, the interner, what it holds."""
    interner = Interner()
    held = [None] * len(data[0][1])
    seconds = {}
    for name, blobs in data:
        objects = [pickle.loads(b) for b in blobs]      # decoded as the log hands them over, not timed
        start = time.process_time()
        for i, obj in enumerate(objects):
            if mode == "plain":
                held[i] = interner.intern_object(obj)
            elif name == "create":
                held[i] = interner.intern_object(obj, kind="pods")
            else:
                held[i] = interner.intern_object(obj, held[i])
        seconds[name] = time.process_time() - start
    return seconds, interner, held


def _walk(roots, seen):
    """Bytes of everything reachable from `roots` (containers, their keys and values,
    tuples' items) not in `seen`, each counted once; `seen` gets them all."""
    total, stack = 0, list(roots)
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        total += sys.getsizeof(value)
        if type(value) is dict:
            stack.extend(value.keys())
            stack.extend(value.values())
        elif type(value) is list or type(value) is tuple:
            stack.extend(value)
    return total


def held_bytes(objects):
    """Bytes of every container, key and value reachable from `objects`, each counted once."""
    return _walk(objects, set())


def table_bytes(interner, held):
    """Bytes of the interner's own tables (its dicts, their keys and what only the keys
    hold), beyond the stored objects: the price of the sharing."""
    seen = set()
    _walk(held, seen)                          # the stored objects: not the tables' price
    tables = (interner._table, interner._keys, interner._origins)
    return sum(sys.getsizeof(t) for t in tables) + _walk(
        list(interner._table) + list(interner._keys) + list(interner._table.values()), seen)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds per mode (default 3)")
    args = parser.parse_args()
    data = phases(args.pods)
    results = {"plain": [], "prior": []}
    for round_ in range(args.rounds):
        for mode in ("plain", "prior") if round_ % 2 == 0 else ("prior", "plain"):
            seconds, interner, held = run(mode, data)
            results[mode].append(seconds)
            print("  ... round %d %-5s %s (parts reused %d, table hits %d)" % (
                round_ + 1, mode, ", ".join("%s %.0f us" % (k, 1e6 * v / args.pods) for k, v in seconds.items()),
                interner.reused, interner.hits), flush=True)
    plain = run("plain", data)[2]
    prior = run("prior", data)[2]
    assert [pickle.dumps(p) for p in plain] == [pickle.dumps(p) for p in prior], "the two modes stored different pods"
    memory, tables = {}, {}
    for mode in ("plain", "prior"):
        _, interner, held = run(mode, data)
        memory[mode] = held_bytes(held) / args.pods
        tables[mode] = table_bytes(interner, held) / args.pods
    print("\n%d pods, CPU per interned object (median of %d rounds), this machine" % (args.pods, args.rounds))
    print("  %-16s %10s %10s %7s" % ("phase", "plain us", "prior us", "ratio"))
    for name, _ in data:
        a = sorted(r[name] for r in results["plain"])[len(results["plain"]) // 2] / args.pods * 1e6
        b = sorted(r[name] for r in results["prior"])[len(results["prior"]) // 2] / args.pods * 1e6
        print("  %-16s %10.1f %10.1f %7.2f" % (name, a, b, b / a))
    print("  memory held per pod after the three phases (every object reached once, sys.getsizeof): "
          "plain %.0f B, prior %.0f B" % (memory["plain"],
                                                                                         memory["prior"]))
    print("  the interner's own tables per pod, beyond the objects: plain %.0f B, prior %.0f B"
          % (tables["plain"], tables["prior"]))


if __name__ == "__main__":
    main()
