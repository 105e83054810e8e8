"""Unpickling what arrives over the Raft port without running anything.

PySyncObj pickles its messages, the commands inside log entries and its dumps, and
unpickles all three with plain pickle: whoever holds the Raft password could send a
pickle whose `__reduce__` runs a command on every replica (issue 14, finding 1). Here:

- messages and commands resolve no global at all (`loads_plain`): they are dicts,
  lists, tuples, str, bytes, ints, floats, bools and None. Our connections pickle
  messages with protocol 5, so bytes need no global (protocol 2 spells them
  `_codecs.encode(...)`); PySyncObj pickles commands with protocol 2, and ours hold
  no bytes (JSON-shaped objects). A pickle that names a global raises RefusedPickle.
- a membership change entry (PySyncObj's own, `addNodeToCluster`/`removeNodeFromCluster`:
  ['add' or 'rem', address, TCPNode]) resolves TCPNode only (`loads_membership`), and
  its shape is checked; the node is rebuilt from its address, so no other state an
  entry gives it survives.
- a dump (our own file, or a leader's snapshot received over the wire) resolves only
  the exact names a dump holds (`DUMP_GLOBALS`): the FSM's class, OrderedDict, set,
  PySyncObj's TCPNode, and `_codecs.encode` restricted to what protocol 2 uses it
  for (str -> latin-1 bytes). Nothing else is importable from a dump.

`SAFE_PICKLE` stands in for the `pysyncobj.pickle` module in PySyncObj's syncobj and
serializer modules (see __init__): same dumps/dump/to_bytes, restricted loads/load.
"""
import collections
import io
import pickle

import pysyncobj.pickle as _pysyncobj_pickle
from pysyncobj.node import TCPNode

WIRE_PROTOCOL = 5
# Dumps (PySyncObj's serializer: the dump file, a snapshot sent to a follower). PySyncObj
# pickles them with protocol 2, which holds the whole pickle in memory until the end and
# spells each bytes object as a str copy kept in its memo: at 30,000 pods the dump child
# grew by ~170 MB over the store process it forked from. Protocol 5 writes 64 KiB frames
# as they fill and bytes as they are (docs/benchmarks.md, run W). Any protocol loads.
DUMP_PROTOCOL = 5


class RefusedPickle(pickle.UnpicklingError):
    """A pickle that names a global we do not allow (or is not a pickle at all)."""


def _latin1(text, encoding="latin1", errors="strict"):
    # What protocol 2 pickles bytes as: _codecs.encode(str, 'latin1'). Nothing else.
    if type(text) is not str or encoding not in ("latin1", "latin-1") or errors != "strict":
        raise RefusedPickle("_codecs.encode is allowed only as protocol 2's bytes (str, 'latin1')")
    return text.encode("latin1")


def _dump_globals():
    from shepherd_ha.store.fsm import StoreFSM      # late: fsm imports nothing of ours back
    return {("shepherd_ha.store.fsm", "StoreFSM"): StoreFSM,
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("__builtin__", "set"): set, ("builtins", "set"): set,
            ("__builtin__", "frozenset"): frozenset, ("builtins", "frozenset"): frozenset,
            ("pysyncobj.node", "TCPNode"): TCPNode,
            ("_codecs", "encode"): _latin1}


class _Unpickler(pickle.Unpickler):
    allowed = {}

    def find_class(self, module, name):
        found = self.allowed.get((module, name))
        if found is None:
            raise RefusedPickle("global %s.%s refused: Raft messages and commands carry plain data only"
                                % (module, name))
        return found

    def persistent_load(self, pid):
        raise RefusedPickle("persistent ids refused")


class _DumpUnpickler(_Unpickler):
    pass


def loads_plain(data):
    """Unpickle data that may name no global at all."""
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except RefusedPickle:
        raise
    except Exception as exc:     # truncated, not a pickle, a bad opcode: all the same to a peer
        raise RefusedPickle("not a valid pickle: %s" % exc) from None


class _MembershipUnpickler(_Unpickler):
    allowed = {("pysyncobj.node", "TCPNode"): TCPNode}


# What PySyncObj's __doChangeCluster ignores (an unknown request type): a refused
# membership entry is skipped the same way on every replica.
IGNORED_MEMBERSHIP_CHANGE = ("refused", "0.0.0.0:0")


def loads_membership(data):
    """A membership change entry's request, checked: (op, address, TCPNode(address)).
    RefusedPickle for anything else."""
    try:
        request = _MembershipUnpickler(io.BytesIO(data)).load()
    except RefusedPickle:
        raise
    except Exception as exc:
        raise RefusedPickle("not a valid membership change: %s" % exc) from None
    if not (type(request) is list and len(request) == 3 and request[0] in ("add", "rem")
            and type(request[1]) is str and type(request[2]) is TCPNode):
        raise RefusedPickle("a membership change is ['add' or 'rem', address, node], not %.200r" % (request,))
    address = request[2].__dict__.get("_TCPNode__address")
    host, _, port = request[1].rpartition(":")
    if address != request[1] or not host or not (port.isascii() and port.isdigit()):
        raise RefusedPickle("a membership change names node %.100r for address %.100r" % (address, request[1]))
    return [request[0], request[1], TCPNode(request[1])]


def load_dump(file):
    """Unpickle a dump (from an open file), resolving only DUMP_GLOBALS."""
    if not _DumpUnpickler.allowed:
        _DumpUnpickler.allowed = _dump_globals()
    try:
        return _DumpUnpickler(file).load()
    except RefusedPickle:
        raise
    except Exception as exc:
        raise RefusedPickle("not a valid dump: %s" % exc) from None


def dumps_wire(message):
    return pickle.dumps(message, WIRE_PROTOCOL)


class _SafePickle:
    """What PySyncObj's syncobj and serializer modules call as `pickle`."""
    dumps = staticmethod(_pysyncobj_pickle.dumps)

    @staticmethod
    def dump(obj, file, protocol=None):
        pickle.dump(obj, file, DUMP_PROTOCOL)

    to_bytes = staticmethod(_pysyncobj_pickle.to_bytes)

    @staticmethod
    def loads(data):
        return loads_plain(_pysyncobj_pickle.to_bytes(data))

    load = staticmethod(load_dump)


SAFE_PICKLE = _SafePickle()
