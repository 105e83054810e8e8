"""Does the installed PySyncObj still have what our overrides reach into?

The overrides in this package replace or call PySyncObj internals: name-mangled
methods and attributes (`_SyncObj__raftLog`), protected methods (`_onTick`), a
module-level factory (`createJournal`). A newer PySyncObj that renamed one of them
would not fail: an override of a renamed method is just never called, an attribute
we set is just never read. So at import we check, and refuse to start otherwise:

- the installed version is the pinned one (setup.cfg pins the same; a unit test
  keeps the two equal);
- every `_<Class>__name` used anywhere in the overrides' code exists on that
  PySyncObj class, as a class attribute or as an attribute one of its methods sets
  (read from the bytecode: STORE_ATTR instructions);
- every method an override class declares in `_OVERRIDES` exists on its base with
  the same parameters, and the class overrides nothing it does not declare;
- the few non-mangled names and module globals we depend on are there and used the
  way we rely on (SyncObj.__init__ looks `createJournal` up as a global; the TCP
  connection calls our cipher through `encrypt_at_time`/`extract_timestamp`/`decrypt`).
"""
import dis
import functools
import importlib
import importlib.metadata
import inspect
import re
import types

PINNED_VERSION = "0.3.17"

_MANGLED = re.compile(r"^_([A-Za-z][A-Za-z0-9]*)__([A-Za-z0-9_]*[A-Za-z0-9])$")

# (module, name, attributes it must have)
_REQUIRED_GLOBALS = (
    ("pysyncobj", "FAIL_REASON", ("SUCCESS", "QUEUE_FULL", "MISSING_LEADER", "DISCARDED", "REQUEST_DENIED")),
    ("pysyncobj.syncobj", "_RAFT_STATE", ("LEADER", "CANDIDATE", "FOLLOWER")),
    ("pysyncobj.syncobj", "createJournal", ()),
    ("pysyncobj.syncobj", "SyncObj", ("_isLeader", "_getLeader", "isNodeConnected", "raftCurrentTerm",
                                      "raftCommitIndex", "raftLastApplied", "isReady", "otherNodes",
                                      "selfNode", "waitBinded", "destroy", "addOnTickCallback",
                                      "tick_thread_alive", "forceLogCompaction")),
    ("pysyncobj.syncobj", "SyncObjConsumer", ()),
    ("pysyncobj.journal", "FIRST_RECORD_OFFSET", ()),
    ("pysyncobj.journal", "LAST_RECORD_OFFSET_OFFSET", ()),
    ("pysyncobj.journal", "FileJournal", ()),
    ("pysyncobj.journal", "MetaStorer", ("getPath",)),
    ("pysyncobj.journal", "ResizableFile", ()),
    ("pysyncobj.pickle", "dumps", ()),
    ("pysyncobj.pickle", "to_bytes", ()),
    ("pysyncobj.monotonic", "monotonic", ()),
)

# (module, class, names its code must refer to): how a swap or hook of ours takes effect
_REQUIRED_USES = (
    ("pysyncobj.syncobj", "SyncObj", ("createJournal",)),        # looked up at call time: the swap works
    ("pysyncobj.tcp_connection", "TcpConnection", ("encrypt_at_time", "extract_timestamp", "decrypt")),
    ("pysyncobj.transport", "TCPTransport", ("encryptor",)),      # reads SyncObj.encryptor (our cipher)
    ("pysyncobj.syncobj", "SyncObj", ("Serializer",)),            # looked up at call time: DumpWriter's swap works
    # the `pickle` global we swap for restricted_pickle.SAFE_PICKLE, and what is called on it
    ("pysyncobj.syncobj", "SyncObj", ("pickle", "loads", "dumps")),
    ("pysyncobj.serializer", "Serializer", ("pickle", "load", "dump", "to_bytes")),
    ("pysyncobj.serializer", "Serializer", ("gzip", "GzipFile")),   # the `gzip` we swap for dump_gzip
    ("pysyncobj.tcp_connection", "TcpConnection", ("pickle", "loads", "zlib")),   # what GuardedConnection replaces
)

# Attributes of PySyncObj classes that our subclasses read or set (class or instance attributes).
_REQUIRED_ATTRIBUTES = (
    ("pysyncobj.transport", "TCPTransport", ("_syncObj", "_server", "_connections", "_unknownConnections",
                                             "_nodes", "_nodeAddrToNode", "_selfNode", "_shouldConnect",
                                             "_onOutgoingConnected", "_onDisconnected")),
    ("pysyncobj.tcp_connection", "TcpConnection", ("sendRandKey", "recvRandKey", "recvLastTimestamp",
                                                   "encryptor", "state", "disconnect")),
    ("pysyncobj.syncobj", "SyncObj", ("_poller",)),
)

# Classes whose mangled names the overrides may use, by the prefix of the mangled name.
_CLASSES = {"SyncObj": ("pysyncobj.syncobj", "SyncObj"), "FileJournal": ("pysyncobj.journal", "FileJournal"),
            "ResizableFile": ("pysyncobj.journal", "ResizableFile"),
            "MetaStorer": ("pysyncobj.journal", "MetaStorer"),
            "TcpConnection": ("pysyncobj.tcp_connection", "TcpConnection"),
            "Serializer": ("pysyncobj.serializer", "Serializer")}


class PySyncObjMismatch(ImportError):
    """The installed PySyncObj is not the one the overrides were written against."""


