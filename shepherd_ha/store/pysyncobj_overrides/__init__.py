"""Every place where shepherd-ha reaches into PySyncObj's internals (pinned 0.3.17).

- syncobj: PipelinedSyncObj (pipelined appends, one journal sync per tick, held
  acks, early staggered elections, journal aligned with the dump, dumps forced in
  the replica's turn (store/dump_turns.py), our cipher as its encryptor, timed
  ticks), FSMConsumer, and the createJournal swap;
- pre_vote: the PreVote mixin of PipelinedSyncObj (ask before campaigning);
- journal: the crash-safe file journal (FileJournal's mangled internals);
- dump_writer: PySyncObj's dumps written by a thread from a copy of the state's
  containers, not by a forked child (swapped in below as syncobj's `Serializer`);
- transport: the Raft port's connections (frame caps, handshake deadlines, protocol 5);
- dump_gzip: what PySyncObj's serializer compresses dumps with (level 1, not 9);
- restricted_pickle: what PySyncObj's syncobj and serializer modules unpickle (log
  entries, chunked entries, dumps and received snapshots) resolves no global, or
  only a dump's exact few; swapped in below as those modules' `pickle`;
- the socket.inet_ntop patch PySyncObj applies on import, undone below.

Importing this package checks (compat) that the installed PySyncObj is the pinned
version and still has every name the overrides use, and raises PySyncObjMismatch
with the list otherwise: an upgrade fails loudly instead of silently turning an
override into a no-op.
"""
import _socket
import socket

from . import compat

compat.check_version()

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf  # noqa: E402
from pysyncobj.journal import FileJournal, MetaStorer  # noqa: E402
from pysyncobj.serializer import Serializer  # noqa: E402
from pysyncobj.syncobj import SyncObjConsumer  # noqa: E402

# PySyncObj's win_inet_pton replaces socket.inet_ntop on every platform with a
# Windows-only version (psutil.net_connections() then raises). Put the C originals
# back, whichever module imported PySyncObj first.
socket.inet_ntop, socket.inet_pton = _socket.inet_ntop, _socket.inet_pton

import pysyncobj.serializer as _pysyncobj_serializer  # noqa: E402
import pysyncobj.syncobj as _pysyncobj_syncobj  # noqa: E402
from pysyncobj.tcp_connection import TcpConnection  # noqa: E402
from pysyncobj.transport import TCPTransport  # noqa: E402

from . import dump_gzip, dump_writer, journal, pre_vote, restricted_pickle, syncobj, transport  # noqa: E402
from .journal import DurableFileJournal, DurableMetaStorer, align_journal_to_dump, cut_torn_tail  # noqa: E402
from .syncobj import DUMP_FILE, ROLES, FSMConsumer, PipelinedSyncObj, durable_journals, raft_clock  # noqa: E402

OVERRIDES = ((PipelinedSyncObj, SyncObj), (pre_vote.PreVote, SyncObj), (FSMConsumer, SyncObjConsumer), (DurableFileJournal, FileJournal),
             (DurableMetaStorer, MetaStorer), (transport.GuardedConnection, TcpConnection),
             (transport.GuardedTransport, TCPTransport), (dump_writer.DumpWriter, Serializer))
compat.check_names([syncobj, pre_vote, journal, transport, dump_writer], OVERRIDES)

# Log entries, chunked entries, dumps and snapshots from a leader: no arbitrary globals.
_pysyncobj_syncobj.pickle = restricted_pickle.SAFE_PICKLE
_pysyncobj_serializer.pickle = restricted_pickle.SAFE_PICKLE
# Dumps compressed at level 1, not 9: the dump's CPU (dump_gzip).
_pysyncobj_serializer.gzip = dump_gzip
# Dumps written by a thread, not a forked child that copies the store's pages (dump_writer).
_pysyncobj_syncobj.Serializer = dump_writer.DumpWriter


PySyncObjMismatch = compat.PySyncObjMismatch


def checked_conf(**options):
    """SyncObjConf(**options); PySyncObjMismatch for an option it does not know (it would ignore it)."""
    return compat.checked_conf(SyncObjConf, **options)


__all__ = ["FAIL_REASON", "SyncObj", "DUMP_FILE", "ROLES", "FSMConsumer", "PipelinedSyncObj", "durable_journals",
           "raft_clock", "DurableFileJournal", "align_journal_to_dump", "cut_torn_tail",
           "checked_conf", "PySyncObjMismatch"]
