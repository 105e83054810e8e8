"""Fixtures of the drill tests: network namespaces need root and `ip netns`.

A missing requirement FAILS the test with the fix in the message; it never skips.
"""
import os
import sys

import pytest

from shepherd_ha.cli import netns


def pytest_configure(config):
    config.addinivalue_line("markers", "drills: network-namespace clusters and failure drills (root)")


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.drills)


DRILLS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "vagrant", "drills")


def import_runner():
    """vagrant/drills/run_drills and its NetnsTarget (the drills are scripts, not a package)."""
    if DRILLS_DIR not in sys.path:
        sys.path.insert(0, DRILLS_DIR)
    import run_drills
    from target_netns import NetnsTarget
    return run_drills, NetnsTarget


def run_netns_drills(tmp_path, drills):
    """Run `drills` against a fresh NetnsTarget, printing each line as it comes; every drill
    must PASS. Returns (target, reports, text) for the caller's own checks."""
    netns_or_fail()
    run_drills, NetnsTarget = import_runner()
    lines = []

    def out(line):
        lines.append(line)
        print(line, flush=True)

    target = NetnsTarget(str(tmp_path / "cluster"))
    reports = run_drills.run(target, drills, out=out)
    text = "\n".join(lines)
    failed = ["%s: %s" % (r.drill, r.verdict) for r in reports if r.verdict != "PASS"]
    assert not failed, "drills failed: %s\n%s" % ("; ".join(failed), text)
    return target, reports, text


def netns_or_fail():
    try:
        netns.require_root()
        netns.run(["ip", "netns", "list"])
    except netns.NetnsError as exc:
        pytest.fail("network-namespace tests need root and `ip netns`: %s" % exc)
