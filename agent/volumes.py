"""ConfigMaps and volumes of a pod, for the container about to start.

- env: `envFrom[].configMapRef` (every key of the ConfigMap, with an optional
  prefix), then `env[]` (a plain `value`, or `valueFrom.configMapKeyRef`); a later
  name wins, as in Kubernetes.
- volumes: each lives in a directory of the pod under the agent's state dir,
  `<state-dir>/pods/<pod uid>/volumes/<volume name>`, bind-mounted into the
  containers that mount it (removed with the pod):
  - emptyDir: an empty directory, shared by the pod's containers, kept across
    container restarts;
  - configMap: one file per key (or per `items[]` entry), written atomically
    (temporary file + rename) each time a container starts and refreshed every
    --configmap-refresh-interval while the pod runs (refresh_configmap_volumes);
    keys no longer there are removed; mounted read-only;
  - secret: like configMap, but on a tmpfs (agent/secret_volumes.py), files with
    defaultMode / items[].mode, written when a container starts (not refreshed);
  - hostPath: the node's path itself (type "" no check, Directory, DirectoryOrCreate, File).
  emptyDir directories are 0777 as in Kubernetes; with a pod fsGroup, emptyDir,
  configMap and secret files belong to that group.
  `subPath` mounts one file or directory inside the volume.

Secrets are read like ConfigMaps (`env[].valueFrom.secretKeyRef`, `envFrom[].secretRef`),
their base64 data decoded. A missing ConfigMap, Secret or key that is not `optional` raises ConfigProblem (the
container waits with CreateContainerConfigError and is retried with back-off).
`get_configmap(namespace, name)` returns the ConfigMap or None when there is none.
"""
import base64
import os
import shutil
import tempfile
import time

from shepherd_ha.client import ApiError, ClientError

from . import secret_volumes as SV
from .security_context import fs_group
from .runtime.base import Mount

VOLUME_SOURCES = ("configMap", "emptyDir", "hostPath")


class ConfigProblem(Exception):
    """The container cannot be configured yet; str() says what is missing and the fix.
    `event` is the Event reason to post (Failed for env, FailedMount for volumes)."""

    def __init__(self, message, event="Failed"):
        super().__init__(message)
        self.event = event


def configmap_getter(client, plural="configmaps"):
    """get_configmap(namespace, name) through the API client: None on 404; any
    other failure is a ConfigProblem (retried). plural "secrets": the same for Secrets."""
    what = plural[:-1]

    def get(namespace, name):
        try:
            return client.get(plural, name, namespace=namespace)
        except ApiError as err:
            if err.code == 404:
                return None
            raise ConfigProblem('cannot read %s "%s" in namespace "%s": %s' % (what, name, namespace, err))
        except ClientError as exc:
            raise ConfigProblem('cannot read %s "%s" in namespace "%s": %s' % (what, name, namespace, exc))
    return get


def secret_getter(client):
    return configmap_getter(client, "secrets")


def _no_secrets(namespace, name):
    raise ConfigProblem('secret "%s" in namespace "%s": this agent reads no Secrets' % (name, namespace))


class _Cache:
    """ConfigMaps read once per container start."""

    def __init__(self, get_configmap, namespace):
        self.get = get_configmap
        self.namespace = namespace
        self.seen = {}

    def __call__(self, name):
        if name not in self.seen:
            self.seen[name] = self.get(self.namespace, name)
        return self.seen[name]


def _namespace(pod):
    return (pod.get("metadata") or {}).get("namespace") or "default"


def _not_found(name, namespace, where, event="Failed", what="configmap"):
    return ConfigProblem('%s "%s" not found in namespace "%s" (%s): create it, or mark the '
                         'reference optional: true' % (what, name, namespace, where), event)


