"""End to end: ConfigMaps, volumes and Events on a real 3-replica cluster, real agent
processes and the real Docker engine (shepherd/busybox:1 only; fixtures of
tests/e2e/conftest.py: Docker missing is a failure, never a skip).

- a pod reads an env var from a ConfigMap (configMapKeyRef and envFrom) and files
  from a configMap volume (whole and one key by subPath), read-only; a change of the
  ConfigMap reaches the running container's volume; its volume directory under the
  agent's --state-dir goes when the pod is deleted;
- a missing ConfigMap keeps the container waiting (CreateContainerConfigError) until
  it is created;
- two containers of one pod share an emptyDir;
- a started pod gets Pulled/Created/Started Events and a crash-looping one BackOff
  with a growing count, all shown by `sheepctl describe pod`.
"""
import os
import uuid

from .helpers import IMAGE, NODE_LABEL, container_status, ctl, wait_until

WAIT = 40.0          # seconds for anything the agent or the controllers should do (busy machine)


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:6])


def busybox(script, name="main", **fields):
    c = {"name": name, "image": IMAGE, "imagePullPolicy": "Never", "command": ["sh", "-c", script]}
    c.update(fields)
    return c


def start_node(agents, tmp_path, suffix, extra=()):
    state = tmp_path / ("state-" + suffix)
    return agents.start(suffix, extra=["--state-dir", str(state)] + list(extra)), state


