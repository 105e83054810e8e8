"""Each role's CPU priority (cli/supervisor.py NICENESS): the store first where it may
be, and a child the store forks (PySyncObj's dump) back at the server's niceness."""
import os

from shepherd_ha.cli import supervisor


def _in_child(body):
    """Run body() in a forked child; its return value (a small int tuple) comes back."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.write(write, repr(body()).encode())
        finally:
            os._exit(0)
    os.close(write)
    data = b""
    while True:
        chunk = os.read(read, 4096)
        if not chunk:
            break
        data += chunk
    os.close(read)
    os.waitpid(pid, 0)
    return eval(data.decode())           # a tuple of ints we wrote ourselves


def _may_lower():
    def probe():
        try:
            os.nice(-1)
            return (1,)
        except OSError:
            return (0,)
    return _in_child(probe) == (1,)


def test_the_store_goes_first_and_its_dump_child_does_not():
    base = os.getpriority(os.PRIO_PROCESS, 0)

    def store():
        supervisor._set_priority("store")
        mine = os.getpriority(os.PRIO_PROCESS, 0)
        dump_child = _in_child(lambda: (os.getpriority(os.PRIO_PROCESS, 0),))[0]
        return (mine, dump_child)
    mine, dump_child = _in_child(store)
    if _may_lower():
        assert mine == max(-20, base + supervisor.NICENESS["store"])
    else:
        assert mine == base, "not permitted: the store keeps the server's niceness"
    assert dump_child == base, "the dump child pickles at the server's niceness, not the store's"


def test_the_api_runs_after_the_store():
    base = os.getpriority(os.PRIO_PROCESS, 0)

    def api():
        supervisor._set_priority("api")
        return (os.getpriority(os.PRIO_PROCESS, 0),)
    assert _in_child(api) == (min(19, base + supervisor.NICENESS["api"]),)
