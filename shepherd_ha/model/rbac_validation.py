"""Validation of the RBAC kinds (rbac.authorization.k8s.io/v1): Role, ClusterRole,
RoleBinding, ClusterRoleBinding. Shapes as in Kubernetes; the built-in roles and
bindings (model/rbac_defaults.py) cannot be shadowed by stored objects of their names."""
from ._checks import join
from .names import show
from .rbac_defaults import BUILTIN_CLUSTER_ROLES, BUILTIN_CLUSTER_ROLE_BINDINGS

RBAC_GROUP = "rbac.authorization.k8s.io"
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "impersonate", "bind",
         "escalate", "*")
SUBJECT_KINDS = ("User", "Group", "ServiceAccount")


def _rules(causes, obj, namespaced):
    rules = causes.list("rules", obj.get("rules"))
    for i, rule in enumerate(rules or []):
        where = "rules[%d]" % i
        rule = causes.dict(where, rule, required=True)
        if rule is None:
            continue
        verbs = causes.string_list(join(where, "verbs"), rule.get("verbs"), required=True, non_empty=True)
        for verb in verbs or []:
            if verb not in VERBS:
                causes.add(join(where, "verbs"), "%s is not a verb: use %s" % (show(verb), ", ".join(VERBS)))
        for field in ("apiGroups", "resources", "resourceNames", "nonResourceURLs"):
            causes.string_list(join(where, field), rule.get(field))
        urls = rule.get("nonResourceURLs") or []
        if urls and namespaced:
            causes.add(join(where, "nonResourceURLs"), "a Role is namespaced: only a ClusterRole may grant paths")
        if urls and (rule.get("resources") or rule.get("apiGroups")):
            causes.add(where, "give either resources (with apiGroups) or nonResourceURLs, not both")
        if not urls and not (isinstance(rule.get("resources"), list) and rule.get("resources")):
            causes.add(join(where, "resources"), "is required (or nonResourceURLs in a ClusterRole)")
        elif not urls and not isinstance(rule.get("apiGroups"), list):
            causes.add(join(where, "apiGroups"), 'is required: [""] is the core group (pods, configmaps...)')


def _role(causes, obj):
    _rules(causes, obj, namespaced=True)


def _cluster_role(causes, obj):
    _reserved(causes, obj, BUILTIN_CLUSTER_ROLES, "ClusterRole")
    _rules(causes, obj, namespaced=False)


def _subjects(causes, obj):
    subjects = causes.list("subjects", obj.get("subjects"))
    for i, subject in enumerate(subjects or []):
        where = "subjects[%d]" % i
        subject = causes.dict(where, subject, required=True)
        if subject is None:
            continue
        kind = causes.enum(join(where, "kind"), subject.get("kind"), SUBJECT_KINDS, required=True)
        causes.string(join(where, "name"), subject.get("name"), required=True, non_empty=True)
        if kind == "ServiceAccount":
            causes.string(join(where, "namespace"), subject.get("namespace"), required=True, non_empty=True)


def _role_ref(causes, obj, kinds):
    ref = causes.dict("roleRef", obj.get("roleRef"), required=True)
    if ref is None:
        return
    causes.enum("roleRef.kind", ref.get("kind"), kinds, required=True)
    causes.string("roleRef.name", ref.get("name"), required=True, non_empty=True)
    group = ref.get("apiGroup", RBAC_GROUP)
    if group != RBAC_GROUP:
        causes.add("roleRef.apiGroup", "%s is not supported: use %s" % (show(group), RBAC_GROUP))


def _role_binding(causes, obj):
    _subjects(causes, obj)
    _role_ref(causes, obj, ("Role", "ClusterRole"))


def _cluster_role_binding(causes, obj):
    _reserved(causes, obj, BUILTIN_CLUSTER_ROLE_BINDINGS, "ClusterRoleBinding")
    _subjects(causes, obj)
    _role_ref(causes, obj, ("ClusterRole",))


def _reserved(causes, obj, names, kind):
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else None
    if isinstance(name, str) and name in names:
        causes.add("metadata.name", "%s is a built-in %s (it cannot be replaced): pick another name"
                   % (show(name), kind))


VALIDATORS = {"roles": _role, "clusterroles": _cluster_role, "rolebindings": _role_binding,
              "clusterrolebindings": _cluster_role_binding}
