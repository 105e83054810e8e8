"""The files `shepherd-ha local up` writes that hold the Raft password are private from the start."""
import os
import stat

from shepherd_ha.cli.local_cluster import LocalCluster, find_base_port, write_private


def test_password_and_spec_are_owner_only_even_with_an_open_umask(tmp_path):
    old = os.umask(0)
    try:
        cluster = LocalCluster(str(tmp_path / "c"))
        cluster.create(3, find_base_port(3))
        cluster.add_agent("node-1", runtime="hollow")      # rewrites the spec
    finally:
        os.umask(old)
    for name in ("raft-password", "cluster.yaml"):
        assert stat.S_IMODE(os.stat(tmp_path / "c" / name).st_mode) == 0o600, name
    password = (tmp_path / "c" / "raft-password").read_text().strip()
    assert len(password) == 32 and cluster.spec()["raft_password"] == password


def test_write_private_tightens_an_existing_file(tmp_path):
    path = tmp_path / "secret"
    path.write_text("old")
    os.chmod(path, 0o644)
    write_private(str(path), "new")
    assert path.read_text() == "new" and stat.S_IMODE(os.stat(path).st_mode) == 0o600
