# Experiment only: log every garbage collection longer than 5 ms (generation, duration).
import gc, os, time
_out = os.environ.get("GCPROBE_DIR")
if _out:
    _f = open(os.path.join(_out, "gc-%d.log" % os.getpid()), "a", buffering=1)
    _start = [0.0]
    def _cb(phase, info):
        if phase == "start":
            _start[0] = time.perf_counter()
        else:
            d = time.perf_counter() - _start[0]
            if d > 0.005 or info["generation"] == 2:
                _f.write("%.3f gen%d %.1fms collected=%d\n" % (time.time(), info["generation"], d * 1000, info["collected"]))
    gc.callbacks.append(_cb)
