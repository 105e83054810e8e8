"""A replica's data directory is readable by its owner only.

The Raft journal and dump hold every object in clear (ConfigMap values, tokens a pod
spec carries), and the data directory holds the store's local socket. They were 0755
and 0644 (issue 14, finding 8). Now:
- `secure(data_dir)` (every start): the directory is made 0700 and every file in it
  0600, tightening whatever an older version or a hand-made directory left, and
  logging each change;
- `write_private(path, data)`: the files written before the store starts (cluster-id,
  members.json, a restored dump) are 0600 from their first byte, replaced atomically;
- `private_files()` (the store process): umask 077, so what PySyncObj creates later
  (the journal and its meta file, the dump and its temporary files, a snapshot
  received from the leader) is 0600 from its first byte.
"""
import logging
import os
import stat

log = logging.getLogger(__name__)

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_files():
    os.umask(0o077)


def write_private(path, data):
    """Write `data` (str or bytes) to `path` 0600 through a fsynced temporary file, renamed
    over it; the directory is made 0700 if missing."""
    os.makedirs(os.path.dirname(path) or ".", mode=DIR_MODE, exist_ok=True)
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)          # a leftover temporary file keeps its mode through O_CREAT
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w") as fh:
            fd = None
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    finally:
        if fd is not None:
            os.close(fd)
    os.replace(tmp, path)
    return path


def _tighten(path, mode, what):
    current = stat.S_IMODE(os.lstat(path).st_mode)
    if current & ~mode:
        os.chmod(path, current & mode)
        log.warning("%s %s was %04o, readable by others: now %04o", what, path, current, current & mode)
        return True
    return False


def secure(data_dir):
    """Create data_dir 0700 or tighten it and its files; returns the paths it changed."""
    os.makedirs(data_dir, mode=DIR_MODE, exist_ok=True)
    changed = [data_dir] if _tighten(data_dir, DIR_MODE, "data directory") else []
    for entry in os.scandir(data_dir):
        if entry.is_symlink():
            continue
        if entry.is_dir():
            if _tighten(entry.path, DIR_MODE, "directory"):
                changed.append(entry.path)
        elif entry.is_file() or stat.S_ISSOCK(entry.stat().st_mode):
            if _tighten(entry.path, FILE_MODE, "file"):
                changed.append(entry.path)
    return changed
