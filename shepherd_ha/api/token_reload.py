"""A token table that follows its file: a new node's token works at once, a removed
one stops working at once, without restarting the replica.

Every authentication stats the file (about a microsecond); when its modification
time, size or inode changed, it is read again. A file that no longer parses (a
half-written edit) keeps the previous table and logs why, so a typo never locks
everyone out; write the new file beside and rename it over the old for an atomic
swap (`shepherd-ha token create` does).
"""
import logging
import os
import threading

from shepherd_ha.options import ConfigError

log = logging.getLogger("shepherd_ha.api.auth")


def _stamp(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ReloadingTokenTable:
    def __init__(self, path, load):
        """load(): a fresh TokenTable from the file, or ConfigError."""
        self.path, self._load = path, load
        self._lock = threading.Lock()
        self._stamp = _stamp(path)
        self._table = load()          # a bad file at start is the caller's ConfigError
        self.reloads = 0

    def __len__(self):
        return len(self._table)

    def add(self, token, user):
        self._table.add(token, user)

    def authenticate(self, token):
        stamp = _stamp(self.path)
        if stamp is not None and stamp != self._stamp:
            self._reload(stamp)
        return self._table.authenticate(token)

    def _reload(self, stamp):
        with self._lock:
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                self._table = self._load()
                self.reloads += 1
                log.info("token file %s changed: %d token(s) now", self.path, len(self._table))
            except ConfigError as exc:
                log.error("token file %s changed but cannot be used (keeping the previous tokens): %s",
                          self.path, exc)
