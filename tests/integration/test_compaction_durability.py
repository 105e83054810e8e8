"""SIGKILL of every replica right after log compactions loses nothing acknowledged.

PySyncObj compacts by writing a dump and then rewriting the journal; both windows
(killed mid-rewrite, killed between dump and rewrite) used to drop the journal's
tail on every replica at once (see shepherd_ha/store/durable_journal.py).
"""
import requests
import pytest

from shepherd_ha.cli.local_cluster import LocalCluster, find_base_port

pytestmark = pytest.mark.integration


def test_kill_all_during_frequent_compaction_keeps_every_acknowledged_write(tmp_path):
    cluster = LocalCluster(str(tmp_path / "cluster"))
    cluster.create(3, find_base_port(3), {"log_compaction_entries": 60}, tls=False)   # plain requests below
    cluster.start_all()
    try:
        cluster.wait_ready(30)
        urls = cluster.api_urls()
        acknowledged = {}
        for rnd in range(3):
            for i in range(250):
                name = "p%d-%d" % (rnd, i)
                reply = requests.post(urls[i % 3] + "/api/v1/namespaces/default/pods", timeout=10, json={
                    "metadata": {"name": name},
                    "spec": {"containers": [{"name": "c", "image": "busybox:1"}]}})
                assert reply.status_code == 201, reply.text
                acknowledged[name] = reply.json()["metadata"]["uid"]
            for ident in cluster.ids():          # all at once, no clean shutdown
                cluster.kill(ident)
            cluster.start_all()
            cluster.wait_ready(30)
            for url in urls:
                items = requests.get(url + "/api/v1/namespaces/default/pods", timeout=10).json()["items"]
                stored = {o["metadata"]["name"]: o["metadata"]["uid"] for o in items}
                missing = sorted(set(acknowledged) - set(stored))
                assert not missing, "round %d: %s lost %d acknowledged pods, e.g. %s" % (
                    rnd, url, len(missing), missing[:5])
                assert stored == acknowledged
            digests = {requests.get(u + "/shepherd/v1/replica?digest=1", timeout=10).json()["digest"] for u in urls}
            assert len(digests) == 1, "replicas diverged after restart"
    finally:
        cluster.stop_all()
