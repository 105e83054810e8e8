"""Keep the cyclic garbage collector away from the store, so it never stalls Raft.

Stored objects live long and hold no reference cycles (plain dicts, freed by
reference counting), yet every full collection walks all of them: with
10,000-30,000 pods that was a 117-232 ms pause of every thread, the Raft tick
included (docs/benchmarks.md, "Garbage collection"). So:

- a whole store loaded at once (the dump on start, a leader's snapshot on a
  lagging follower) is built with the collector off and then frozen: moved to
  the permanent generation, which collections never walk;
- what the store process accumulates afterwards is frozen periodically, after a young
  collection has freed the young cycles (an API worker does not: configure_process);
- young collections run every 20,000 allocations instead of 700, and every second
  one also collects the middle generation (instead of every tenth), which keeps
  that generation, and its collections, small.
"""
import contextlib
import gc
import threading
import time

# Young collections every 20,000 allocations instead of 700: a create allocates
# hundreds of short-lived containers (JSON, pickles), so the default runs a young
# collection every few requests and an older one every few dozen, in the middle of
# them. Measured (docs/benchmarks.md, run F): 32-client p99 about 15 % lower in 6 of 6
# interleaved runs, same CPU per create; idle RSS unchanged.
# A middle-generation collection walks up to young x middle thresholds of objects:
# 200,000 with 20,000/10, the longest pause left once the store is frozen; 40,000 with
# 20,000/2. Measured (bench/bench_gc.py, 30,000 pods, 6 interleaved pairs): longest
# pause while the store grows 17-74 ms instead of 51-441 ms, less collector time in total.
THRESHOLDS = (20000, 2, 10)
FREEZE_PERIOD = 30.0

_pause_lock = threading.Lock()
# Objects frozen so far (those freed since are not subtracted). Counted as they are
# frozen, not with gc.get_freeze_count(): that walks the whole permanent generation with
# the GIL held (360 ms at 1.5 million objects on this machine), and the status call that
# reported it runs on every readiness probe (docs/benchmarks.md, "The store process's tick").
_frozen = 0
_pauses = 0          # bulk loads in progress (they overlap only with several replicas in one process)
_was_enabled = True


@contextlib.contextmanager
def bulk_load():
    """Build many long-lived objects with the collector off, then freeze them.

    Without this, loading 30,000 pods triggers full collections at every 25 % of
    growth, the last ones walking nearly the whole store. Nothing built by a load
    is cyclic garbage, so freezing it without a collection first loses nothing.
    """
    global _pauses, _was_enabled
    with _pause_lock:
        if _pauses == 0:
            _was_enabled = gc.isenabled()
        _pauses += 1
        gc.disable()
    try:
        yield
    finally:
        with _pause_lock:
            _pauses -= 1
            if _pauses == 0:
                _freeze()
                if _was_enabled:
                    gc.enable()


def _freeze():
    """gc.freeze(), counting what it moves (what the generations hold: no walk of the
    permanent generation)."""
    global _frozen
    _frozen += sum(len(gc.get_objects(generation)) for generation in range(3))
    gc.freeze()


def freeze_survivors():
    """Free the young cycles, then move everything that survived out of the collector's way."""
    gc.collect(1)
    _freeze()


def _freeze_periodically(period):
    while True:
        time.sleep(period)
        freeze_survivors()


def configure_process(period=FREEZE_PERIOD, freeze_periodically=True):
    """For a server process: thresholds and, with `freeze_periodically`, a daemon thread
    freezing every `period` s (returned).

    An API worker does not freeze periodically. Garbage in a cycle is never freed once
    frozen, and what is alive at a freeze dies later: its requests in flight (waitress's
    tasks and parsers, Flask's contexts, closures). A worker at 1,000 nodes kept
    3,000-25,000 such objects (0.5-2.5 MB) every 7-10 minutes, for good; sweeping the
    frozen objects now and then (unfreeze, collect, freeze) would walk the objects it
    inherited from the supervisor too, and un-share ~18 MB of their pages
    (docs/benchmarks.md, run V). Its full collections walk its own objects: ~40 ms at
    10,000 interned pods, ~70 ms at 30,000 on this machine. The store process left no
    such garbage, and its Raft tick must not share those pauses: it freezes."""
    gc.set_threshold(*THRESHOLDS)
    if not freeze_periodically:
        return None
    thread = threading.Thread(target=_freeze_periodically, args=(period,), name="gc-freeze", daemon=True)
    thread.start()
    return thread


def status():
    """For the replica report: objects the collector skips, and collections per generation."""
    return {"frozenObjects": _frozen, "threshold": list(gc.get_threshold()),
            "collections": [s["collections"] for s in gc.get_stats()]}
