"""For the whole suite: a stored object mutated in place is a failure (store/interning.py
checks every shared part it reuses; servers started by tests inherit the setting and log
an ERROR)."""
import os

os.environ["SHEPHERD_VERIFY_SHARING"] = "1"

from shepherd_ha.store import interning  # noqa: E402 - after the setting it reads

interning.VERIFY = True


def pytest_sessionfinish(session, exitstatus):
    if interning.MUTATED:
        session.exitstatus = 1
        print("\n%d shared parts of stored objects were mutated in place; first: %r"
              % (len(interning.MUTATED), interning.MUTATED[0][1]))
