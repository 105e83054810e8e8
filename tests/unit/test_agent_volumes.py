"""ConfigMaps and volumes in pods: validation (shepherd_ha/model/pod_validation.py),
env and volume resolution (agent/volumes.py), the Docker runtime's mounts, and the
pod manager waiting with CreateContainerConfigError until a ConfigMap exists."""
import os
import stat
import threading

import docker
import pytest

from agent import labels as L
from agent import volumes as V
from agent.pods import PodManager
from agent.runtime.base import ContainerConfig, Mount
from agent.runtime.docker_runtime import create_kwargs
from agent.runtime.hollow_runtime import HollowRuntime
from shepherd_ha.client import Client
from real_api import ApiServer, ApiStore
from shepherd_ha.model.validation import validate_object

NODE = "node-vol"


def pod_with(containers, volumes=None, name="app", uid=None, namespace="default"):
    spec = {"nodeName": NODE, "restartPolicy": "Always", "terminationGracePeriodSeconds": 0,
            "containers": containers}
    if volumes is not None:
        spec["volumes"] = volumes
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": uid or "uid-" + name},
            "spec": spec}


def causes(pod):
    return {(c.field, c.message) for c in validate_object("pods", pod)}


def fields(pod):
    return {f for f, _ in causes(pod)}


def message(pod, field):
    return " / ".join(m for f, m in causes(pod) if f == field)


# ---- validation ----

def test_a_pod_with_every_supported_volume_and_reference_is_valid():
    pod = pod_with(
        [{"name": "main", "image": "busybox",
          "env": [{"name": "A", "value": "1"},
                  {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "b.key", "optional": True}}}],
          "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
          "volumeMounts": [{"name": "conf", "mountPath": "/etc/app", "readOnly": True},
                           {"name": "scratch", "mountPath": "/scratch", "subPath": "a/b"},
                           {"name": "logs", "mountPath": "/var/log/app"}]}],
        [{"name": "conf", "configMap": {"name": "cfg", "items": [{"key": "b.key", "path": "conf/b.txt"}],
                                        "optional": False, "defaultMode": 0o644}},
         {"name": "scratch", "emptyDir": {}},
         {"name": "logs", "hostPath": {"path": "/var/log/app", "type": "DirectoryOrCreate"}}])
    assert causes(pod) == set()


@pytest.mark.parametrize("volumes,mounts,field,words", [
    ([{"name": "a", "emptyDir": {}}], [{"name": "b", "mountPath": "/x"}],
     "spec.containers[0].volumeMounts[0].name",
     "is not a volume of this pod (spec.volumes: a): add it to spec.volumes"),
    ([{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}], [],
     "spec.volumes[1].name", "duplicate volume name"),
    ([{"name": "a", "emptyDir": {}}], [{"name": "a", "mountPath": "x"}],
     "spec.containers[0].volumeMounts[0].mountPath", "must be an absolute path in the container"),
    ([{"name": "a", "emptyDir": {}, "hostPath": {"path": "/tmp"}}], [],
     "spec.volumes[0]", "has emptyDir and hostPath: a volume has exactly one source"),
    ([{"name": "a"}], [], "spec.volumes[0]", "needs a source: one of configMap, secret, emptyDir, hostPath"),
    ([{"name": "a", "nfs": {"server": "s"}}], [], "spec.volumes[0]",
     "nfs is not a supported volume source"),
    ([{"name": "a", "hostPath": {"path": "tmp"}}], [], "spec.volumes[0].hostPath.path",
     "must be an absolute path on the node"),
    ([{"name": "a", "hostPath": {"path": "/tmp", "type": "Socket"}}], [], "spec.volumes[0].hostPath.type",
     "is not supported: use , Directory, DirectoryOrCreate or File"),
    ([{"name": "a", "configMap": {}}], [], "spec.volumes[0].configMap.name", "is required"),
    ([{"name": "a", "configMap": {"name": "c", "items": [{"key": "k", "path": "../etc/passwd"}]}}], [],
     "spec.volumes[0].configMap.items[0].path", "must not contain '..'"),
    ([{"name": "a", "configMap": {"name": "c", "items": [{"key": "k", "path": "/abs"}]}}], [],
     "spec.volumes[0].configMap.items[0].path", "drop the leading '/'"),
    ([{"name": "a", "emptyDir": {}}], [{"name": "a", "mountPath": "/x", "subPath": "../up"}],
     "spec.containers[0].volumeMounts[0].subPath", "must not contain '..'"),
    ([{"name": "a", "emptyDir": {}}], [{"name": "a", "mountPath": "/x"}, {"name": "a", "mountPath": "/x/"}],
     "spec.containers[0].volumeMounts[1].mountPath", "is mounted twice in this container"),
    ([{"name": "a", "emptyDir": {"medium": "Memory"}}], [], "spec.volumes[0].emptyDir.medium", "is not supported"),
    ([{"name": "Bad_Name", "emptyDir": {}}], [], "spec.volumes[0].name", "is not a valid volume name"),
])
def test_bad_volumes_and_mounts_name_the_field_and_the_fix(volumes, mounts, field, words):
    pod = pod_with([{"name": "main", "image": "busybox", "volumeMounts": mounts}], volumes)
    assert words in message(pod, field), causes(pod)


