"""Fixtures for the integration suite: clusters of real replica processes on 127.0.0.1.

`cluster`        one 3-replica cluster per test module, for the many non-destructive tests.
`kube`           one TLS cluster with tokens per test module, made by `shepherd-ha local up`
                 itself, for real kubectl through the DIR/kubeconfig it writes (kubectl_kit.py).
`make_cluster`   fresh clusters for tests that kill or restart replicas; each is stopped
                 (SIGTERM, then SIGKILL, only our own recorded PIDs) when the test ends.
"""
import pytest

from .helpers import start_cluster
from .kubectl_kit import KubeCluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    c = start_cluster(tmp_path_factory.mktemp("cluster"))
    request.addfinalizer(c.stop_all)
    return c


@pytest.fixture(scope="module")
def kube(tmp_path_factory, request):
    k = KubeCluster(tmp_path_factory.mktemp("kube"))
    request.addfinalizer(k.stop)
    return k


@pytest.fixture
def make_cluster(tmp_path_factory, request):
    def make(replicas=3, server_options=None):
        c = start_cluster(tmp_path_factory.mktemp("fresh"), replicas, server_options)
        request.addfinalizer(c.stop_all)
        return c
    return make
