"""PySyncObj's full dumps written by a thread of the store process, not a forked child.

PySyncObj forks a child to pickle the whole store into raft.dump, so the replica keeps
serving while it is written. But CPython counts references in every object it touches:
pickling the store writes to every page that holds a stored object, and each such page
is copied for the child: a child that pickled 40,000 objects ended with 84 % of its
parent's heap copied, and in the 1,000-node fleet dump children reached 109-167 MB beside
145-156 MB store processes, the largest part of a leader's peak memory after its API
worker (docs/benchmarks.md, run AB; bench/bench_dump_memory.py).

`DumpWriter` (swapped in for PySyncObj's `Serializer` by __init__) instead takes, in the
tick thread that asked for the dump, a copy of the state's containers: the FSM's
`dump_state()` (its stored objects are immutable bytes, shared, not copied) and
PySyncObj's own small values. A thread then pickles that copy in protocol-5 frames,
without the pickler's memo (`write_pickle`), and compresses them (zlib gives up the GIL while it compresses), fsyncs the file and renames
it into place. Between frames the pickler calls the gzip writer's Python code, where the
interpreter hands the GIL to the tick thread when it asks, so a dump delays a tick by
about one switch interval, not by its length. What the dump holds is the state at the
entry PySyncObj names, as with the fork.

A dump is fsynced before it is renamed, so the journal's fsync of it before trimming
(journal.py) finds nothing left to write, and a store process killed mid-dump leaves a
temporary file and no orphan process. A dump that a newer one overtook while it was
written (a leader's snapshot installed meanwhile, or the replica shut down in a process
that goes on) is not renamed into place: it is reported failed, and the newer stays.

The thread keeps the store process's CPU priority. Lowered (as the forked child was, so
that it waited for the API), it would hold the GIL while the kernel ran API threads
before it, and the Raft tick waiting for that GIL would wait for them too.
"""
import copy
import copyreg
import logging
import os
import pickle
import threading

from pysyncobj.atomic_replace import atomicReplace
from pysyncobj.config import SERIALIZER_STATE
from pysyncobj.serializer import Serializer

from . import dump_gzip
from .restricted_pickle import DUMP_PROTOCOL

log = logging.getLogger("shepherd_ha.store.raft_node")

def write_pickle(data, file):
    """Pickle `data` to `file` as a dump: protocol 5, in frames written as they fill, and
    without the memo. The pickler remembers every object it wrote so that a second
    reference to it is written as a back-reference; the state holds no object twice that
    matters (objects are bytes, keys strings) and no cycle, and the memo of a 30,000-pod
    store was 12.7 MB for the length of the dump (docs/benchmarks.md, run AB). Any
    unpickler reads it as before."""
    pickler = pickle.Pickler(file, DUMP_PROTOCOL)
    pickler.fast = True         # no memo (a cycle would be refused, not looped on)
    pickler.dump(data)


# What `_Serializer__pid` holds while a dump thread runs: PySyncObj (getTransmissionData)
# and dump turns read any value but 0 as "a dump is being written".
WRITING = -3


class _FrozenState:
    """Pickles as `cls` with `state`, exactly as the object it was taken from would (NEWOBJ
    of the class, then its state); the pickler checks the class named is `__class__`."""

    def __init__(self, cls, state):
        self._cls, self._state = cls, state

    @property
    def __class__(self):
        return self._cls

    def __reduce_ex__(self, protocol):
        return copyreg.__newobj__, (self._cls,), self._state


def frozen(value):
    """`value` (a part of PySyncObj's dump data) as it is now, safe to pickle from another
    thread: an object with `dump_state()` (the FSM) as that state, containers copied."""
    if hasattr(value, "dump_state"):
        return _FrozenState(type(value), value.dump_state())
    if isinstance(value, list):
        return [frozen(item) for item in value]
    if isinstance(value, dict):
        return {key: frozen(item) for key, item in value.items()}
    return copy.deepcopy(value)


class DumpWriter(Serializer):
    """PySyncObj's Serializer, whose dumps to a file are written by a thread (see above).
    In-memory dumps and custom serializers are PySyncObj's own."""

    _OVERRIDES = ("serialize", "checkSerializing", "setTransmissionData")    # checked against Serializer at import

    def __init__(self, fileName, transmissionBatchSize, tryUseFork, serializer, deserializer,
                 serializeChecker):
        super().__init__(fileName, transmissionBatchSize, False, serializer, deserializer, serializeChecker)
        self._threaded = fileName is not None and serializer is None
        self._thread = None
        self._outcome = None
        self._renaming = threading.Lock()   # the dump's rename against a newer dump's
        self._superseded = False            # a newer dump took the file: do not rename over it
        self._abandoned = False             # the replica was shut down: no dump lands any more

    def serialize(self, data, id):
        if not self._threaded:
            return super().serialize(data, id)
        if self._Serializer__pid != 0 or self._abandoned:
            return
        self._Serializer__currentID = id
        data, last, before, cluster = data
        data = (frozen(data), last, before, set(cluster))
        self._outcome = None
        self._superseded = False
        self._Serializer__pid = WRITING
        self._thread = threading.Thread(target=self._write, args=(data,), name="raft-dump", daemon=True)
        self._thread.start()

    def _write(self, data):
        path = self._Serializer__fileName
        temporary = path + ".tmp"
        outcome = SERIALIZER_STATE.FAILED       # unless it gets to the end
        try:
            with open(temporary, "wb") as f:
                with dump_gzip.GzipFile(fileobj=f, mode="wb") as g:
                    write_pickle(data, g)
                f.flush()
                os.fsync(f.fileno())
            with self._renaming:
                if self._superseded or self._abandoned:
                    log.warning("a newer dump replaced %s while this one was written, or the replica stopped: "
                                "this one is dropped", path)
                else:
                    atomicReplace(temporary, path)
                    outcome = SERIALIZER_STATE.SUCCESS
        except Exception:
            log.exception("could not write the dump %s", path)
        finally:
            self._outcome = outcome

    def setTransmissionData(self, data):
        # A leader's snapshot, chunk by chunk; its last chunk renames it into place (PySyncObj
        # then loads it). A dump of ours still being written is older: it must not follow.
        with self._renaming:
            installed = super().setTransmissionData(data)
            if installed:
                self._superseded = True
        return installed

    def abandon(self):
        """The replica is shut down: a dump being written is not renamed into place (a
        replica started again in this process may have written a newer one by then)."""
        with self._renaming:
            self._abandoned = True

    def checkSerializing(self):
        if self._Serializer__pid != WRITING:
            return super().checkSerializing()
        if self._outcome is None:
            return SERIALIZER_STATE.SERIALIZING, self._Serializer__currentID
        self._thread.join()
        outcome, self._thread, self._outcome = self._outcome, None, None
        self._Serializer__pid = 0
        if outcome == SERIALIZER_STATE.SUCCESS:
            self._Serializer__transmissions = {}
        return outcome, self._Serializer__currentID

    def writing(self):
        """Whether a dump is being written now."""
        return self._Serializer__pid != 0
