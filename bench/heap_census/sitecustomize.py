"""A heap census of running server processes, for benchmark runs only (not imported by
the product): with this folder on PYTHONPATH and MEMPROBE_DIR set, every `shepherd-ha
server` child watches $MEMPROBE_DIR/go; write a tag into it and each process writes
$MEMPROBE_DIR/<tag>-<pid>.txt:

- a tag starting with "w": API workers only (the store process would stall its Raft
  tick for the census's seconds); any other tag but "g"/"f": every process. The live heap
  (frozen objects included) attributed to (class, attribute) of Shepherd HA objects, the
  mirror and FSM first so shared parts count there; what nothing reaches, by type.
- "m...": glibc's and pymalloc's figures, then malloc_trim(0) and the RSS after it
  (milliseconds; every process).
- "g...": a full collection (frozen objects included) and what it found unreachable;
  "f...": the same after a collection of what is not frozen, so what it finds is
  garbage that was frozen (never freed otherwise).

    MEMPROBE_DIR=/tmp/census PYTHONPATH=bench/heap_census python3 bench/bench_scale.py ... &
    echo w1 > /tmp/census/go      # once the steady state has begun

It takes seconds per process (held GIL) and its own memory: latencies and RSS of a run
with a census are not figures of the build. docs/benchmarks.md, run V.
"""
import os
import sys

_FIRST_HOLDERS = ("Mirror", "StoreFSM", "Store")     # counted first: shared parts go to them


def _module_of(obj):
    module = type(obj).__dict__.get("__module__")
    return module if isinstance(module, str) else ""


def _census(path):
    """Attribute the live heap to (class, attribute) of shepherd_ha objects."""
    import gc, threading, time, types
    started = time.time()
    gc.unfreeze()                    # frozen objects are not in get_objects()
    objects = gc.get_objects()
    gc.freeze()
    opaque = (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
              types.CodeType, types.FrameType, threading.Thread)
    roots = [o for o in objects if _module_of(o).startswith("shepherd_ha") and hasattr(o, "__dict__")
             and not isinstance(o, (tuple, type))]
    roots.sort(key=lambda o: 0 if type(o).__name__ in _FIRST_HOLDERS else 1)
    seen = {id(o) for o in roots}
    held = {}                        # "Class.attribute" -> [bytes, objects, instances]
    for root in roots:
        for attribute, value in list(vars(root).items()):
            size = count = 0
            stack = [value]
            while stack:
                obj = stack.pop()
                if id(obj) in seen or isinstance(obj, opaque):
                    continue
                seen.add(id(obj))
                size += sys.getsizeof(obj)
                count += 1
                if not isinstance(obj, (str, bytes, int, float, bool)) and obj is not None:
                    stack.extend(gc.get_referents(obj))
            entry = held.setdefault("%s.%s" % (type(root).__name__, attribute), [0, 0, 0])
            entry[0] += size
            entry[1] += count
            entry[2] += 1
    unreached = {}
    for obj in objects:
        if id(obj) not in seen:
            entry = unreached.setdefault(type(obj).__name__, [0, 0])
            entry[0] += sys.getsizeof(obj)
            entry[1] += 1
    rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    with open(path, "w") as out:
        out.write("pid %d %s: RSS %.1f MB, %d tracked objects, census %.1f s\n"
                  % (os.getpid(), sys.argv[-1], rss / 1e6, len(objects), time.time() - started))
        out.write("threads: %s\n" % sorted({t.name.rstrip("0123456789-_") for t in threading.enumerate()}))
        out.write("reached from shepherd_ha objects: %.1f MB; tracked, not reached: %.1f MB in %d\n"
                  % (sum(v[0] for v in held.values()) / 1e6, sum(v[0] for v in unreached.values()) / 1e6,
                     sum(v[1] for v in unreached.values())))
        for name, (size, count, instances) in sorted(held.items(), key=lambda kv: -kv[1][0])[:45]:
            out.write("%8.2f MB %9d objs %6d inst  %s\n" % (size / 1e6, count, instances, name))
        _write_connections(out, objects)
        out.write("-- not reached, by type\n")
        for name, (size, count) in sorted(unreached.items(), key=lambda kv: -kv[1][0])[:15]:
            out.write("%8.2f MB %9d  %s\n" % (size / 1e6, count, name))


