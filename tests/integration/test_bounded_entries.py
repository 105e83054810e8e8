"""Bounded Raft entries on a real 3-replica cluster.

- a Deployment of 5,000 replicas (its controller writes them through group commit's bulk
  queue: many bounded entries, not one of megabytes) while a few threads create
  ConfigMaps, with the leader SIGKILLed in the middle and restarted: exactly 5,000 pods,
  each created once (a watch on every replica: no name added twice, none deleted),
  every acknowledged ConfigMap there, and no replica ever failed a Raft tick (PySyncObj's
  chunked transmission: `pickle data was truncated`);
- an object grown by merge patches until it is too big to replicate is refused with 413
  and a message saying so, and nothing is written.
"""
import os
import threading
import time

import pytest

from .helpers import (Watch, assert_status, call, describe, ensure_namespace, expect, unique,
                      write_with_retry)

pytestmark = pytest.mark.integration

REPLICAS = 5000
WRITERS = 3
TICK_FAILURES = ("failed _onTick", "pickle data was truncated")


def owned_pods(url, ns, uid):
    """Pods of the deployment's ReplicaSets (Deployment -> ReplicaSet -> pods)."""
    sets = expect(call("GET", url + "/apis/apps/v1/namespaces/%s/replicasets" % ns, timeout=30), 200)
    owners = {r["metadata"]["uid"] for r in sets["items"]
              if any(ref.get("uid") == uid and ref.get("controller") for ref in r["metadata"].get("ownerReferences") or [])}
    body = expect(call("GET", url + "/api/v1/namespaces/%s/pods" % ns, timeout=30), 200)
    return [p for p in body["items"]
            if any(r.get("uid") in owners and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]


def tick_failures(cluster):
    found = []
    for ident in cluster.ids:
        with open(os.path.join(cluster.lc.dir, ident, "server.log"), errors="replace") as fh:
            found += ["%s: %s" % (ident, line.strip()) for line in fh if any(s in line for s in TICK_FAILURES)]
    return found


class ConfigMapWriters:
    """A few threads creating small ConfigMaps until stopped; remembers what was acknowledged."""

    def __init__(self, urls, ns):
        self.urls, self.ns = urls, ns
        self.acked, self.failures = [], []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(WRITERS)]
        for t in self.threads:
            t.start()

    def _run(self, index):
        urls = self.urls[index:] + self.urls[:index]
        n = 0
        while not self.stop.is_set() and n < 5000:
            name = "cm-%d-%d" % (index, n)
            n += 1
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"n": str(n)}}
            try:
                resp, _ = write_with_retry("POST", urls, "/api/v1/namespaces/%s/configmaps" % self.ns,
                                           deadline_s=30.0, json=body)
            except AssertionError as exc:
                self.failures.append(str(exc))
                continue
            if resp.status_code == 201:
                self.acked.append(name)
            else:
                self.failures.append(describe(resp))
            time.sleep(0.01)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(40)