def installed_version():
    return importlib.metadata.version("pysyncobj")


def check_version():
    found = installed_version()
    if found != PINNED_VERSION:
        raise PySyncObjMismatch(
            "shepherd-ha needs PySyncObj %s (pinned in setup.cfg), found %s. Its Raft layer overrides PySyncObj "
            "internals (shepherd_ha/store/pysyncobj_overrides) that were checked against %s only. Install "
            "pysyncobj==%s, or review every override against %s and then raise PINNED_VERSION."
            % (PINNED_VERSION, found, PINNED_VERSION, PINNED_VERSION, found))


def _lookup(module, name):
    return getattr(importlib.import_module(module), name, None)


def _code_objects(obj):
    """Every code object of a function, property, class or module's functions, nested ones included."""
    if isinstance(obj, types.ModuleType):
        for value in vars(obj).values():
            if getattr(value, "__module__", None) == obj.__name__:
                yield from _code_objects(value)
        return
    if isinstance(obj, type):
        for value in vars(obj).values():
            yield from _code_objects(value)
        return
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        for part in (obj.fget, obj.fset, obj.fdel):
            if part is not None:
                yield from _code_objects(part)
        return
    code = getattr(obj, "__code__", None)
    if isinstance(code, types.CodeType):
        stack = [code]
        while stack:
            current = stack.pop()
            yield current
            stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))


def names_used(obj):
    return {name for code in _code_objects(obj) for name in code.co_names}


@functools.lru_cache(maxsize=None)
def attributes_set(cls):
    """Instance attributes a class's own methods assign (self.__x = ... compiles to STORE_ATTR _Cls__x)."""
    return {ins.argval for code in _code_objects(cls) for ins in dis.get_instructions(code)
            if ins.opname == "STORE_ATTR"}


def _has(cls, name):
    return hasattr(cls, name) or any(name in attributes_set(klass) for klass in cls.__mro__[:-1])


def _parameters(function):
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def missing_globals():
    problems = []
    for module, name, attributes in _REQUIRED_GLOBALS:
        obj = _lookup(module, name)
        if obj is None:
            problems.append("%s.%s is gone" % (module, name))
            continue
        problems += ["%s.%s.%s is gone" % (module, name, a) for a in attributes if not hasattr(obj, a)]
    for module, name, uses in _REQUIRED_USES:
        obj = _lookup(module, name)
        used = names_used(obj) if obj is not None else set()
        problems += ["%s.%s no longer uses %s" % (module, name, u) for u in uses if u not in used]
    for module, name, attributes in _REQUIRED_ATTRIBUTES:
        cls = _lookup(module, name)
        problems += ["%s.%s no longer has %s" % (module, name, a) for a in attributes
                     if cls is None or not _has(cls, a)]
    return problems


def missing_mangled(modules):
    """Mangled PySyncObj names the overrides' code refers to but PySyncObj no longer has."""
    problems = []
    for module in modules:
        for name in sorted(names_used(module)):
            match = _MANGLED.match(name)
            if not match:
                continue
            where = _CLASSES.get(match.group(1))
            cls = _lookup(*where) if where else None
            if cls is None:
                if where:
                    problems.append("%s uses %s, but %s.%s is gone" % (module.__name__, name, *where))
                continue
            if not _has(cls, name):
                problems.append("%s uses %s, which %s neither defines nor sets" % (module.__name__, name, cls.__name__))
    return problems


def bad_overrides(cls, base):
    """An override class against its PySyncObj base: declared overrides exist with the same
    parameters; nothing else of the base is replaced without being declared."""
    declared = set(getattr(cls, "_OVERRIDES", ()))
    problems = []
    for name in sorted(declared):
        mine, theirs = vars(cls).get(name), getattr(base, name, None)
        if mine is None:
            problems.append("%s declares it overrides %s but does not define it" % (cls.__name__, name))
        elif theirs is None:
            problems.append("%s overrides %s.%s, which is gone" % (cls.__name__, base.__name__, name))
        elif callable(mine) and callable(theirs) and _parameters(mine) != _parameters(theirs):
            problems.append("%s.%s%s no longer matches %s.%s%s" % (
                cls.__name__, name, inspect.signature(mine), base.__name__, name, inspect.signature(theirs)))
    for name, value in vars(cls).items():
        if name in declared or name.startswith("__") or not hasattr(base, name):
            continue
        if callable(value) or isinstance(value, property):
            problems.append("%s replaces %s.%s without declaring it in _OVERRIDES"
                            % (cls.__name__, base.__name__, name))
    return problems


def check_names(modules, overrides):
    """Raise PySyncObjMismatch naming everything missing; `overrides` is [(cls, base), ...]."""
    problems = missing_globals() + missing_mangled(modules)
    for cls, base in overrides:
        problems += bad_overrides(cls, base)
    if problems:
        raise PySyncObjMismatch(
            "PySyncObj %s lacks what shepherd-ha's overrides of its internals need "
            "(shepherd_ha/store/pysyncobj_overrides); running anyway would silently turn overrides into "
            "no-ops:\n  - %s" % (installed_version(), "\n  - ".join(problems)))


def checked_conf(conf_class, **options):
    """SyncObjConf(**options), refusing option names it does not know (it ignores them silently)."""
    known = vars(conf_class())
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise PySyncObjMismatch("PySyncObj %s's SyncObjConf has no option %s: the setting would be ignored"
                                % (installed_version(), ", ".join(unknown)))
    return conf_class(**options)
