"""The Docker runtime against the real engine: create/start/inspect/signal/remove,
exec (with timeouts), logs, events and Docker's own error messages."""
import signal
import socket
import threading
import time
import uuid

import pytest

from agent.runtime.base import ContainerConfig, ContainerGone, CreateError, ExecTimeout, ImagePullError, PortBinding
from agent.runtime.docker_runtime import DockerRuntime

from .helpers import IMAGE, wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture
def runtime(docker_engine):
    node = "e2e-rt-%s" % uuid.uuid4().hex[:6]
    rt = DockerRuntime()
    rt.node = node
    yield rt
    for c in docker_engine.api.containers(all=True, filters={"label": "shepherd.io/node=%s" % node}):
        docker_engine.api.remove_container(c["Id"], force=True)
    rt.close()


def config(rt, name, command, **kw):
    return ContainerConfig(name="%s_%s" % (rt.node, name), image=IMAGE, command=command,
                           labels={"shepherd.io/node": rt.node, "shepherd.io/pod-name": name}, **kw)


def test_lifecycle_exec_and_logs(runtime):
    assert runtime.version().startswith("docker://")
    assert runtime.image_present(IMAGE) and not runtime.image_present("shepherd/nope:0")
    cid = runtime.create(config(runtime, "a", ["sh", "-c", "echo one; echo two >&2; sleep 3600"],
                                env=["X=42"]))
    runtime.start(cid)
    info = runtime.inspect(cid)
    assert info.running and info.ip.count(".") == 3 and info.started_at.endswith("Z")
    assert info.labels["shepherd.io/node"] == runtime.node
    [row] = runtime.list({"shepherd.io/node": runtime.node})
    assert row.id == cid and row.state == "running" and row.created > 0
    assert [c["id"] for c in runtime.list_containers({"shepherd.io/node": runtime.node})] == [cid]
    code, out = runtime.exec(cid, ["sh", "-c", "echo $X; exit 7"], timeout=5)
    assert code == 7 and out.strip() == b"42"
    started = time.monotonic()
    with pytest.raises(ExecTimeout):
        runtime.exec(cid, ["sleep", "5"], timeout=0.5)
    assert time.monotonic() - started < 3
    wait_until(lambda: b"two" in b"".join(runtime.logs(cid)), 5, "logs")
    assert b"".join(runtime.logs(cid, tail=1)).strip() in (b"one", b"two")
    runtime.signal(cid, signal.SIGKILL)
    wait_until(lambda: not runtime.inspect(cid).running, 5, "the container to die")
    info = runtime.inspect(cid)
    assert info.state == "exited" and info.exit_code == 137 and info.finished_at
    runtime.signal(cid, signal.SIGTERM)          # not running: no error
    runtime.remove(cid)
    runtime.remove(cid)                          # gone: no error
    assert runtime.inspect(cid) is None
    with pytest.raises(ContainerGone):
        runtime.exec(cid, ["true"], timeout=1)


def test_follow_logs_and_events(runtime):
    stop = threading.Event()
    seen = []

    def watch():
        for cid, action, labels in runtime.events({"shepherd.io/node": runtime.node}, stop):
            seen.append((cid, action, labels.get("shepherd.io/pod-name")))
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    time.sleep(0.3)
    cid = runtime.create(config(runtime, "b", ["sh", "-c", "for i in 1 2 3; do echo line$i; sleep 0.2; done"]))
    runtime.start(cid)
    stream = runtime.logs(cid, follow=True)
    text = b"".join(stream)             # ends when the container exits
    assert text.split() == [b"line1", b"line2", b"line3"]
    wait_until(lambda: (cid, "die", "b") in seen, 5, "a die event")
    assert (cid, "start", "b") in seen
    stop.set()
    t.join(3)
    assert not t.is_alive()


def test_docker_errors_are_kept(runtime):
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    port = blocker.getsockname()[1]
    try:
        cid = runtime.create(config(runtime, "c", ["sleep", "60"],
                                    ports=[PortBinding(80, "TCP", port, "127.0.0.1")]))
        with pytest.raises(CreateError) as err:
            runtime.start(cid)
        assert str(port) in str(err.value)
    finally:
        blocker.close()
    with pytest.raises(CreateError, match="No such image|not found|no such image"):
        runtime.create(ContainerConfig(name="%s_d" % runtime.node, image="shepherd/nope:0",
                                       labels={"shepherd.io/node": runtime.node}))
    with pytest.raises(ImagePullError):
        runtime.pull_image("shepherd/nope:0")


def test_two_clusters_on_one_engine_see_only_their_own_containers(runtime, docker_engine):
    """Both have a node of the same name: neither lists (so neither adopts nor removes) the
    other's containers, nor hears of their events; a container made before the cluster
    label (none on it) is everyone's, as it was."""
    a = DockerRuntime(cluster_id="cluster-a")
    b = DockerRuntime(cluster_id="cluster-b")
    try:
        mine = a.create(config(runtime, "mine", ["sleep", "3600"]))
        theirs = b.create(config(runtime, "theirs", ["sleep", "3600"]))
        legacy = runtime.create(config(runtime, "legacy", ["sleep", "3600"]))     # no cluster id
        node = {"shepherd.io/node": runtime.node}
        assert docker_engine.api.inspect_container(mine)["Config"]["Labels"]["shepherd.io/cluster-id"] == "cluster-a"
        assert {c.id for c in a.list(node)} == {mine, legacy}
        assert {c.id for c in b.list(node)} == {theirs, legacy}
        assert {c.id for c in runtime.list(node)} == {mine, theirs, legacy}
        stop = threading.Event()
        heard = []

        def listen():
            for cid, action, _ in a.events(node, stop):
                heard.append(cid)
        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        time.sleep(1.0)                      # the event stream is open
        b.start(theirs)
        a.start(mine)
        wait_until(lambda: mine in heard, 20, "the start event of cluster a's container")
        stop.set()
        listener.join(10)
        assert theirs not in heard, heard
    finally:
        a.close()
        b.close()
