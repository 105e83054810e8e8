#!/usr/bin/env python3
"""The scheduler's node picking alone, in one process: no Raft, no HTTP, no threads.

N nodes (32 cpu, 64 GiB, 110 pods, Ready) and P pending pods of one Deployment (10m
cpu, 16Mi memory each; plus, with --kinds K, K-1 other pod shapes in turn), placed one
after another by NodePicker with the built-in filters and scorers, as one pass of the
scheduler does (ClusterView.assume after each pick). Prints the CPU time per pass and
per pod, best of --repeat runs, so builds can be compared without the cluster's noise.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from shepherd_ha.controllers.scheduling import filters as F  # noqa: E402
from shepherd_ha.controllers.scheduling import scorers as S  # noqa: E402
from shepherd_ha.controllers.scheduling.algorithm import NodePicker  # noqa: E402
from shepherd_ha.controllers.scheduling.view import PodInfo, ViewBuilder  # noqa: E402


def node(name):
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"allocatable": {"cpu": "32", "memory": "64Gi", "pods": "110"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(i, kind):
    requests = {"cpu": "%dm" % (10 * (kind + 1)), "memory": "16Mi"}
    return {"metadata": {"name": "p%d" % i, "namespace": "default", "uid": "u%d" % i,
                         "ownerReferences": [{"uid": "owner-%d" % kind, "controller": True}]},
            "spec": {"containers": [{"name": "app", "image": "app:1", "resources": {"requests": requests}}],
                     **({"nodeSelector": {"kubernetes.io/hostname": "n%d" % kind}} if kind % 3 == 2 else {})}}


def one_pass(nodes, pods):
    builder = ViewBuilder()
    view, _ = builder.build(nodes, [])
    infos = [PodInfo(p) for p in pods]
    picker = NodePicker(F.FILTERS, S.SCORERS)
    started = time.process_time()
    placed = 0
    for info in infos:
        found, _ = picker.pick(info, view)
        if found is not None:
            view.assume(info, found)
            placed += 1
    return time.process_time() - started, placed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--kinds", type=int, default=1, help="pod shapes, in turn (1: one Deployment)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    nodes = [node("n%d" % i) for i in range(args.nodes)]
    pods = [pod(i, i % args.kinds) for i in range(args.pods)]
    runs = [one_pass(nodes, pods) for _ in range(max(1, args.repeat))]
    cpu = sorted(r[0] for r in runs)
    print("node picking: %d pods (%d shape(s)) on %d nodes, %d placed" % (args.pods, args.kinds, args.nodes,
                                                                         runs[0][1]))
    print("  CPU per pass     best %.3f s, median %.3f s, worst %.3f s (%d runs)"
          % (cpu[0], cpu[len(cpu) // 2], cpu[-1], len(cpu)))
    print("  CPU per pod      best %.1f us" % (cpu[0] / args.pods * 1e6))
    return 0


if __name__ == "__main__":
    sys.exit(main())
