"""Fixtures shared by the client tests: replicas are the real API app
(tests/unit/real_api.py) over one shared in-memory store. A test module's own fixture
of the same name takes precedence."""
import pytest

from real_api import ApiServer, ApiStore


@pytest.fixture
def store():
    return ApiStore()


@pytest.fixture
def replicas(store):
    """make(name=None, **server_options) -> a started ApiServer; all stopped at the end."""
    started = []

    def make(name=None, **kw):
        s = ApiServer(store, name or "r%d" % (len(started) + 1), **kw).start()
        started.append(s)
        return s
    yield make
    for s in started:
        s.stop()
