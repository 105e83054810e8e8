"""Backup and restore on real replica processes: a snapshot taken while writes go on is one
revision (every acknowledged write before it there, nothing newer), and restored into a
fresh directory it starts a new cluster holding exactly those objects (compared object by
object and by the store digest)."""
import io
import threading
import time

import requests

from ctl.main import main as sheepctl
from shepherd_ha import snapshot_file
from shepherd_ha.cli import restore
from shepherd_ha.cli.local_cluster import LocalCluster

from .helpers import call, ensure_namespace, expect, free_base_port

NS = "snap"
WRITERS = 3


class Writers:
    """Each thread creates ConfigMaps w<t>-<n> and PUTs its counter ConfigMap, recording
    every acknowledged answer (the object the API returned) and when it came back."""

    def __init__(self, urls):
        self.urls = urls
        self.acks = []                 # (monotonic end, object)
        self.errors = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(t,), daemon=True) for t in range(WRITERS)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def _run(self, t):
        url = self.urls[t % len(self.urls)] + "/api/v1/namespaces/%s/configmaps" % NS
        counter = None
        n = 0
        while not self.stop.is_set():
            n += 1
            try:
                reply = call("POST", url, json={"metadata": {"name": "w%d-%04d" % (t, n)}, "data": {"n": str(n)}},
                             timeout=5.0)
                if reply.status_code == 201:
                    self.acks.append((time.monotonic(), reply.json()))
                else:
                    self.errors.append(reply.text[:200])
                body = {"metadata": {"name": "counter-%d" % t}, "data": {"n": str(n)}}
                if counter is None:
                    reply = call("POST", url, json=body, timeout=5.0)
                else:
                    body["metadata"]["resourceVersion"] = counter["metadata"]["resourceVersion"]
                    reply = call("PUT", url + "/counter-%d" % t, json=body, timeout=5.0)
                if reply.status_code in (200, 201):
                    counter = reply.json()
                    self.acks.append((time.monotonic(), counter))
                else:
                    self.errors.append(reply.text[:200])
            except requests.RequestException as exc:
                self.errors.append(repr(exc))

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)


def _key(obj):
    return obj["metadata"]["name"]


