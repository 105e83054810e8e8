"""The Pod Security Standards (privileged / baseline / restricted), as pure checks.

A namespace chooses its level with the label `pod-security.kubernetes.io/enforce`
(baseline when absent); `pod-security.kubernetes.io/warn` names a level whose
violations are only reported (a `Warning:` header). `check(level, spec)` returns the
violations of a pod spec, each one phrase in Kubernetes' words, e.g.
`hostPath volumes (volume "root")`; [] means the spec is allowed at that level.
The levels are cumulative: restricted checks everything baseline checks.

Follows the "Pod Security Standards" document (policy version latest); nothing is
exempt by namespace (kube-system included), as in Kubernetes without exemptions.
"""
from .names import show

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
WARN_LABEL = "pod-security.kubernetes.io/warn"
AUDIT_LABEL = "pod-security.kubernetes.io/audit"
LEVELS = ("privileged", "baseline", "restricted")
DEFAULT_LEVEL = "baseline"

# Capabilities baseline lets a container add (Docker's default set minus NET_RAW).
BASELINE_CAPABILITIES = frozenset((
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
    "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"))
RESTRICTED_CAPABILITIES = frozenset(("NET_BIND_SERVICE",))
SAFE_SYSCTLS = frozenset((
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"))
RESTRICTED_VOLUME_TYPES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                           "persistentVolumeClaim", "projected", "secret")
_SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")


def _dict(value):
    return value if isinstance(value, dict) else {}


def level_label_problem(labels):
    """(label, message) for a pod-security label with a value that is not a level, else None."""
    for label in (ENFORCE_LABEL, WARN_LABEL, AUDIT_LABEL):
        value = _dict(labels).get(label)
        if value is not None and value not in LEVELS:
            return label, "%s is not a Pod Security level: use one of %s" % (show(value), ", ".join(LEVELS))
    return None


def namespace_levels(namespace):
    """(enforce level, warn level or None) of a Namespace object (None: no such namespace)."""
    labels = _dict(_dict(_dict(namespace).get("metadata")).get("labels"))
    enforce = labels.get(ENFORCE_LABEL)
    warn = labels.get(WARN_LABEL)
    return (enforce if enforce in LEVELS else DEFAULT_LEVEL), (warn if warn in LEVELS else None)


def _containers(spec):
    """(field kind, container) of every container list a pod spec can hold."""
    out = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        items = spec.get(key)
        for c in items if isinstance(items, list) else ():
            if isinstance(c, dict):
                out.append(c)
    return out


def _names(containers):
    return ", ".join('"%s"' % c.get("name") for c in containers)


def _who(containers, singular="container"):
    return "%s%s %s" % (singular, "s" if len(containers) > 1 else "", _names(containers))


def _sc(obj):
    return _dict(obj.get("securityContext"))


def check(level, spec):
    """Violations of pod spec `spec` at `level` (a list of phrases; [] = allowed)."""
    if level == "privileged" or not isinstance(spec, dict):
        return []
    out = _baseline(spec)
    if level == "restricted":
        out += _restricted(spec)
    return out


def _baseline(spec):
    out = []
    pod_sc = _sc(spec)
    containers = _containers(spec)
    host = ["%s=true" % k for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    if host:
        out.append("host namespaces (%s)" % ", ".join(host))
    if _dict(pod_sc.get("windowsOptions")).get("hostProcess") is True or \
            any(_dict(_sc(c).get("windowsOptions")).get("hostProcess") is True for c in containers):
        out.append("hostProcess (pod or containers must not set securityContext.windowsOptions.hostProcess=true)")
    privileged = [c for c in containers if _sc(c).get("privileged") is True]
    if privileged:
        out.append("privileged (%s must not set securityContext.privileged=true)" % _who(privileged))
    added = []
    for c in containers:
        for cap in _dict(_sc(c).get("capabilities")).get("add") or []:
            if cap not in BASELINE_CAPABILITIES:
                added.append((c, cap))
    if added:
        out.append("non-default capabilities (%s must not include %s in securityContext.capabilities.add)"
                   % (_who(list({id(c): c for c, _ in added}.values())),
                      ", ".join(sorted({"\"%s\"" % cap for _, cap in added}))))
    host_paths = [v.get("name") for v in spec.get("volumes") or [] if isinstance(v, dict) and "hostPath" in v]
    if host_paths:
        out.append("hostPath volumes (volume%s %s)" % ("s" if len(host_paths) > 1 else "",
                                                        ", ".join('"%s"' % n for n in host_paths)))
    ports = []
    for c in containers:
        for p in c.get("ports") or []:
            if isinstance(p, dict) and p.get("hostPort") not in (None, 0):
                ports.append((c, p.get("hostPort")))
    if ports:
        out.append("hostPort (%s uses hostPort%s %s)"
                   % (_who(list({id(c): c for c, _ in ports}.values())), "s" if len(ports) > 1 else "",
                      ", ".join(str(p) for _, p in ports)))
    out += _profile_violations(spec, containers, "appArmorProfile", "forbidden AppArmor profile",
                               ("Unconfined",))
    se = [("pod", pod_sc)] + [('container "%s"' % c.get("name"), _sc(c)) for c in containers]
    bad_se = [who for who, sc in se if isinstance(sc.get("seLinuxOptions"), dict) and (
        sc["seLinuxOptions"].get("type", "") not in _SELINUX_TYPES or
        sc["seLinuxOptions"].get("user") or sc["seLinuxOptions"].get("role"))]
    if bad_se:
        out.append("seLinuxOptions (%s set forbidden securityContext.seLinuxOptions: type must be container_t, "
                   "user and role unset)" % " and ".join(bad_se))
    unmasked = [c for c in containers if _sc(c).get("procMount") not in (None, "Default")]
    if unmasked:
        out.append('procMount (%s must not set securityContext.procMount to "Unmasked")' % _who(unmasked))
    out += _profile_violations(spec, containers, "seccompProfile", "seccompProfile", ("Unconfined",))
    sysctls = [s.get("name") for s in pod_sc.get("sysctls") or []
               if isinstance(s, dict) and s.get("name") not in SAFE_SYSCTLS]
    if sysctls:
        out.append("forbidden sysctls (%s)" % ", ".join(str(s) for s in sysctls))
    return out


def _profile_violations(spec, containers, field, title, forbidden):
    """A pod or container whose `field`.type is one of `forbidden`."""
    bad = []
    pod_type = _dict(_sc(spec).get(field)).get("type")
    if pod_type in forbidden:
        bad.append("pod")
    for c in containers:
        if _dict(_sc(c).get(field)).get("type") in forbidden:
            bad.append('container "%s"' % c.get("name"))
    if not bad:
        return []
    return ['%s (%s must not set securityContext.%s.type to "%s")' % (title, " and ".join(bad), field, forbidden[0])]


def _restricted(spec):
    out = []
    pod_sc = _sc(spec)
    containers = _containers(spec)
    bad_volumes = []
    for v in spec.get("volumes") or []:
        if not isinstance(v, dict):
            continue
        kinds = [k for k in v if k != "name" and k not in RESTRICTED_VOLUME_TYPES]
        bad_volumes += ['volume "%s" uses restricted volume type "%s"' % (v.get("name"), k) for k in kinds]
    if bad_volumes:
        out.append("restricted volume types (%s)" % ", ".join(bad_volumes))
    escalating = [c for c in containers if _sc(c).get("allowPrivilegeEscalation") is not False]
    if escalating:
        out.append("allowPrivilegeEscalation != false (%s must set securityContext.allowPrivilegeEscalation=false)"
                   % _who(escalating))
    unrestricted = [c for c in containers
                    if "ALL" not in (_dict(_sc(c).get("capabilities")).get("drop") or [])]
    if unrestricted:
        out.append('unrestricted capabilities (%s must set securityContext.capabilities.drop=["ALL"])'
                   % _who(unrestricted))
    adding = [c for c in containers
              if any(cap not in RESTRICTED_CAPABILITIES for cap in _dict(_sc(c).get("capabilities")).get("add") or [])]
    if adding:
        out.append('unrestricted capabilities (%s must not include capabilities other than "NET_BIND_SERVICE" in '
                   'securityContext.capabilities.add)' % _who(adding))
    # runAsNonRoot: the pod's value counts for every container that does not set its own.
    pod_non_root = pod_sc.get("runAsNonRoot")
    explicit_false = pod_non_root is False or any(_sc(c).get("runAsNonRoot") is False for c in containers)
    unset = [c for c in containers if _sc(c).get("runAsNonRoot") is None and pod_non_root is not True]
    if explicit_false:
        out.append("runAsNonRoot != true (pod or containers must not set securityContext.runAsNonRoot=false)")
    elif unset:
        out.append("runAsNonRoot != true (pod or %s must set securityContext.runAsNonRoot=true)" % _who(unset))
    root = (["pod"] if pod_sc.get("runAsUser") == 0 else []) + \
        ['container "%s"' % c.get("name") for c in containers if _sc(c).get("runAsUser") == 0]
    if root:
        out.append("runAsUser=0 (%s must not set runAsUser=0)" % " and ".join(root))
    pod_seccomp = _dict(pod_sc.get("seccompProfile")).get("type")
    no_seccomp = [c for c in containers if _dict(_sc(c).get("seccompProfile")).get("type") is None
                  and pod_seccomp not in ("RuntimeDefault", "Localhost")]
    if no_seccomp:
        out.append('seccompProfile (pod or %s must set securityContext.seccompProfile.type to "RuntimeDefault" '
                   'or "Localhost")' % _who(no_seccomp))
    return out


def forbidden_message(plural, name, level, violations):
    """Kubernetes' sentence: pods "x" is forbidden: violates PodSecurity "baseline:latest": ..."""
    return '%s "%s" is forbidden: violates PodSecurity "%s:latest": %s' % (
        plural, name, level, ", ".join(violations))


def warning_text(level, violations):
    """The text of a Warning header for the warn level."""
    return 'would violate PodSecurity "%s:latest": %s' % (level, ", ".join(violations))
