"""Fixtures shared by the client tests: replicas are the real API's fake server
(shepherd_ha/client/testing.py) over one shared store. A test module's own fixture of
the same name takes precedence."""
import pytest

from shepherd_ha.client.testing import FakeApiServer, FakeStore


@pytest.fixture
def store():
    return FakeStore()


@pytest.fixture
def replicas(store):
    """make(name=None, **server_options) -> a started FakeApiServer; all stopped at the end."""
    started = []

    def make(name=None, **kw):
        s = FakeApiServer(store, name or "r%d" % (len(started) + 1), **kw).start()
        started.append(s)
        return s
    yield make
    for s in started:
        s.stop()
