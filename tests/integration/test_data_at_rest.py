"""A replica's data at rest is its owner's only (issue 14, finding 8), on real replicas:
the data directory 0700, the journal, the dump and every other file in it 0600, also
after a restart over a directory left readable by others (fixed on start, logged)."""
import os
import stat
import time

import pytest

from .helpers import call, ensure_namespace, unique

pytestmark = pytest.mark.integration


def _data_dir(cluster, ident):
    return os.path.join(cluster.lc.dir, ident, "data")


def _modes(path):
    out = {path: stat.S_IMODE(os.stat(path).st_mode)}
    for entry in os.scandir(path):
        out[entry.path] = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
    return out


def _assert_private(cluster):
    for ident in cluster.ids:
        data = _data_dir(cluster, ident)
        modes = _modes(data)
        assert modes[data] == 0o700, "%s is %04o" % (data, modes[data])
        names = {os.path.basename(p) for p in modes}
        assert {"raft.journal", "raft.dump"} <= names, names
        loose = {p: "%04o" % m for p, m in modes.items() if m & 0o077}
        assert not loose, "readable by others: %s" % loose


def test_journal_and_dump_are_owner_only_and_loosened_ones_are_fixed_on_start(make_cluster):
    cluster = make_cluster(server_options={"log_compaction_entries": 20})
    url = cluster.url(cluster.ids[0])
    ensure_namespace(url, "at-rest")
    for _ in range(60):
        resp = call("POST", url + "/api/v1/namespaces/at-rest/configmaps",
                    json={"metadata": {"name": unique("cm")}, "data": {"password": "hunter2"}})
        assert resp.status_code == 201, resp.text
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(
            os.path.exists(os.path.join(_data_dir(cluster, i), "raft.dump")) for i in cluster.ids):
        time.sleep(0.2)
    time.sleep(0.5)         # the forked writer renames the dump into place when complete
    _assert_private(cluster)

    victim = cluster.ids[0]
    assert cluster.lc.stop(victim)
    data = _data_dir(cluster, victim)
    os.chmod(data, 0o755)
    for entry in os.scandir(data):
        if entry.is_file():
            os.chmod(entry.path, 0o644)
    cluster.lc.start(victim)
    cluster.wait_ready()
    _assert_private(cluster)
    with open(os.path.join(cluster.lc.dir, victim, "server.log"), errors="replace") as fh:
        log = fh.read()
    assert "raft.journal was 0644, readable by others: now 0600" in log, log[-2000:]
    assert "data directory %s was 0755" % data in log
