#!/usr/bin/env python3
"""Run the failure drills against a target and print a summary table.

    python3 vagrant/drills/run_drills.py --target netns|vagrant [--drill NAME|GROUP|all]

NAME: a drill; GROUP: failures, membership or operations. service-traffic needs real
workers with the data plane (on `vagrant` only); `all` runs it only there.

`netns` builds its own cluster of network namespaces on this machine (root) and removes
it afterwards; `vagrant` uses the VMs of `make vagrant-up`. Exit status 0 only when every
selected drill passes.
"""
import argparse
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
ROOT = os.path.dirname(os.path.dirname(HERE))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)   # the project, when it is not installed

from drill_kit import DrillFailed, Report  # noqa: E402
from drills import DRILLS as FAILURE_DRILLS  # noqa: E402
from membership_drills import DRILLS as MEMBERSHIP_DRILLS  # noqa: E402
from ops_drills import DRILLS as OPERATIONS_DRILLS  # noqa: E402
from target import TARGETS, TargetError, load_target  # noqa: E402

ORDER = ["kill-leader", "partition", "worker-loss", "full-restart"]
MEMBERSHIP = ["replace-replica", "grow-shrink"]   # membership_drills.py: add, remove, replace
OPERATIONS = ["roll", "restore"]          # ops_drills.py: rolling restart, snapshot and restore
DATA_PLANE = ["service-traffic"]          # drills.py via service_traffic.py; in `all` only on real workers
DRILLS = dict(FAILURE_DRILLS, **MEMBERSHIP_DRILLS, **OPERATIONS_DRILLS)
GROUPS = {"failures": ORDER, "membership": MEMBERSHIP, "operations": OPERATIONS}


def selected(target, drill):
    """The drills `--drill` names on this target: one, a group, or all (service-traffic
    only where the workers run real containers)."""
    if drill == "all":
        return ORDER + MEMBERSHIP + OPERATIONS + (DATA_PLANE if getattr(target, "real_workers", False) else [])
    return GROUPS.get(drill, [drill])


def run_one(target, name, out=print):
    """Run drill `name`; returns its Report (verdict set). A drill's failure never stops the others."""
    report = Report(name, out)
    report.step("start on %s" % target.describe())
    try:
        DRILLS[name](target, report)
    except DrillFailed as exc:
        report.finish(str(exc))
    except Exception as exc:  # noqa: BLE001 - any surprise is a failed drill, with its type
        report.finish("%s: %s" % (type(exc).__name__, exc))
    else:
        report.finish()
    report.figures["drill duration"] = time.monotonic() - report.started
    return report


def run(target, names, out=print):
    """Set the target up, run the drills in order, close it; returns the Reports."""
    reports = []
    target.setup()
    try:
        for name in names:
            reports.append(run_one(target, name, out))
    finally:
        target.close()
    return reports


def summary(target, reports):
    lines = ["", "drills on %s" % target.describe(), "%-16s %9s  %s" % ("DRILL", "TIME", "VERDICT")]
    for r in reports:
        lines.append("%-16s %8.1fs  %s" % (r.drill, r.figures.get("drill duration", 0.0), r.verdict))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, choices=sorted(TARGETS),
                        help="netns: namespaces on this machine (root); vagrant: the VMs of make vagrant-up")
    parser.add_argument("--drill", default="all",
                        choices=ORDER + MEMBERSHIP + OPERATIONS + DATA_PLANE + sorted(GROUPS) + ["all"],
                        help="one drill, failures (%s), membership (%s), operations (%s) or all (default; "
                        "service-traffic only where workers run real containers)"
                        % (", ".join(ORDER), ", ".join(MEMBERSHIP), ", ".join(OPERATIONS)))
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so close() still removes what setup() made.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    try:
        target = load_target(args.target)
        reports = run(target, selected(target, args.drill))
    except (TargetError, Exception) as exc:  # noqa: BLE001 - setup failures end the run with a reason
        print("run_drills: target %s could not be used: %s: %s" % (args.target, type(exc).__name__, exc),
              file=sys.stderr)
        return 2
    print(summary(target, reports), flush=True)
    return 0 if all(r.verdict == "PASS" for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