def resolve_env(pod, container, get_configmap, get_secret=None):
    """["NAME=value", ...] of the container; ConfigProblem when a required ConfigMap,
    Secret or key is missing."""
    namespace = _namespace(pod)
    sources = {"configmap": (get_configmap if isinstance(get_configmap, _Cache) else _Cache(get_configmap, namespace),
                             lambda cm: cm.get("data") or {}),
               "secret": (_Cache(get_secret or _no_secrets, namespace), SV.secret_text)}
    cname = container.get("name") or "?"
    values = {}
    for i, source in enumerate(container.get("envFrom") or []):
        if not isinstance(source, dict):
            continue
        what, field = ("secret", "secretRef") if isinstance(source.get("secretRef"), dict) else \
            ("configmap", "configMapRef")
        ref = source.get(field)
        if not isinstance(ref, dict):
            continue
        get, data_of = sources[what]
        obj = get(ref.get("name"))
        if obj is None:
            if ref.get("optional"):
                continue
            raise _not_found(ref.get("name"), namespace, "containers[%s].envFrom[%d].%s" % (cname, i, field),
                             what=what)
        prefix = source.get("prefix") or ""
        for key, value in sorted(data_of(obj).items()):
            values[prefix + key] = value
    for i, var in enumerate(container.get("env") or []):
        if not isinstance(var, dict) or not var.get("name"):
            continue
        value_from = var.get("valueFrom") or {}
        what = "secret" if isinstance(value_from.get("secretKeyRef"), dict) else "configmap"
        ref = value_from.get("secretKeyRef" if what == "secret" else "configMapKeyRef")
        if not isinstance(ref, dict):
            value = var.get("value")
            values[var["name"]] = "" if value is None else str(value)
            continue
        where = "containers[%s].env[%d] %s" % (cname, i, var["name"])
        get, data_of = sources[what]
        obj = get(ref.get("name"))
        if obj is None:
            if ref.get("optional"):
                continue
            raise _not_found(ref.get("name"), namespace, where, what=what)
        data = data_of(obj)
        if ref.get("key") not in data:
            if ref.get("optional"):
                continue
            raise ConfigProblem('key "%s" not found in %s "%s/%s" (%s): add the key, or mark the '
                                'reference optional: true' % (ref.get("key"), what, namespace, ref.get("name"), where))
        values[var["name"]] = data[ref["key"]]
    return ["%s=%s" % (k, v) for k, v in values.items()]


# ---- volumes ----

def pod_dir(state_dir, uid):
    return os.path.join(state_dir, "pods", uid)


def volume_dir(state_dir, uid, volume_name):
    return os.path.join(pod_dir(state_dir, uid), "volumes", volume_name)


def remove_pod_dir(state_dir, uid):
    """Remove the pod's volumes (its containers are gone). Never follows into a hostPath:
    those are mounts, not directories of the pod."""
    if not state_dir or not uid:
        return
    SV.unmount_under(pod_dir(state_dir, uid))       # secret tmpfs volumes first
    shutil.rmtree(pod_dir(state_dir, uid), ignore_errors=True)


def pod_uids(state_dir):
    """The pod uids that have a directory under the state dir."""
    try:
        return sorted(os.listdir(os.path.join(state_dir, "pods"))) if state_dir else []
    except OSError:
        return []


def pod_dir_age(state_dir, uid):
    """Seconds since the pod's directory changed (0 when it cannot be read)."""
    try:
        return max(0.0, time.time() - os.stat(pod_dir(state_dir, uid)).st_mtime)
    except OSError:
        return 0.0


def _volumes_by_name(pod):
    return {v.get("name"): v for v in ((pod.get("spec") or {}).get("volumes") or []) if isinstance(v, dict)}


