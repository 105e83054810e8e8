"""store/data_at_rest.py: a data directory 0700 and its files 0600, tightened on start."""
import logging
import os
import stat

from shepherd_ha.store import data_at_rest


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_new_directory_is_owner_only(tmp_path):
    old = os.umask(0)
    try:
        data_at_rest.secure(str(tmp_path / "new" / "data"))
    finally:
        os.umask(old)
    assert _mode(tmp_path / "new" / "data") == 0o700


def test_loose_modes_are_tightened_and_logged(tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o755)
    for name, mode in (("raft.journal", 0o644), ("raft.dump", 0o666), ("raft.journal.meta", 0o600)):
        (data / name).write_bytes(b"x")
        os.chmod(data / name, mode)
    with caplog.at_level(logging.WARNING):
        changed = data_at_rest.secure(str(data))
    assert sorted(os.path.basename(p) for p in changed) == ["data", "raft.dump", "raft.journal"]
    assert _mode(data) == 0o700
    assert {_mode(data / n) for n in ("raft.journal", "raft.dump", "raft.journal.meta")} == {0o600}
    assert "raft.journal was 0644, readable by others: now 0600" in caplog.text
    assert data_at_rest.secure(str(data)) == []          # nothing left to change


def test_the_store_process_umask_makes_new_files_private(tmp_path):
    old = os.umask(0o022)
    try:
        data_at_rest.private_files()
        (tmp_path / "f").write_bytes(b"x")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "f") == 0o600


def test_files_written_before_the_store_starts_are_private_from_the_first_byte(tmp_path):
    from shepherd_ha import cluster_identity
    old = os.umask(0o022)
    try:
        data_dir = tmp_path / "data"
        chosen = cluster_identity.resolve_replica_id(str(data_dir), "ab" * 16, "correct-horse-battery-staple-42")
        assert chosen == "ab" * 16
        path = data_dir / cluster_identity.FILE_NAME
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and stat.S_IMODE(os.stat(data_dir).st_mode) == 0o700
        path.chmod(0o644)                                     # rewritten over a loose file: private again
        data_at_rest.write_private(str(path), "x\n")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and path.read_text() == "x\n"
        assert not data_at_rest.secure(str(data_dir))         # nothing left to tighten
    finally:
        os.umask(old)
