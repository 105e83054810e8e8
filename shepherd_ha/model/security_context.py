"""Validation of pod and container securityContext: only what the agent enforces on
Docker is accepted; every other field is refused (422 naming it) rather than stored
and silently ignored.

Enforced (agent/security_context.py): runAsUser, runAsGroup, runAsNonRoot,
supplementalGroups, fsGroup, sysctls (pod); runAsUser, runAsGroup, runAsNonRoot,
capabilities add/drop, readOnlyRootFilesystem, privileged, allowPrivilegeEscalation
(container); seccompProfile and appArmorProfile of type RuntimeDefault or Unconfined
(both levels). Refused: seLinuxOptions, windowsOptions, Localhost profiles (no
profile files on the nodes), procMount other than Default, fsGroupChangePolicy,
supplementalGroupsPolicy, seLinuxChangePolicy.
"""
import re

from ._checks import join
from .names import show

MAX_ID = 2 ** 31 - 1
_CAPABILITY = re.compile(r"^(CAP_)?[A-Z][A-Z_]*$")
_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
_PROFILE_TYPES = ("RuntimeDefault", "Unconfined")

POD_FIELDS = ("runAsUser", "runAsGroup", "runAsNonRoot", "supplementalGroups", "fsGroup", "sysctls",
              "seccompProfile", "appArmorProfile")
CONTAINER_FIELDS = ("runAsUser", "runAsGroup", "runAsNonRoot", "capabilities", "readOnlyRootFilesystem",
                    "privileged", "allowPrivilegeEscalation", "seccompProfile", "appArmorProfile", "procMount")
_WHY_NOT = {
    "seLinuxOptions": "the nodes do not run SELinux labelling",
    "windowsOptions": "the nodes run Linux containers only",
    "fsGroupChangePolicy": "volumes always get the fsGroup",
    "supplementalGroupsPolicy": "the image's groups are always merged",
    "seLinuxChangePolicy": "the nodes do not run SELinux labelling",
}


def _refuse(causes, f, key, supported):
    why = _WHY_NOT.get(key, "the agent cannot enforce it")
    causes.add(join(f, key), "is not supported (%s): remove it; supported fields: %s" % (why, ", ".join(supported)))


def _ids(causes, sc, f):
    causes.integer(join(f, "runAsUser"), sc.get("runAsUser"), 0, MAX_ID)
    causes.integer(join(f, "runAsGroup"), sc.get("runAsGroup"), 0, MAX_ID)
    non_root = causes.boolean(join(f, "runAsNonRoot"), sc.get("runAsNonRoot"))
    if non_root is True and sc.get("runAsUser") == 0:
        causes.add(join(f, "runAsNonRoot"), "is true while runAsUser is 0 (root): set a non-zero runAsUser")


def _profile(causes, f, profile):
    profile = causes.dict(f, profile)
    if profile is None:
        return
    kind = profile.get("type")
    if kind == "Localhost":
        causes.add(f + ".type", '"Localhost" is not supported (the nodes hold no profile files): use '
                   '"RuntimeDefault" (Docker\'s default profile) or "Unconfined"')
        return
    causes.enum(f + ".type", kind, _PROFILE_TYPES, required=True)
    for key in profile:
        if key != "type":
            causes.add(join(f, key), "is only meaningful with type Localhost, which is not supported: remove it")


def validate_pod_security_context(causes, f, sc, host_network=False):
    sc = causes.dict(f, sc)
    if sc is None:
        return
    for key in sc:
        if key not in POD_FIELDS:
            _refuse(causes, f, key, POD_FIELDS)
    _ids(causes, sc, f)
    causes.integer(join(f, "fsGroup"), sc.get("fsGroup"), 0, MAX_ID)
    for i, gid in enumerate(causes.list(join(f, "supplementalGroups"), sc.get("supplementalGroups")) or []):
        causes.integer("%s.supplementalGroups[%d]" % (f, i), gid, 0, MAX_ID)
    names = set()
    for i, item in enumerate(causes.list(join(f, "sysctls"), sc.get("sysctls")) or []):
        fi = "%s.sysctls[%d]" % (f, i)
        if not isinstance(item, dict):
            causes.add(fi, "must be an object with name and value, got %s" % show(item))
            continue
        name = causes.string(fi + ".name", item.get("name"), required=True, non_empty=True)
        causes.string(fi + ".value", item.get("value"), required=True)
        if name is None:
            continue
        if len(name) > 253 or not _SYSCTL.fullmatch(name):
            causes.add(fi + ".name", "%s is not a sysctl name such as net.ipv4.tcp_syncookies" % show(name))
        elif name in names:
            causes.add(fi + ".name", "duplicate sysctl %s" % show(name))
        elif host_network and name.startswith("net."):
            causes.add(fi + ".name", "%s cannot be set with hostNetwork: it would change the node's "
                       "network namespace" % show(name))
        names.add(name)
    _profile(causes, join(f, "seccompProfile"), sc.get("seccompProfile"))
    _profile(causes, join(f, "appArmorProfile"), sc.get("appArmorProfile"))


def validate_container_security_context(causes, f, sc):
    sc = causes.dict(f, sc)
    if sc is None:
        return
    for key in sc:
        if key not in CONTAINER_FIELDS:
            _refuse(causes, f, key, CONTAINER_FIELDS)
    _ids(causes, sc, f)
    for key in ("readOnlyRootFilesystem", "privileged", "allowPrivilegeEscalation"):
        causes.boolean(join(f, key), sc.get(key))
    if sc.get("privileged") is True and sc.get("allowPrivilegeEscalation") is False:
        causes.add(join(f, "allowPrivilegeEscalation"), "cannot be false while privileged is true: "
                   "a privileged container can always escalate")
    caps = causes.dict(join(f, "capabilities"), sc.get("capabilities"))
    for key in caps or {}:
        if key not in ("add", "drop"):
            causes.add(join(f, "capabilities." + key), "is not a capabilities field: use add and drop")
    for group in ("add", "drop"):
        fg = join(f, "capabilities." + group)
        for i, cap in enumerate(causes.list(fg, (caps or {}).get(group)) or []):
            if not (isinstance(cap, str) and _CAPABILITY.fullmatch(cap)):
                causes.add("%s[%d]" % (fg, i), "%s is not a capability name such as NET_BIND_SERVICE or ALL"
                           % show(cap))
    mount = sc.get("procMount")
    if mount not in (None, "Default"):
        causes.add(join(f, "procMount"), '%s is not supported: only "Default" (the masked /proc)' % show(mount))
    _profile(causes, join(f, "seccompProfile"), sc.get("seccompProfile"))
    _profile(causes, join(f, "appArmorProfile"), sc.get("appArmorProfile"))