def prepare_mounts(pod, container, state_dir, get_configmap, write=True, get_secret=None):
    """[Mount] for the container's volumeMounts, the volumes' directories made ready.
    write=False (simulated runtimes): resolve the ConfigMaps, touch no file.
    ConfigProblem (event FailedMount) when a volume cannot be made ready."""
    mounts_spec = [m for m in (container.get("volumeMounts") or []) if isinstance(m, dict)]
    if not mounts_spec:
        return []
    if write and not state_dir:
        raise ConfigProblem("the agent has no --state-dir for pod volumes", "FailedMount")
    uid = (pod.get("metadata") or {}).get("uid") or ""
    namespace = _namespace(pod)
    cms = get_configmap if isinstance(get_configmap, _Cache) else _Cache(get_configmap, namespace)
    secrets = _Cache(get_secret or _no_secrets, namespace)
    volumes = _volumes_by_name(pod)
    ready = {}
    out = []
    for m in mounts_spec:
        name = m.get("name")
        volume = volumes.get(name)
        if volume is None:
            raise ConfigProblem('volumeMount %s of container %s names no volume of the pod: add it to '
                                'spec.volumes' % (name, container.get("name")), "FailedMount")
        if name not in ready:
            ready[name] = _prepare(volume, uid, namespace, state_dir, cms, write, secrets, fs_group(pod))
        source, read_only = ready[name]
        sub = m.get("subPath") or ""
        if sub and write:
            source = _sub_path(volume, source, sub)
        elif sub:
            source = os.path.join(source, sub)
        out.append(Mount(source=source, target=m.get("mountPath"),
                         read_only=bool(m.get("readOnly")) or read_only))
    return out


def _prepare(volume, uid, namespace, state_dir, cms, write, secrets, group):
    """(host path, read_only) of one volume, made ready."""
    name = volume.get("name")
    if isinstance(volume.get("hostPath"), dict):
        return _host_path(volume, volume["hostPath"], write), False
    target = volume_dir(state_dir or "", uid, name)
    if isinstance(volume.get("configMap"), dict):
        files = _configmap_files(volume, namespace, cms)
        if write:
            write_files(target, files, group=group)
        return target, True
    if isinstance(volume.get("secret"), dict):
        files, modes = SV.secret_files(volume, secrets(volume["secret"].get("secretName")),
                                       lambda message: ConfigProblem(message, "FailedMount"))
        if write:
            SV.mount_tmpfs(target)          # OSError (not root): the container waits, never on disk
            write_files(target, files, modes, group)
        return target, True
    if write:
        os.makedirs(target, exist_ok=True)          # emptyDir (kept across container restarts)
        os.chmod(target, 0o2777 if group is not None else 0o777)    # any runAsUser may write, as in Kubernetes
        if group is not None:
            os.chown(target, -1, group)
    return target, False


def _configmap_files(volume, namespace, cms):
    """{relative path: bytes} of a configMap volume."""
    src = volume["configMap"]
    cm = cms(src.get("name"))
    if cm is None:
        if src.get("optional"):
            return {}
        raise _not_found(src.get("name"), namespace, "volume %s" % volume.get("name"), "FailedMount")
    content = {k: v.encode() for k, v in (cm.get("data") or {}).items()}
    for k, v in (cm.get("binaryData") or {}).items():
        try:
            content[k] = base64.b64decode(v)
        except (ValueError, TypeError):
            continue
    items = src.get("items")
    if not items:
        return content
    files = {}
    for item in items:
        key = item.get("key")
        if key not in content:
            if src.get("optional"):
                continue
            raise ConfigProblem('key "%s" not found in configmap "%s/%s" (volume %s items): add the key, '
                                'or fix items[].key' % (key, namespace, src.get("name"), volume.get("name")),
                                "FailedMount")
        files[item.get("path") or key] = content[key]
    return files


