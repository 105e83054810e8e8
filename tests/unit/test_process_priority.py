"""Each role's CPU priority (cli/supervisor.py NICENESS): the store first where it may
be, and the thread that writes PySyncObj's dumps at the store's priority (lowered, it
would hold the GIL the Raft tick waits for).

Each case runs in a fresh interpreter: the niceness it sets must not stay with the test run."""
import json
import os
import subprocess
import sys

from shepherd_ha.cli import supervisor

PROBE = r'''
import json, os, sys
from shepherd_ha.cli import supervisor

def niceness_of_a_child():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.write(write, str(os.getpriority(os.PRIO_PROCESS, 0)).encode())
        os._exit(0)
    os.close(write)
    value = int(os.read(read, 64))
    os.waitpid(pid, 0)
    return value

def may_lower():
    pid = os.fork()
    if pid == 0:
        try:
            os.nice(-1)
            os._exit(0)
        except OSError:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0

def niceness_of_the_dump_thread():
    import tempfile, threading, time
    from pysyncobj.config import SERIALIZER_STATE
    from shepherd_ha.store.fsm import StoreFSM
    from shepherd_ha.store.pysyncobj_overrides import dump_writer
    seen, real = [], dump_writer.write_pickle
    def recording(obj, file):
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        real(obj, file)
    dump_writer.write_pickle = recording
    writer = dump_writer.DumpWriter(os.path.join(tempfile.mkdtemp(), "raft.dump"), 4096, True, None, None, None)
    writer.serialize(([{}, {"fsm": StoreFSM()}], (b"", 2, 0), (b"", 1, 0), set()), 2)
    while writer.checkSerializing()[0] == SERIALIZER_STATE.SERIALIZING:
        time.sleep(0.01)
    return seen[0]

permitted = may_lower()
supervisor._set_priority(sys.argv[1])
print(json.dumps({"permitted": permitted, "mine": os.getpriority(os.PRIO_PROCESS, 0),
                  "child": niceness_of_a_child(), "dump": niceness_of_the_dump_thread()}))
'''


def run_as(role):
    done = subprocess.run([sys.executable, "-c", PROBE, role], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_store_goes_first_and_its_dump_thread_with_it():
    base = os.getpriority(os.PRIO_PROCESS, 0)
    seen = run_as("store")
    if seen["permitted"]:
        assert seen["mine"] == max(-20, base + supervisor.NICENESS["store"])
    else:
        assert seen["mine"] == base, "not permitted: the store keeps the server's niceness"
    assert seen["dump"] == seen["mine"], "the dump thread holds the GIL the tick waits for: never after the API"
    assert seen["child"] == seen["mine"], "a child of the store keeps its niceness"


def test_the_api_runs_after_the_store():
    base = os.getpriority(os.PRIO_PROCESS, 0)
    seen = run_as("api")
    assert seen["mine"] == min(19, base + supervisor.NICENESS["api"])
    assert seen["child"] == seen["mine"]
    assert seen["dump"] == seen["mine"]