@pytest.mark.parametrize("container,field,words", [
    ({"env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]},
     "spec.containers[0].env[0].valueFrom", "fieldRef is not supported: use configMapKeyRef"),
    ({"env": [{"name": "A", "value": "x", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]},
     "spec.containers[0].env[0].valueFrom", "may not be set with value"),
    ({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"key": "k"}}}]},
     "spec.containers[0].env[0].valueFrom.configMapKeyRef.name", "is required"),
    ({"env": [{"name": "A", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "a/b"}}}]},
     "spec.containers[0].env[0].valueFrom.configMapKeyRef.key", "is not a valid ConfigMap key"),
    ({"envFrom": [{"secretRef": {"name": "s"}, "configMapRef": {"name": "c"}}]}, "spec.containers[0].envFrom[0]",
     "has configMapRef and secretRef: use one per envFrom entry"),
    ({"envFrom": [{"configMapRef": {"name": "Not_A_Name"}}]}, "spec.containers[0].envFrom[0].configMapRef.name",
     "is not a valid ConfigMap name"),
    ({"envFrom": [{"configMapRef": {"name": "c", "optional": "yes"}}]},
     "spec.containers[0].envFrom[0].configMapRef.optional", "must be true or false"),
])
def test_bad_configmap_references_name_the_field_and_the_fix(container, field, words):
    pod = pod_with([dict({"name": "main", "image": "busybox"}, **container)])
    assert words in message(pod, field), causes(pod)


