"""`shepherd-ha server` as processes: a supervisor, a store process, API workers.

Kill each of them and watch the replica: a dead worker is replaced and the API
serves writes and watches again; a dead store process takes readiness down with a
reason and comes back from its journal; a SIGKILLed server leaves no process
behind and its ports free.
"""
import os
import signal

from shepherd_ha.cli import supervisor
from shepherd_ha.cli.local_cluster import port_free
from tests import waiting

from .helpers import Watch, call, expect, pod, unique

DEADLINE = 30.0


def until(predicate, timeout=DEADLINE, what="condition"):
    return waiting.wait_for(what, predicate, timeout, interval=0.02)


def status(url):
    try:
        resp = call("GET", url + "/shepherd/v1/replica", timeout=3.0)
        return resp.json() if resp.status_code == 200 else None
    except Exception:
        return None


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as fh:
            return [int(p) for p in fh.read().split()]
    except OSError:
        return []


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ready(url):
    try:
        return call("GET", url + "/readyz", timeout=3.0).status_code == 200
    except Exception:
        return False


def may_lower_niceness():
    """Whether a process here may lower its niceness (root with CAP_SYS_NICE, or RLIMIT_NICE)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.nice(-1)
            os._exit(0)
        except OSError:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def create_pod(url, name):
    return expect(call("POST", url + "/api/v1/namespaces/default/pods", json=pod(name)), 201)


def test_killed_api_worker_is_replaced_and_serves_writes_and_watches(make_cluster):
    cluster = make_cluster(1)
    url = cluster.url("r1")
    before = status(url)
    os.kill(before["apiPid"], signal.SIGKILL)
    after = until(lambda: ready(url) and status(url), what="a new API worker ready")
    assert after["apiPid"] != before["apiPid"] and after["storePid"] == before["storePid"]
    assert after["term"] == before["term"]            # the store, and Raft, never noticed
    # Raft heartbeats first on a busy machine: the store above, the API worker (restarted too) below.
    server_nice = os.getpriority(os.PRIO_PROCESS, cluster.lc.pid("r1"))
    store_nice = os.getpriority(os.PRIO_PROCESS, after["storePid"])
    expected_store = server_nice + supervisor.NICENESS["store"] if may_lower_niceness() else server_nice
    assert store_nice == max(-20, expected_store)
    assert os.getpriority(os.PRIO_PROCESS, after["apiPid"]) == min(19, server_nice + supervisor.NICENESS["api"])
    created = create_pod(url, unique("after-worker-kill"))
    rv = created["metadata"]["resourceVersion"]
    watch = Watch(url, "/api/v1/namespaces/default/pods", resource_version=rv, timeout=20)
    try:
        name = unique("watched")
        create_pod(url, name)
        assert watch.wait_for(lambda events: any(e.get("object", {}).get("metadata", {}).get("name") == name
                                                 for e in events), 15)
    finally:
        watch.close()
    until(lambda: (status(url) or {}).get("controllers", {}).get("active"), what="controllers active again")


def test_store_process_death_takes_readiness_down_and_it_comes_back(make_cluster):
    cluster = make_cluster(1)
    url = cluster.url("r1")
    name = unique("before-store-kill")
    create_pod(url, name)
    before = status(url)
    os.kill(before["storePid"], signal.SIGKILL)
    reasons = set()

    def down():
        try:
            resp = call("GET", url + "/readyz", timeout=3.0)
        except Exception:
            return False
        if resp.status_code == 503:
            reasons.add(resp.text.strip())
            return True
        return False
    until(down, 10, "readiness down")
    assert any("store process unreachable" in r for r in reasons), reasons
    after = until(lambda: ready(url) and status(url), what="the store back")
    assert after["storePid"] != before["storePid"] and after["apiPid"] == before["apiPid"]
    expect(call("GET", url + "/api/v1/namespaces/default/pods/" + name), 200)   # recovered from its journal
    create_pod(url, unique("after-store-kill"))


def test_sigkilled_server_leaves_no_process_and_frees_its_ports(make_cluster):
    cluster = make_cluster(1)
    url = cluster.url("r1")
    spec = cluster.lc.replica("r1")
    supervisor = cluster.lc.pid("r1")
    kids = children(supervisor)
    assert len(kids) == 2, kids                       # the store and one API worker
    cluster.kill("r1")
    until(lambda: not any(alive(p) for p in kids), 10, "every child gone")
    api_port = int(url.rsplit(":", 1)[1])
    raft_port = int(spec["raft"].rsplit(":", 1)[1])
    until(lambda: port_free(api_port) and port_free(raft_port), 5, "ports free")


def test_two_api_workers_share_one_port_and_read_each_others_writes(make_cluster):
    cluster = make_cluster(1, server_options={"api_workers": 2})
    url = cluster.url("r1")
    until(lambda: len(children(cluster.lc.pid("r1"))) == 3, 10, "store + 2 workers")
    seen = set()
    for _ in range(200):
        me = status(url)
        if me:
            seen.add(me["apiPid"])
        if len(seen) == 2:
            break
    assert len(seen) == 2, "only worker(s) %s answered" % seen
    for i in range(10):                               # each write answered by one worker, read on any
        name = unique("two-workers-%d" % i)
        create_pod(url, name)
        expect(call("GET", url + "/api/v1/namespaces/default/pods/" + name), 200)


def test_read_after_write_on_another_replica(cluster):
    leader = cluster.leader()
    other = cluster.followers(leader)[0]
    for i in range(5):
        name = unique("lin-%d" % i)
        create_pod(cluster.url(leader if i % 2 else other), name)
        got = expect(call("GET", cluster.url(other if i % 2 else leader) + "/api/v1/namespaces/default/pods/"
                          + name), 200)
        assert got["metadata"]["name"] == name
