"""What PySyncObj's serializer module calls as `gzip` (swapped in by __init__): its
dumps compressed at level 1 instead of gzip's default 9.

A dump (then written by a forked child) spent more CPU compressing than pickling: on a
real dump of a 1,000-node fleet (3,850 pods, 3,878 events, 1,000 leases; 4.0 MB
compressed) level 9 took 0.90 s of CPU, level 1 0.40 s, for a file 8 % bigger (docs/benchmarks.md, run U). The dump
shares two cores with the replicas it belongs to, and renewals fail more while dumps are
written, so its CPU time is the cost to cut. Any level reads back the same way.
"""
import gzip

DUMP_COMPRESSLEVEL = 1


def GzipFile(*args, **kwargs):   # noqa: N802 (the name PySyncObj calls)
    if "compresslevel" not in kwargs and len(args) < 3:
        kwargs["compresslevel"] = DUMP_COMPRESSLEVEL
    return gzip.GzipFile(*args, **kwargs)
