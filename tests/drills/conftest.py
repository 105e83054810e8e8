"""Fixtures of the drill tests: network namespaces need root and `ip netns`.

A missing requirement FAILS the test with the fix in the message; it never skips.
"""
import os

import pytest

from shepherd_ha.cli import netns


def pytest_configure(config):
    config.addinivalue_line("markers", "drills: network-namespace clusters and failure drills (root)")


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.drills)


def netns_or_fail():
    try:
        netns.require_root()
        netns.run(["ip", "netns", "list"])
    except netns.NetnsError as exc:
        pytest.fail("network-namespace tests need root and `ip netns`: %s" % exc)
