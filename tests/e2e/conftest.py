"""Fixtures of the end-to-end suite: real replicas, real agent processes, the real
Docker engine and real containers.

`docker_engine`   the Docker engine (a test FAILS, never skips, when it or the
                  shepherd/busybox:1 image is missing: run scripts/setup-docker.sh).
`e2e_cluster`     one 3-replica cluster per test module, with a short node lifecycle
                  (grace 4 s, eviction 2 s after that, lease interval 1 s).
`agents`          starts agent processes (`python -m agent.main`, through
                  LocalCluster.add_agent/start_agent) on that cluster with unique node
                  names; at the end of the test they are stopped (SIGTERM, SIGKILL
                  after 10 s; only our own recorded PIDs), their Node objects deleted
                  and every container labelled with their node names removed.
"""
import os
import uuid

import pytest

from tests.integration.helpers import start_cluster
from tests.integration.kubectl_kit import KubeCluster

from .helpers import E2E, AgentSet, docker_engine_or_fail


def pytest_configure(config):
    config.addinivalue_line("markers", "e2e: real cluster + agent processes + the real Docker engine")


def pytest_collection_modifyitems(items):
    here = os.path.dirname(__file__)
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def docker_engine():
    engine = docker_engine_or_fail()
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def e2e_cluster(tmp_path_factory, request, docker_engine):
    cluster = start_cluster(tmp_path_factory.mktemp("e2e"), 3, E2E.server_options)
    request.addfinalizer(cluster.stop_all)
    return cluster


@pytest.fixture
def agents(e2e_cluster, docker_engine, request):
    tag = uuid.uuid4().hex[:6]
    group = AgentSet(e2e_cluster, docker_engine, tag)
    request.addfinalizer(group.cleanup)
    return group


@pytest.fixture(scope="module")
def kube(tmp_path_factory, docker_engine):
    """A `local up` cluster (HTTPS, tokens: tests/integration/kubectl_kit.py) with one agent
    on the real Docker engine, named `kube.node`; its containers are removed at the end."""
    node = "kube-%s" % uuid.uuid4().hex[:6]
    k = KubeCluster(tmp_path_factory.mktemp("kube"))
    try:
        k.add_agent(node, "docker", extra_args=E2E.agent_args)
        k.node = node
        yield k
    finally:
        k.stop()
        k.lc.purge_containers()