def create_configmap(client, name, data):
    client.create("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                 "data": data}, "default")


def all_running(pod):
    st = pod.get("status") or {}
    statuses = st.get("containerStatuses") or []
    return st.get("phase") == "Running" and statuses and all("running" in (cs.get("state") or {})
                                                             for cs in statuses)


def exec_in(agents, node, pod_name, script, container="main"):
    """(exit code, output) of a shell command in one of our pod's containers."""
    found = agents.engine.api.containers(filters={"label": [
        "%s=%s" % (NODE_LABEL, node), "shepherd.io/pod-name=%s" % pod_name,
        "shepherd.io/container-name=%s" % container]})
    assert found, "no running container %s of pod %s on node %s" % (container, pod_name, node)
    exec_id = agents.engine.api.exec_create(found[0]["Id"], ["sh", "-c", script])["Id"]
    output = agents.engine.api.exec_start(exec_id).decode(errors="replace")
    return agents.engine.api.exec_inspect(exec_id)["ExitCode"], output


def pod_events(client, name):
    items = (client.list("events", "default", field_selector="involvedObject.name=%s" % name) or {}).get("items")
    return {e["reason"]: e for e in items or [] if (e.get("source") or {}).get("component") == "shepherd-agent"}


def test_a_pod_reads_a_configmap_from_env_and_from_a_volume(agents, e2e_cluster, tmp_path):
    node, state = start_node(agents, tmp_path, "cm", ["--configmap-refresh-interval", "1"])
    client = agents.client
    cm = unique("cfg")
    create_configmap(client, cm, {"greeting": "hello from a configmap", "app.conf": "mode=fast\n",
                                  "level": "3"})
    name = unique("reader")
    agents.create_pod(name, [busybox(
        'echo "GREETING=$GREETING"; echo "LEVEL=$CFG_level"; cat /etc/app/app.conf; cat /etc/level; '
        "echo; echo done; exec sleep 3600",
        env=[{"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "greeting"}}}],
        envFrom=[{"configMapRef": {"name": cm}, "prefix": "CFG_"}],
        volumeMounts=[{"name": "conf", "mountPath": "/etc/app"},
                      {"name": "conf", "mountPath": "/etc/level", "subPath": "level"}])],
        node=node, terminationGracePeriodSeconds=1,
        volumes=[{"name": "conf", "configMap": {"name": cm}}])
    pod = agents.wait_pod(name, all_running, WAIT, "running")
    uid = pod["metadata"]["uid"]
    logs = wait_until(lambda: (lambda out: out if "done" in out else None)(
        ctl(e2e_cluster, tmp_path, "logs", name).stdout), WAIT, "the ConfigMap's data in the logs of %s" % name,
        agents.log_tails)
    assert logs.splitlines() == ["GREETING=hello from a configmap", "LEVEL=3", "mode=fast", "3", "done"], logs
    code, out = exec_in(agents, node, name, "touch /etc/app/new")
    assert code != 0 and "Read-only file system" in out, out        # configMap volumes are read-only
    volume_dir = state / "pods" / uid / "volumes" / "conf"
    assert sorted(os.listdir(volume_dir)) == ["app.conf", "greeting", "level"]

    # the running container sees the ConfigMap change in its volume (not in its env)
    client.patch("configmaps", cm, {"data": {"app.conf": "mode=safe\n"}}, namespace="default")
    wait_until(lambda: exec_in(agents, node, name, "cat /etc/app/app.conf") == (0, "mode=safe\n"), WAIT,
               "the new app.conf in the running container", agents.log_tails)
    assert exec_in(agents, node, name, 'echo "$GREETING"') == (0, "hello from a configmap\n")

    agents.delete_pod(name, grace=1)
    agents.wait_gone(name, WAIT)
    wait_until(lambda: not (state / "pods" / uid).exists(), WAIT, "the volume directory of %s removed" % name,
               agents.log_tails)


def test_a_missing_configmap_keeps_the_container_waiting_until_it_exists(agents, tmp_path):
    node, _ = start_node(agents, tmp_path, "wait")
    client = agents.client
    cm = unique("later")
    name = unique("waiter")
    agents.create_pod(name, [busybox(
        "exec sleep 3600",
        env=[{"name": "X", "valueFrom": {"configMapKeyRef": {"name": cm, "key": "x"}}}])],
        node=node, terminationGracePeriodSeconds=1)

    def config_error(pod):
        waiting = ((container_status(pod) or {}).get("state") or {}).get("waiting") or {}
        return waiting.get("reason") == "CreateContainerConfigError" and cm in (waiting.get("message") or "")
    pod = agents.wait_pod(name, config_error, WAIT, "waiting with CreateContainerConfigError")
    assert pod["status"]["phase"] == "Pending"
    assert 'configmap "%s" not found in namespace "default"' % cm in \
        container_status(pod)["state"]["waiting"]["message"]
    failed = wait_until(lambda: pod_events(client, name).get("Failed"), WAIT, "a Failed event for %s" % name)
    assert failed["type"] == "Warning" and cm in failed["message"]
    create_configmap(client, cm, {"x": "now"})
    agents.wait_pod(name, all_running, WAIT + 60, "running once the ConfigMap exists")   # retries back off
    code, out = exec_in(agents, node, name, 'echo "X=$X"')
    assert code == 0 and out.strip() == "X=now"


def test_two_containers_share_an_empty_dir(agents, e2e_cluster, tmp_path):
    node, state = start_node(agents, tmp_path, "share")
    name = unique("share")
    agents.create_pod(name, [
        busybox("echo written by the writer > /data/msg; exec sleep 3600", name="writer",
                volumeMounts=[{"name": "scratch", "mountPath": "/data"}]),
        busybox("while [ ! -f /shared/msg ]; do sleep 0.2; done; cat /shared/msg; exec sleep 3600", name="reader",
                volumeMounts=[{"name": "scratch", "mountPath": "/shared"}])],
        node=node, terminationGracePeriodSeconds=1, volumes=[{"name": "scratch", "emptyDir": {}}])
    agents.wait_pod(name, all_running, WAIT, "both containers running")
    out = wait_until(lambda: (lambda r: r if "written by the writer" in r else None)(
        ctl(e2e_cluster, tmp_path, "logs", name, "-c", "reader").stdout), WAIT,
        "the writer's file in the reader's logs", agents.log_tails)
    assert out == "written by the writer\n"
    code, out = exec_in(agents, node, name, "echo back > /shared/reply", container="reader")
    assert code == 0, out
    code, out = exec_in(agents, node, name, "cat /data/reply", container="writer")
    assert (code, out.strip()) == (0, "back")


def test_started_and_crash_looping_pods_get_events(agents, e2e_cluster, tmp_path):
    node, _ = start_node(agents, tmp_path, "ev")
    client = agents.client
    good, crash = unique("good"), unique("crash")
    agents.create_pod(good, [busybox("exec sleep 3600")], node=node, terminationGracePeriodSeconds=1)
    agents.create_pod(crash, [busybox("echo crashing; exit 1")], node=node, terminationGracePeriodSeconds=1)
    agents.wait_pod(good, all_running, WAIT, "running")

    def started_events():
        evs = pod_events(client, good)
        return evs if {"Pulled", "Created", "Started"} <= set(evs) else None
    evs = wait_until(started_events, WAIT, "Pulled, Created and Started events of %s" % good, agents.log_tails)
    started = evs["Started"]
    pod = agents.pod(good)
    assert started["involvedObject"]["uid"] == pod["metadata"]["uid"]
    assert started["involvedObject"]["kind"] == "Pod" and started["type"] == "Normal"
    assert started["source"] == {"component": "shepherd-agent", "host": node}
    assert started["message"] == "Started container main"
    assert evs["Pulled"]["message"] == 'Container image "%s" already present on machine' % IMAGE

    def backing_off():
        ev = pod_events(client, crash).get("BackOff")
        return ev if ev and ev["count"] >= 2 else None
    backoff = wait_until(backing_off, WAIT + 30, "a BackOff event of %s repeated" % crash, agents.log_tails)
    assert backoff["type"] == "Warning" and "Back-off restarting failed container main" in backoff["message"]
    assert backoff["lastTimestamp"] >= backoff["firstTimestamp"]
    # one object per (pod, reason, message): the repeats are its count
    items = (client.list("events", "default", field_selector="involvedObject.name=%s" % crash) or {})["items"]
    assert len([e for e in items if e["reason"] == "BackOff"]) == 1
    assert [e for e in items if e["reason"] == "Started"][0]["count"] >= 2

    r = ctl(e2e_cluster, tmp_path, "describe", "pod", crash)
    assert r.returncode == 0, r.stderr
    events_part = r.stdout.split("Events:", 1)[1]
    assert "BackOff" in events_part and "Warning" in events_part and "shepherd-agent" in events_part, r.stdout
    assert "Started" in events_part

    # deleting posts Killing
    agents.delete_pod(good, grace=1)
    wait_until(lambda: pod_events(client, good).get("Killing"), WAIT, "a Killing event of %s" % good,
               agents.log_tails)
    agents.wait_gone(good, WAIT)
