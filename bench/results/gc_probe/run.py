"""How the gc-*.log files here were made (an experiment, not a benchmark): start a
3-replica cluster whose processes load sitecustomize.py from this directory (it logs
every collection over 5 ms and every generation-2 one, with its wall-clock duration),
then run bench_writes.py against it (32 clients, 3 runs, API only). The server code
is not changed: only PYTHONPATH is. Usage: python bench/results/gc_probe/run.py OUTDIR
"""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, BENCH)
out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "gcprobe-logs")
os.makedirs(out, exist_ok=True)
os.environ["PYTHONPATH"] = HERE
os.environ["GCPROBE_DIR"] = out
import common  # noqa: E402

with common.BenchCluster() as bc:
    del os.environ["PYTHONPATH"]
    print(bc.pids(), flush=True)
    subprocess.run([sys.executable, os.path.join(BENCH, "bench_writes.py"), "--servers", ",".join(bc.urls()),
                    "--clients", "32", "--repeat", "3", "--no-raw", "--quiet-wait", "20"], timeout=900)