def _write_connections(out, objects):
    """The waitress connections holding the most output in memory: sent or not, a
    buffer's BytesIO keeps what was written to it until it turns over."""
    import io
    rows = []
    for obj in objects:
        if type(obj).__name__ not in ("HTTPChannel", "Channel") or not hasattr(obj, "outbufs"):
            continue
        held = 0
        for buffer in obj.outbufs:
            held += len(getattr(buffer, "strbuf", b"") or b"")
            inner = getattr(getattr(buffer, "buf", None), "file", None)
            if isinstance(inner, io.BytesIO):
                held += len(inner.getbuffer())
        requests = getattr(obj, "requests", None) or []
        path = getattr(requests[0], "path", "") if requests else ""
        query = getattr(requests[0], "query", "") if requests else ""
        rows.append((held, getattr(obj, "total_outbufs_len", 0), path, query[:60]))
    rows.sort(reverse=True)
    out.write("-- connections by output held in memory: %d connections, %.1f MB held, %.1f MB unsent\n"
              % (len(rows), sum(r[0] for r in rows) / 1e6, sum(r[1] for r in rows) / 1e6))
    for held, unsent, path, query in rows[:12]:
        out.write("%8.2f MB held %8.2f MB unsent  %s %s\n" % (held / 1e6, unsent / 1e6, path, query))


def _garbage(path, frozen_only):
    """A full collection, frozen objects included; what it found, by type."""
    import gc, time
    started = time.time()
    if frozen_only:
        gc.collect()                 # what is not frozen first: what is found after was frozen
    gc.unfreeze()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found = gc.collect()
    gc.set_debug(0)
    by_type = {}
    for obj in gc.garbage:
        entry = by_type.setdefault("%s.%s" % (_module_of(obj) or "?", type(obj).__name__), [0, 0])
        entry[0] += 1
        entry[1] += sys.getsizeof(obj)
    gc.garbage.clear()
    gc.freeze()
    with open(path, "w") as out:
        out.write("pid %d %s: full collection found %d unreachable in %.2f s\n"
                  % (os.getpid(), sys.argv[-1], found, time.time() - started))
        for name, (count, size) in sorted(by_type.items(), key=lambda kv: -kv[1][1])[:40]:
            out.write("%8d %10d B  %s\n" % (count, size, name))


def _rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _malloc(path):
    """Where the RSS the census does not reach sits: glibc's heap (in use, free), its
    mmapped blocks, pymalloc's arenas (sys._debugmallocstats); then what malloc_trim(0)
    gives back to the system."""
    import ctypes, time

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                     "fordblks", "keepcost")]

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = Mallinfo2

    def info():
        m = libc.mallinfo2()
        return ("heap %.1f MB (in use %.1f, free %.1f in %d chunks), mmapped %.1f MB in %d"
                % (m.arena / 1e6, m.uordblks / 1e6, m.fordblks / 1e6, m.ordblks, m.hblkhd / 1e6, m.hblks))
    with open(path, "w") as out:
        out.write("pid %d %s: RSS %.1f MB\n" % (os.getpid(), sys.argv[-1], _rss() / 1e6))
        out.write("before trim: %s\n" % info())
        out.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        started = time.perf_counter()
        libc.malloc_trim(0)
        took = time.perf_counter() - started
        out.write("\nmalloc_trim(0) took %.1f ms: RSS %.1f MB; after trim: %s\n" % (took * 1e3, _rss() / 1e6, info()))


def _watch(directory):
    import threading, time
    done = set()
    while True:
        time.sleep(1)
        try:
            tag = open(os.path.join(directory, "go")).read().strip()
        except OSError:
            continue
        if not tag or tag in done:
            continue
        done.add(tag)
        is_store = any("_autoTickThread" in t.name for t in threading.enumerate())
        if tag.startswith("w") and is_store:
            continue
        path = os.path.join(directory, "%s-%d.txt" % (tag, os.getpid()))
        try:
            if tag[0] == "m":
                _malloc(path)
            elif tag[0] in "gf":
                _garbage(path, frozen_only=tag[0] == "f")
            else:
                _census(path)
        except Exception as exc:         # a probe never takes a server down
            with open(path + ".error", "w") as out:
                out.write(repr(exc))


if "server" in sys.argv and os.environ.get("MEMPROBE_DIR"):
    def _start_watching():
        import threading
        threading.Thread(target=_watch, args=(os.environ["MEMPROBE_DIR"],), name="heap-census",
                         daemon=True).start()
    os.register_at_fork(after_in_child=_start_watching)
