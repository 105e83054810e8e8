"""A pod's and a container's securityContext -> Docker options (pure), and the
kubelet's runAsNonRoot check against the image's user.

Pod and container contexts merge as in Kubernetes: a container's field wins over the
pod's. What validation accepts (shepherd_ha/model/security_context.py) is enforced:
user/group ids, supplementalGroups and fsGroup (extra groups), capabilities
add/drop, readOnlyRootFilesystem, privileged, allowPrivilegeEscalation=false
(no-new-privileges), seccomp and AppArmor RuntimeDefault (Docker's default) or
Unconfined, sysctls, hostPID and hostIPC.
"""


def _dict(value):
    return value if isinstance(value, dict) else {}


def pod_context(pod):
    return _dict(_dict(_dict(pod).get("spec")).get("securityContext"))


def effective(pod, container, field):
    """The container's value of `field`, else the pod's (None when neither sets it)."""
    own = _dict(container.get("securityContext")).get(field)
    if own is not None:
        return own
    if field in ("capabilities", "privileged", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "procMount"):
        return None      # container-only fields
    return pod_context(pod).get(field)


def _cap(name):
    return name[4:] if name.startswith("CAP_") else name


def sysctls(pod, network_owner):
    """{name: value} of the pod's sysctls for one container: the net.* ones only for
    the container that owns the pod's network namespace."""
    out = {}
    for item in pod_context(pod).get("sysctls") or []:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            if item["name"].startswith("net.") and not network_owner:
                continue
            out[item["name"]] = str(item.get("value", ""))
    return out


def user_spec(pod, container, image_user):
    """Docker's `user` ("uid[:gid]"), or None to keep the image's user.
    image_user: the image's configured user ("" = root), used when only a group is set."""
    uid = effective(pod, container, "runAsUser")
    gid = effective(pod, container, "runAsGroup")
    if uid is None and gid is None:
        return None
    if uid is None:
        uid = (image_user or "0").split(":", 1)[0] or "0"
    return "%s:%s" % (uid, gid) if gid is not None else str(uid)


def docker_options(pod, container, image_user=""):
    """Keyword fields of ContainerConfig for the container's security settings."""
    spec = _dict(_dict(pod).get("spec"))
    sc = _dict(container.get("securityContext"))
    caps = _dict(sc.get("capabilities"))
    security_opt = []
    if sc.get("allowPrivilegeEscalation") is False:
        security_opt.append("no-new-privileges:true")
    if _dict(effective(pod, container, "seccompProfile")).get("type") == "Unconfined":
        security_opt.append("seccomp=unconfined")
    if _dict(effective(pod, container, "appArmorProfile")).get("type") == "Unconfined":
        security_opt.append("apparmor=unconfined")
    groups = [g for g in pod_context(pod).get("supplementalGroups") or [] if isinstance(g, int)]
    fs_group = pod_context(pod).get("fsGroup")
    if isinstance(fs_group, int) and fs_group not in groups:
        groups.append(fs_group)
    return {
        "user": user_spec(pod, container, image_user),
        "group_add": [str(g) for g in groups],
        "cap_add": [_cap(c) for c in caps.get("add") or [] if isinstance(c, str)],
        "cap_drop": [_cap(c) for c in caps.get("drop") or [] if isinstance(c, str)],
        "privileged": sc.get("privileged") is True,
        "read_only": sc.get("readOnlyRootFilesystem") is True,
        "security_opt": security_opt,
        "pid_mode": "host" if spec.get("hostPID") is True else None,
        "ipc_mode": "host" if spec.get("hostIPC") is True else None,
    }


def _pod_key(pod):
    meta = _dict(_dict(pod).get("metadata"))
    return "%s/%s" % (meta.get("namespace") or "default", meta.get("name"))


def non_root_problem(pod, container, image_user):
    """The kubelet's message when runAsNonRoot cannot hold, else None.
    image_user: the image's Config.User ("" = root); None when unknown (simulated)."""
    if effective(pod, container, "runAsNonRoot") is not True:
        return None
    where = '(pod: "%s", container: %s)' % (_pod_key(pod), container.get("name"))
    uid = effective(pod, container, "runAsUser")
    if uid is not None:
        return "container's runAsUser breaks non-root policy %s" % where if uid == 0 else None
    if image_user is None:
        return None
    user = image_user.split(":", 1)[0]
    if user in ("", "0", "root"):
        return "container has runAsNonRoot and image will run as root %s" % where
    if not user.isdigit():
        return ("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is "
                "non-root %s" % (user, where))
    return None


def fs_group(pod):
    gid = pod_context(pod).get("fsGroup")
    return gid if isinstance(gid, int) and not isinstance(gid, bool) else None
