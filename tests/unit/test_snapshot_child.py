"""A child forked in a replica process (PySyncObj's snapshot writer) dies with the replica."""
import os
import signal
import subprocess
import sys
import textwrap
import time

# A stand-in replica: installs the hook (or not), forks from a thread the way PySyncObj's tick
# thread does, the child "writes a dump" for 60 s; the parent prints the child's PID and waits.
SCRIPT = textwrap.dedent("""
    import os, sys, threading, time
    from shepherd_ha.store.pysyncobj_overrides import snapshot_child
    if sys.argv[1] == "install":
        snapshot_child.install()
    def tick():
        pid = os.fork()
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        print(pid, flush=True)
        time.sleep(120)
    threading.Thread(target=tick, daemon=True).start()
    time.sleep(120)
""")


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _child_after_parent_killed(mode, wait):
    parent = subprocess.Popen([sys.executable, "-c", SCRIPT, mode], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = int(parent.stdout.readline())
        time.sleep(0.2)                      # the child is past its at-fork hook
        assert _alive(child)
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and _alive(child):
            time.sleep(0.05)
        return _alive(child)
    finally:
        if parent.poll() is None:
            parent.kill()
        if child and _alive(child):
            os.kill(child, signal.SIGKILL)   # ours: never leave it behind


def test_forked_child_dies_with_the_process_that_installed_the_hook():
    assert _child_after_parent_killed("install", wait=10) is False


def test_without_the_hook_the_orphan_lives_on():
    # The control: what the hook prevents (the child would write its stale dump 60 s later).
    assert _child_after_parent_killed("plain", wait=2) is True


def test_every_raft_node_installs_the_hook(tmp_path):
    from shepherd_ha.store.pysyncobj_overrides import snapshot_child
    from shepherd_ha.store.raft_node import RaftNode, RaftSettings
    from shepherd_ha.cli.local_cluster import find_base_port
    port = find_base_port(1)
    node = RaftNode(RaftSettings(self_address="127.0.0.1:%d" % (port + 100), peer_addresses=[],
                                 data_dir=str(tmp_path), password="x", salt="00112233445566778899aabbccddeeff"), lambda changes: None, lambda: None)
    try:
        assert snapshot_child._installed_for == os.getpid()
    finally:
        node.syncobj.destroy()
