"""Fixtures shared by the client and sheepctl tests: replicas are the real API app
(tests/unit/real_api.py) over one shared in-memory store. A test module's own fixture
of the same name takes precedence."""
import pytest

from ctl_kit import isolate, run_ctl
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


@pytest.fixture
def server(store):
    """One started ApiServer of `store`, stopped at the end."""
    s = ApiServer(store).start()
    yield s
    s.stop()


@pytest.fixture
def ctl_isolated(monkeypatch, tmp_path):
    """sheepctl sees none of the machine's configuration (a module that runs ctl.main
    directly uses it for every test: pytestmark = pytest.mark.usefixtures("ctl_isolated"))."""
    isolate(monkeypatch, tmp_path / "home")


@pytest.fixture
def ctl(server, capsys, ctl_isolated):
    """run(*argv, stdin=None) -> (exit code, stdout, stderr) of sheepctl against `server`."""
    def run(*argv, stdin=None):
        return run_ctl(server, capsys, *argv, stdin=stdin)
    return run


@pytest.fixture(scope="module")
def single_replica(tmp_path_factory):
    """A real one-replica store (PySyncObj on loopback) that leads, for a module's API tests;
    closed after the module. Imports here keep the client tests above free of the store."""
    import time

    from shepherd_ha.cli.local_cluster import find_base_port
    from shepherd_ha.store.raft_node import RaftSettings
    from shepherd_ha.store.replica import Replica

    port = find_base_port(1)
    settings = RaftSettings(self_address="127.0.0.1:%d" % (port + 100), peer_addresses=[],
                            data_dir=str(tmp_path_factory.mktemp("single-replica")), password="x",
                            salt="00112233445566778899aabbccddeeff")
    replica = Replica("r1", settings, [])
    try:
        deadline = time.monotonic() + 20
        while replica.node.leader_address() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert replica.node.leader_address() is not None, "the single replica never led"
        yield replica
    finally:
        replica.close()
