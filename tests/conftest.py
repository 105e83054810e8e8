"""For the whole suite: a stored object mutated in place, or interned with one container
at two places, is a failure (store/interning.py checks every shared part it reuses and
every object it interns; after each test every interner of this process checks its
whole table, and the test that broke one errors, by name; servers started by tests
inherit the setting and log an ERROR)."""
import os

import pytest

os.environ["SHEPHERD_VERIFY_SHARING"] = "1"

from shepherd_ha.store import interning  # noqa: E402 - after the setting it reads

interning.VERIFY = True


@pytest.fixture(autouse=True)
def stored_objects_stay_intact():
    caught = len(interning.MUTATED)
    yield
    for interner in list(interning.LIVE):
        bad = interner.corrupted()
        if bad:
            interning.LIVE.discard(interner)       # said once, by the test that broke it
            interning.MUTATED.extend(("corrupted", value) for value in bad)
    if len(interning.MUTATED) > caught:
        pytest.fail("%d shared parts of stored objects were mutated in place or interned twice in one "
                    "object during this test; first: %r" % (len(interning.MUTATED) - caught,
                                                             interning.MUTATED[caught][1]))


def pytest_sessionfinish(session, exitstatus):
    if interning.MUTATED:
        session.exitstatus = 1
        print("\n%d shared parts of stored objects were mutated in place; first: %r"
              % (len(interning.MUTATED), interning.MUTATED[0][1]))
