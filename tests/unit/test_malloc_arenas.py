"""The store process's one malloc arena (store/malloc_arenas.py): a thread's allocations
come from glibc's main arena, where without it the thread gets an arena of its own.
Each case runs in a fresh interpreter: the setting is for the whole process."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = r'''
import ctypes, json, os, sys, tempfile, threading
from shepherd_ha.store import malloc_arenas
limited = malloc_arenas.use_one_arena() if sys.argv[1] == "one" else None
kept = []
def allocate():                 # below the mmap threshold (128 KiB): from an arena
    kept.extend(bytearray(100000) for _ in range(50))
thread = threading.Thread(target=allocate)
thread.start()
thread.join()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
libc.fclose.argtypes = (ctypes.c_void_p,)
path = os.path.join(tempfile.mkdtemp(), "malloc_info.xml")
stream = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, stream)
libc.fclose(stream)
print(json.dumps({"limited": limited, "heaps": open(path).read().count("<heap nr=")}))
'''


def arenas_after_a_thread_allocates(mode):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_ARENA")}    # glibc's default
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=60,
                          cwd=ROOT, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_thread_allocates_from_the_main_arena_once_limited():
    seen = arenas_after_a_thread_allocates("one")
    assert seen["limited"] is True
    assert seen["heaps"] == 1, "one arena: the thread's 5 MB came from the main arena"


def test_without_the_limit_a_thread_gets_its_own_arena():
    # What the limit prevents (and what makes the first test able to fail).
    assert arenas_after_a_thread_allocates("default")["heaps"] >= 2