def test_5000_replicas_under_small_writes_and_a_leader_kill(make_cluster):
    cluster = make_cluster()
    urls = [cluster.url(i) for i in cluster.ids]
    ns = unique("bulk")
    ensure_namespace(urls[0], ns)
    revision = int(expect(call("GET", urls[0] + "/api/v1/namespaces/%s/pods" % ns), 200)["metadata"]["resourceVersion"])
    # A watch on every replica: whichever is killed, the others see every pod change.
    watches = {ident: Watch(cluster.url(ident), "/api/v1/namespaces/%s/pods" % ns, revision, timeout=150)
               for ident in cluster.ids}
    writers = ConfigMapWriters(urls, ns)
    try:
        body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "big"},
                "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": "big"}},
                         "template": {"metadata": {"labels": {"app": "big"}},
                                      "spec": {"containers": [{"name": "main", "image": "nginx:1.25"}]}}}}
        resp, _ = write_with_retry("POST", urls, "/apis/apps/v1/namespaces/%s/deployments" % ns, json=body)
        uid = expect(resp, 201)["metadata"]["uid"]

        def added(watch):
            return sum(1 for e in watch.changes() if e["type"] == "ADDED")

        leader = cluster.leader()
        assert watches[leader].wait_for(lambda events: added(watches[leader]) >= REPLICAS // 4, 60), \
            "the first quarter of the pods never showed up\n%s" % cluster.log_tails()
        leader = cluster.leader()
        cluster.kill(leader)
        at_kill = max(added(w) for w in watches.values())
        assert at_kill < REPLICAS, "all pods were there before the kill: no kill in the middle"
        cluster.leader(timeout=20)
        cluster.lc.start(leader)            # it catches up from the others (big append batches)

        survivors = [i for i in cluster.ids if i != leader]
        deadline = time.monotonic() + 60
        while True:
            counts = {i: added(watches[i]) for i in survivors}
            if any(c >= REPLICAS for c in counts.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        writers.finish()
        time.sleep(2.0)                     # nothing more is created after the count is reached

        cluster.wait_ready(60)
        for ident in cluster.ids:
            pods = owned_pods(cluster.url(ident), ns, uid)
            names = [p["metadata"]["name"] for p in pods]
            assert len(pods) == REPLICAS and len(set(names)) == REPLICAS, \
                "%s holds %d pods owned by the deployment" % (ident, len(pods))
        watch = max((watches[i] for i in survivors), key=lambda w: len(w.events))
        assert watch.error is None, "the watch failed: %s" % watch.error
        changes = watch.changes()
        adds = [e["object"]["metadata"]["name"] for e in changes if e["type"] == "ADDED"]
        assert len(adds) == len(set(adds)) == REPLICAS, \
            "%d pods added, %d distinct: every pod created once" % (len(adds), len(set(adds)))
        assert not [e for e in changes if e["type"] == "DELETED"], "no surplus pod created, then deleted"

        listed = expect(call("GET", urls[0] + "/api/v1/namespaces/%s/configmaps" % ns, timeout=30), 200)["items"]
        missing = set(writers.acked) - {c["metadata"]["name"] for c in listed}
        assert writers.acked and not missing, "acknowledged ConfigMaps lost: %s" % sorted(missing)[:10]
        assert not writers.failures, "small writes failed: %s" % writers.failures[:5]
        failures = tick_failures(cluster)
        assert not failures, "Raft ticks failed:\n%s" % "\n".join(failures[:10])
    finally:
        writers.finish()
        for w in watches.values():
            w.close()


def test_an_object_too_big_to_replicate_is_refused_with_413_and_nothing_is_written(cluster):
    from shepherd_ha.store.entry_size import ENTRY_THRESHOLD
    url = cluster.url(cluster.ids[0])
    ns = unique("big")
    ensure_namespace(url, ns)
    path = "/api/v1/namespaces/%s/configmaps" % ns
    chunk = "x" * (ENTRY_THRESHOLD // 3 - 100000)     # a body the API accepts (3 MiB at most)
    expect(call("POST", url + path, json={"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "grows"}, "data": {"a": chunk}}), 201)
    patch = {"Content-Type": "application/merge-patch+json"}
    for key in ("b", "c"):          # each patch is accepted: the object stays under the limit
        expect(call("PATCH", url + path + "/grows", headers=patch, json={"data": {key: chunk}}), 200)
    before = expect(call("GET", url + path + "/grows"), 200)
    resp = call("PATCH", url + path + "/grows", headers=patch, json={"data": {"d": chunk}})
    body = assert_status(resp, 413, "RequestEntityTooLarge")
    assert body["message"].startswith("object too large to replicate: "), body["message"]
    assert "bytes, limit %d" % ENTRY_THRESHOLD in body["message"], body["message"]
    after = expect(call("GET", url + path + "/grows"), 200)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"], "nothing was written"
    assert sorted(after["data"]) == ["a", "b", "c"]
    assert not tick_failures(cluster)
