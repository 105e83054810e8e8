"""One glibc malloc arena for the store process.

glibc gives threads that allocate at once arenas of their own (up to 8 per core), and
what is freed into an arena is reused only for allocations made from it. The store
process's threads take turns under the GIL, so more arenas buy it nothing, and since
its dumps are written by a thread (pysyncobj_overrides/dump_writer.py) they cost it
memory: while dumps were pickled with the pickler's memo, a store of 30,000 pods kept
~17 MB more after its second dump (bench/bench_dump_memory.py; one arena: the growth of
the data alone), and in the 1,000-node fleet the store processes grew from ~150 to
210-226 MB (docs/benchmarks.md, run AB). Without the memo the difference is ~0.2 MB;
the one arena stays, at no cost, for whatever else a dump thread allocates. The store
process limits itself to one arena before its threads start.
API workers keep glibc's default (run U: `MALLOC_ARENA_MAX=2` changed nothing there).
"""
import ctypes
import logging

log = logging.getLogger(__name__)

M_ARENA_MAX = -8        # glibc's malloc.h


def use_one_arena():
    """Limit this process to glibc's main arena for threads started from now on; False
    where the C library has no mallopt (not glibc) or refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        log.info("no glibc mallopt: the store process keeps its allocator's arenas")
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if mallopt(M_ARENA_MAX, 1) != 1:
        log.warning("mallopt(M_ARENA_MAX, 1) refused: the store process keeps glibc's arenas (more memory "
                    "after its dumps)")
        return False
    return True
