"""Waiting in tests: one bounded poll behind the unit and integration suites' wait helpers
(the end-to-end suite's also tolerates exceptions: tests/e2e/helpers.py)."""
import time


def wait_for(what, check, timeout, interval=0.05):
    """check()'s first truthy value within `timeout` seconds, else AssertionError naming `what`
    and check()'s last answer."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("%s: not within %.0f s (last: %r)" % (what, timeout, value))
        time.sleep(interval)