def test_snapshot_under_writes_is_one_revision_and_restores_into_a_new_cluster(make_cluster, tmp_path):
    cluster = make_cluster()
    urls = [cluster.url(i) for i in cluster.ids]
    ensure_namespace(urls[0], NS)
    writers = Writers(urls).start()
    time.sleep(1.5)
    path = str(tmp_path / "backup.snap")
    requested = time.monotonic()
    out = io.StringIO()
    import contextlib
    with contextlib.redirect_stdout(out):
        code = sheepctl(["--server", urls[1], "cluster", "snapshot", "save", path])
    time.sleep(1.0)                   # writes go on after the snapshot too
    writers.finish()
    assert code == 0, out.getvalue()
    assert "saved %s" % path in out.getvalue() and "sha256" in out.getvalue()
    assert not writers.errors, writers.errors[:5]

    snap = snapshot_file.read(path)
    revision = snap.header["revision"]
    original_id = expect(call("GET", urls[0] + "/version"), 200)["clusterId"]
    assert snap.header["clusterId"] == original_id
    in_snapshot = {_key(o): o for r, o in snap.objects if r == "configmaps" and o["metadata"]["namespace"] == NS}
    assert all(int(o["metadata"]["resourceVersion"]) <= revision for _, o in snap.objects), \
        "an object newer than the snapshot's revision"
    # Exactly the state at `revision`: for each name, the acknowledged write with the
    # highest revision at or below it; and everything acknowledged before the request.
    expected = {}
    for _, obj in sorted(writers.acks, key=lambda a: int(a[1]["metadata"]["resourceVersion"])):
        if int(obj["metadata"]["resourceVersion"]) <= revision:
            expected[_key(obj)] = obj
    assert set(in_snapshot) == set(expected), (sorted(set(in_snapshot) ^ set(expected))[:10])
    for name, obj in expected.items():
        assert in_snapshot[name] == obj, name
    before = [obj for when, obj in writers.acks if when < requested]
    later = [obj for _, obj in writers.acks if int(obj["metadata"]["resourceVersion"]) > revision]
    assert before and later, "the writes did not overlap the snapshot (%d before, %d after)" % (len(before),
                                                                                               len(later))
    for obj in before:
        got = in_snapshot.get(_key(obj))
        assert got is not None and int(got["metadata"]["resourceVersion"]) >= int(obj["metadata"]["resourceVersion"]), \
            "acknowledged before the snapshot but missing from it: %s rv %s" % (_key(obj),
                                                                               obj["metadata"]["resourceVersion"])

    # Restore into a fresh directory and start it: the same objects, the same digest, a new id.
    restored, _ = restore.restore(path, str(tmp_path / "restored"), replicas=3, base_port=free_base_port(3),
                                  auth=False)
    try:
        restored.start_all()
        restored.wait_ready(60)
        want_digest = restore.started_digest(snap)
        assert all(u.startswith("https://") for u in restored.api_urls()), "a restored cluster serves TLS"
        tls = {"verify": restored.ca_file}      # its own new CA
        states = [expect(call("GET", u + "/shepherd/v1/replica", params={"digest": "1"}, **tls), 200)
                  for u in restored.api_urls()]
        assert [(s["revision"], s["digest"]) for s in states] == [(revision, want_digest)] * 3, \
            [(s["id"], s["revision"], s["digest"][:12]) for s in states]
        assert {s["clusterId"] for s in states} == {restored.cluster_id()} and restored.cluster_id() != original_id
        for url in restored.api_urls():
            listed = expect(call("GET", url + "/api/v1/configmaps", **tls), 200)["items"]
            got = {(o["metadata"]["namespace"], _key(o)): o for o in listed}
            want = {(o["metadata"]["namespace"], _key(o)): o for r, o in snap.objects if r == "configmaps"}
            assert got == want
            for resource, obj in snap.objects:
                if resource == "namespaces":
                    assert expect(call("GET", url + "/api/v1/namespaces/" + _key(obj), **tls), 200) == obj
        # It is a working cluster: writes go on from the restored revision.
        made = expect(call("POST", restored.api_urls()[0] + "/api/v1/namespaces/%s/configmaps" % NS,
                           json={"metadata": {"name": "after-restore"}}, **tls), 201)
        assert int(made["metadata"]["resourceVersion"]) > revision
        # The old cluster's clients are refused by the new one, and the old one is untouched.
        wrong = call("GET", restored.api_urls()[0] + "/api/v1/namespaces", headers={"Shepherd-Cluster-Id": original_id},
                     **tls)
        assert wrong.status_code == 421 and "another cluster" in wrong.json()["message"]
        assert call("GET", urls[0] + "/api/v1/namespaces/%s/configmaps/after-restore" % NS).status_code == 404
    finally:
        restored.stop_all(timeout=5.0)


def test_snapshot_save_refuses_an_existing_file_and_leaves_no_partial_file(cluster, tmp_path, capsys):
    path = tmp_path / "exists.snap"
    path.write_text("keep me")
    assert sheepctl(["--server", cluster.url("r1"), "cluster", "snapshot", "save", str(path)]) == 1
    assert "exists" in capsys.readouterr().err and path.read_text() == "keep me"
    assert sheepctl(["--server", cluster.url("r1"), "cluster", "snapshot", "save", "--force", str(path)]) == 0
    assert snapshot_file.read(str(path)).header["objects"] >= 2
    assert not (tmp_path / "exists.snap.partial").exists()


def test_restored_dir_starts_with_local_up(cluster, tmp_path):
    """`shepherd-ha local up --dir DIR` is what starts a restored cluster (the documented way)."""
    import subprocess
    import sys
    path = str(tmp_path / "b.snap")
    assert sheepctl(["--server", cluster.url("r2"), "cluster", "snapshot", "save", path]) == 0
    snap = snapshot_file.read(path)
    directory = str(tmp_path / "up")
    done = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "restore", "--snapshot", path, "--dir",
                           directory, "--base-port", str(free_base_port(3))], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "restored %d objects at revision %d" % (snap.header["objects"], snap.header["revision"]) in done.stdout
    lc = LocalCluster(directory)
    try:
        up = subprocess.run([sys.executable, "-m", "shepherd_ha.cli.main", "local", "up", "--dir", directory,
                             "--agents", "0"], capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stdout + up.stderr
        headers = lc.auth_headers()
        assert headers, "a restored cluster has its own tokens by default"
        state = expect(call("GET", lc.api_urls()[2] + "/shepherd/v1/replica", params={"digest": "1"},
                            headers=headers, verify=lc.ca_file), 200)
        assert (state["revision"], state["digest"]) == (snap.header["revision"], restore.started_digest(snap))
    finally:
        lc.stop_all(timeout=5.0)