def test_deployment_templates_get_the_same_checks():
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
           "spec": {"replicas": 1, "selector": {"matchLabels": {"a": "b"}},
                    "template": {"metadata": {"labels": {"a": "b"}},
                                 "spec": {"containers": [{"name": "m", "image": "i",
                                                          "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}}}}
    assert "spec.template.spec.containers[0].volumeMounts[0].name" in {c.field for c in validate_object(
        "deployments", dep)}


# ---- env ----

def getter(configmaps):
    def get(namespace, name):
        return configmaps.get((namespace, name))
    return get


CMS = {("default", "cfg"): {"data": {"color": "blue", "size": "L"}},
       ("default", "other"): {"data": {"color": "red"}}}


def test_env_from_configmaps_with_prefix_and_overrides():
    c = {"name": "main", "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"},
                                     {"configMapRef": {"name": "gone", "optional": True}}],
         "env": [{"name": "CFG_size", "value": "XL"},
                 {"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "color"}}},
                 {"name": "MAYBE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "nope", "optional": True}}},
                 {"name": "EMPTY"}]}
    env = V.resolve_env(pod_with([c]), c, getter(CMS))
    assert env == ["CFG_color=blue", "CFG_size=XL", "COLOR=red", "EMPTY="]


def test_a_missing_configmap_or_key_says_which_and_the_fix():
    c = {"name": "main", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]}
    with pytest.raises(V.ConfigProblem) as err:
        V.resolve_env(pod_with([c], namespace="team"), c, getter(CMS))
    assert 'configmap "nope" not found in namespace "team"' in str(err.value)
    assert "env[0] X" in str(err.value) and "optional: true" in str(err.value)
    c = {"name": "main", "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "weight"}}}]}
    with pytest.raises(V.ConfigProblem) as err:
        V.resolve_env(pod_with([c]), c, getter(CMS))
    assert 'key "weight" not found in configmap "default/cfg"' in str(err.value)
    c = {"name": "main", "envFrom": [{"configMapRef": {"name": "nope"}}]}
    with pytest.raises(V.ConfigProblem, match='configmap "nope" not found'):
        V.resolve_env(pod_with([c]), c, getter(CMS))


# ---- volumes on disk ----

def test_configmap_emptydir_and_subpath_mounts(tmp_path):
    state = str(tmp_path / "state")
    cms = {("default", "cfg"): {"data": {"app.conf": "a=1\n", "extra": "x"}, "binaryData": {"bin": "AAEC"}}}
    c = {"name": "main", "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"},
                                          {"name": "one", "mountPath": "/etc/one.conf", "subPath": "app.conf"},
                                          {"name": "scratch", "mountPath": "/scratch"},
                                          {"name": "scratch", "mountPath": "/cache", "subPath": "cache",
                                           "readOnly": True}]}
    volumes = [{"name": "conf", "configMap": {"name": "cfg"}},
               {"name": "one", "configMap": {"name": "cfg", "items": [{"key": "app.conf", "path": "app.conf"}]}},
               {"name": "scratch", "emptyDir": {}}]
    pod = pod_with([c], volumes)
    mounts = V.prepare_mounts(pod, c, state, getter(cms))
    base = os.path.join(state, "pods", "uid-app", "volumes")
    assert mounts == [Mount(os.path.join(base, "conf"), "/etc/app", True),
                      Mount(os.path.join(base, "one", "app.conf"), "/etc/one.conf", True),
                      Mount(os.path.join(base, "scratch"), "/scratch", False),
                      Mount(os.path.join(base, "scratch", "cache"), "/cache", True)]
    assert sorted(os.listdir(os.path.join(base, "conf"))) == ["app.conf", "bin", "extra"]
    with open(os.path.join(base, "conf", "bin"), "rb") as fh:
        assert fh.read() == b"\x00\x01\x02"
    assert stat.S_IMODE(os.stat(os.path.join(base, "conf", "app.conf")).st_mode) == 0o644
    assert os.listdir(os.path.join(base, "one")) == ["app.conf"]
    assert os.path.isdir(os.path.join(base, "scratch", "cache"))
    # the next start sees the ConfigMap as it is then: changed values, removed keys gone
    with open(os.path.join(base, "scratch", "kept"), "w") as fh:
        fh.write("emptyDir content survives a container restart")
    cms[("default", "cfg")] = {"data": {"app.conf": "a=2\n"}}
    V.prepare_mounts(pod, c, state, getter(cms))
    assert os.listdir(os.path.join(base, "conf")) == ["app.conf"]
    with open(os.path.join(base, "conf", "app.conf")) as fh:
        assert fh.read() == "a=2\n"
    assert os.path.exists(os.path.join(base, "scratch", "kept"))
    V.remove_pod_dir(state, "uid-app")
    assert not os.path.exists(os.path.join(state, "pods", "uid-app"))


def test_missing_configmaps_in_volumes_and_optional_ones(tmp_path):
    state = str(tmp_path)
    c = {"name": "main", "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}]}
    pod = pod_with([c], [{"name": "conf", "configMap": {"name": "nope"}}])
    with pytest.raises(V.ConfigProblem) as err:
        V.prepare_mounts(pod, c, state, getter({}))
    assert err.value.event == "FailedMount" and 'configmap "nope" not found' in str(err.value)
    pod = pod_with([c], [{"name": "conf", "configMap": {"name": "nope", "optional": True}}])
    [mount] = V.prepare_mounts(pod, c, state, getter({}))
    assert os.listdir(mount.source) == []
    pod = pod_with([c], [{"name": "conf", "configMap": {"name": "cfg", "items": [{"key": "k", "path": "k"}]}}])
    with pytest.raises(V.ConfigProblem, match='key "k" not found in configmap "default/cfg"'):
        V.prepare_mounts(pod, c, state, getter(CMS))


def test_host_path_types(tmp_path):
    made = tmp_path / "made"
    afile = tmp_path / "afile"
    afile.write_text("x")
    c = {"name": "main", "volumeMounts": [{"name": "h", "mountPath": "/h"}]}

    def mount(path, kind):
        pod = pod_with([c], [{"name": "h", "hostPath": {"path": str(path), "type": kind}}])
        return V.prepare_mounts(pod, c, str(tmp_path / "state"), getter({}))

    assert mount(made, "DirectoryOrCreate") == [Mount(str(made), "/h", False)] and made.is_dir()
    assert mount(made, "Directory")[0].source == str(made)
    assert mount(afile, "File")[0].source == str(afile)
    with pytest.raises(V.ConfigProblem, match="is not a directory on the node: create it, or use type "
                                              "DirectoryOrCreate"):
        mount(tmp_path / "missing", "Directory")
    with pytest.raises(V.ConfigProblem, match="is not a file on the node"):
        mount(made, "File")


def test_a_simulated_runtime_writes_nothing(tmp_path):
    c = {"name": "main", "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}]}
    pod = pod_with([c], [{"name": "conf", "configMap": {"name": "cfg"}}])
    [mount] = V.prepare_mounts(pod, c, str(tmp_path / "state"), getter(CMS), write=False)
    assert mount.target == "/etc/app" and not (tmp_path / "state").exists()
    with pytest.raises(V.ConfigProblem):      # the ConfigMap is still required
        V.prepare_mounts(pod, c, str(tmp_path / "state"), getter({}), write=False)


def test_docker_create_kwargs_bind_mounts():
    api = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41")
    config = ContainerConfig(name="n", image="i", labels={},
                             mounts=[Mount("/var/lib/a:b/conf", "/etc/app", True), Mount("/s", "/scratch")])
    mounts = create_kwargs(api, config)["host_config"]["Mounts"]
    assert mounts == [{"Target": "/etc/app", "Source": "/var/lib/a:b/conf", "Type": "bind", "ReadOnly": True},
                      {"Target": "/scratch", "Source": "/s", "Type": "bind", "ReadOnly": False}]
    assert "Mounts" not in create_kwargs(api, ContainerConfig(name="n", image="i", labels={}))["host_config"]


# ---- the pod manager ----

class Runtime(HollowRuntime):
    name = "fake"
    simulated = False

    def __init__(self):
        super().__init__(NODE)
        self.created = []

    def create(self, config):
        self.created.append(config)
        return super().create(config)


@pytest.fixture
def cluster(tmp_path):
    store = ApiStore()
    server = ApiServer(store).start()
    client = Client([server.url], timeout=2.0, retry_deadline=1.0)
    runtime = Runtime()
    stop = threading.Event()
    manager = PodManager(client, runtime, NODE, "10.1.2.3", stop, backoff_base=0.2, backoff_cap=1.0, probes=False,
                         state_dir=str(tmp_path / "state"))
    manager.synced.set()
    manager.api_reachable = True
    yield manager, runtime, store, tmp_path / "state"
    stop.set()
    client.close()
    server.stop()


def test_a_missing_configmap_waits_then_the_container_starts_with_it(cluster):
    manager, runtime, store, state_dir = cluster
    c = {"name": "main", "image": "shepherd/busybox:1",
         "env": [{"name": "COLOR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "color"}}}],
         "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}, {"name": "tmp", "mountPath": "/tmp"}]}
    pod = store.put("pods", pod_with([c], [{"name": "conf", "configMap": {"name": "cfg"}},
                                           {"name": "tmp", "emptyDir": {}}]))
    uid = pod["metadata"]["uid"]
    manager.observe(pod)
    manager.sync(uid)
    cs = manager.states[uid].containers["main"]
    reason, msg = cs.waiting
    assert reason == "CreateContainerConfigError" and 'configmap "cfg" not found in namespace "default"' in msg
    assert runtime.created == [] and cs.retry_at is not None
    status = manager.container_statuses(manager.states[uid], pod)[0]
    assert status["state"]["waiting"]["reason"] == "CreateContainerConfigError"
    manager.events.flush()
    [ev] = [e for e in store.list("events") if e["type"] == "Warning"]
    assert ev["reason"] == "Failed" and 'configmap "cfg" not found' in ev["message"]

    store.put("configmaps", {"metadata": {"name": "cfg", "namespace": "default"},
                             "data": {"color": "green", "app.conf": "x=1"}})
    cs.retry_at = 0            # do not wait out the back-off in a unit test
    manager.sync(uid)
    [config] = runtime.created
    assert "COLOR=green" in config.env
    vol = os.path.join(str(state_dir), "pods", uid, "volumes")
    assert config.mounts == [Mount(os.path.join(vol, "conf"), "/etc/app", True),
                             Mount(os.path.join(vol, "tmp"), "/tmp", False)]
    with open(os.path.join(vol, "conf", "app.conf")) as fh:
        assert fh.read() == "x=1"
    assert cs.waiting is None and [c.state for c in runtime.list({L.POD_UID: uid})] == ["running"]

    # the pod is deleted: its volume directories go with its containers
    manager.observe(store.delete_gracefully(pod["metadata"]["name"], seconds=1))
    manager.sync(uid)
    manager.states[uid].terminator.join(10)
    assert not os.path.exists(os.path.join(str(state_dir), "pods", uid))


def test_running_pods_see_configmap_changes_in_their_volumes(tmp_path):
    state = str(tmp_path)
    cms = {("default", "cfg"): {"data": {"a": "1", "b": "2"}}}
    c = {"name": "main", "volumeMounts": [{"name": "conf", "mountPath": "/etc/app"}]}
    pod = pod_with([c], [{"name": "conf", "configMap": {"name": "cfg"}}, {"name": "tmp", "emptyDir": {}}])
    assert V.refresh_configmap_volumes(pod, state, getter(cms)) == []      # not made ready by a start yet
    [mount] = V.prepare_mounts(pod, c, state, getter(cms))
    before = os.stat(os.path.join(mount.source, "a")).st_ino
    cms[("default", "cfg")] = {"data": {"a": "1", "b": "3", "c": "new"}}
    assert V.refresh_configmap_volumes(pod, state, getter(cms)) == ["conf"]
    assert sorted(os.listdir(mount.source)) == ["a", "b", "c"]
    with open(os.path.join(mount.source, "b")) as fh:
        assert fh.read() == "3"
    assert os.stat(os.path.join(mount.source, "a")).st_ino == before      # unchanged files are not rewritten
    del cms[("default", "cfg")]                                             # gone: the files stay as they were
    assert V.refresh_configmap_volumes(pod, state, getter(cms)) == []
    assert sorted(os.listdir(mount.source)) == ["a", "b", "c"]


def test_housekeeping_removes_the_volumes_of_pods_no_longer_here(cluster):
    manager, runtime, store, state_dir = cluster
    known = store.put("pods", pod_with([{"name": "main", "image": "shepherd/busybox:1"}], [], name="known"))
    manager.observe(known)
    for uid in ("uid-gone", "uid-new", known["metadata"]["uid"]):
        os.makedirs(os.path.join(str(state_dir), "pods", uid, "volumes", "v"))
    old = 1_000_000_000       # long ago
    for uid in ("uid-gone", known["metadata"]["uid"]):
        os.utime(os.path.join(str(state_dir), "pods", uid), (old, old))
    manager.housekeeping(resync=True)
    assert sorted(os.listdir(os.path.join(str(state_dir), "pods"))) == sorted(["uid-new", known["metadata"]["uid"]])


def test_a_subpath_through_a_planted_symlink_is_refused(tmp_path):
    # CVE-2017-1002101's shape: a container links its emptyDir to / and a mount's subPath
    # follows the link; the agent must not bind the node's root into the pod.
    state = str(tmp_path / "state")
    c = {"name": "main", "volumeMounts": [{"name": "scratch", "mountPath": "/x", "subPath": "escape"}]}
    pod = pod_with([c], [{"name": "scratch", "emptyDir": {}}])
    base = os.path.join(state, "pods", "uid-app", "volumes", "scratch")
    os.makedirs(base)
    os.symlink("/", os.path.join(base, "escape"))
    with pytest.raises(V.ConfigProblem, match="resolves outside the volume"):
        V.prepare_mounts(pod, c, state, getter({}))