def write_files(directory, files, modes=None, group=None):
    """Make `directory` hold exactly `files` ({relative path: bytes}); each file is
    replaced atomically, so a reader sees the old or the new content, never half.
    modes: {relative path: mode} (default 0644); group: the files' group (fsGroup)."""
    os.makedirs(directory, exist_ok=True)
    wanted = set()
    for rel, data in files.items():
        path = os.path.normpath(os.path.join(directory, rel))
        if not path.startswith(os.path.join(directory, "")):
            continue            # validation refuses '..'; never write outside the volume
        wanted.add(path)
        mode = (modes or {}).get(rel, 0o644)
        if _holds(path, data, mode):
            continue            # unchanged: a refresh rewrites nothing
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, mode)
            if group is not None:
                os.chown(tmp, -1, group)
            os.replace(tmp, path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    for root, dirs, names in os.walk(directory, topdown=False):
        for n in names:
            path = os.path.join(root, n)
            if path not in wanted:
                os.unlink(path)
        if root != directory and not os.listdir(root):
            os.rmdir(root)


def _holds(path, data, mode=0o644):
    try:
        if os.stat(path).st_mode & 0o7777 != mode:
            return False
        with open(path, "rb") as fh:
            return fh.read(len(data) + 1) == data
    except OSError:
        return False


def has_configmap_volumes(pod):
    return any(isinstance(v.get("configMap"), dict) for v in _volumes_by_name(pod).values())


def refresh_configmap_volumes(pod, state_dir, get_configmap):
    """Rewrite the pod's configMap volumes (those made ready by a container start) with
    the ConfigMaps' current data: running containers see the change (a subPath mount
    does not, as in Kubernetes). A ConfigMap that is gone, or a key that is missing,
    leaves that volume's files as they are. Returns the names of the volumes whose
    files were checked."""
    uid = (pod.get("metadata") or {}).get("uid") or ""
    namespace = _namespace(pod)
    cms = _Cache(get_configmap, namespace)
    done = []
    for name, volume in sorted(_volumes_by_name(pod).items()):
        target = volume_dir(state_dir, uid, name)
        if not isinstance(volume.get("configMap"), dict) or not os.path.isdir(target):
            continue
        try:
            files = _configmap_files(volume, namespace, cms)
        except ConfigProblem:
            continue
        write_files(target, files, group=fs_group(pod))
        done.append(name)
    return done


def _host_path(volume, src, write):
    path = src.get("path") or ""
    kind = src.get("type") or ""
    if not write:
        return path
    where = "volume %s hostPath %s" % (volume.get("name"), path)
    if kind == "DirectoryOrCreate":
        try:
            os.makedirs(path, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise ConfigProblem("%s: cannot create the directory: %s" % (where, exc.strerror), "FailedMount")
    if kind in ("Directory", "DirectoryOrCreate") and not os.path.isdir(path):
        raise ConfigProblem("%s is not a directory on the node: create it, or use type DirectoryOrCreate" % where,
                            "FailedMount")
    if kind == "File" and not os.path.isfile(path):
        raise ConfigProblem("%s is not a file on the node: create it first" % where, "FailedMount")
    if kind == "" and not os.path.exists(path):
        # Docker would create a root-owned directory anyway; say so by creating it ourselves
        try:
            os.makedirs(path, mode=0o755, exist_ok=True)
        except OSError as exc:
            raise ConfigProblem("%s does not exist and cannot be created: %s" % (where, exc.strerror),
                                "FailedMount")
    return path


def _sub_path(volume, source, sub):
    """The host path of subPath `sub` inside a volume: created as a directory when
    missing in a writable volume (as Kubernetes does)."""
    path = os.path.normpath(os.path.join(source, sub))
    if not path.startswith(os.path.join(source, "")):
        raise ConfigProblem("subPath %s leaves volume %s: use a relative path without '..'"
                            % (sub, volume.get("name")), "FailedMount")
    # A container can plant a symbolic link in a writable volume (ln -s / vol/x): resolved,
    # the subPath must still lie inside the volume, or it would mount the node's files.
    real_source = os.path.realpath(source)
    if not os.path.realpath(path).startswith(os.path.join(real_source, "")):
        raise ConfigProblem("subPath %s of volume %s resolves outside the volume (a symbolic link?): "
                            "refused" % (sub, volume.get("name")), "FailedMount")
    if not os.path.exists(path):
        if isinstance(volume.get("configMap"), dict):
            raise ConfigProblem('subPath %s is not in configMap volume %s: use one of its keys (or items[].path)'
                                % (sub, volume.get("name")), "FailedMount")
        os.makedirs(path, exist_ok=True)
    return path
