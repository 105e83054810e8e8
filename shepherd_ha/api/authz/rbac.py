"""RBAC evaluation (pure): an index of bindings by subject, built once per change of
the RBAC objects, then asked per request.

Semantics as Kubernetes' (plugin/pkg/auth/authorizer/rbac): a rule matches when the
verb, the API group, the resource (with its subresource: "pods" does not grant
"pods/log"; "*/scale" grants every scale) and, if the rule names any, the object's
name all match; a RoleBinding grants its role's rules in its own namespace only; a
ClusterRoleBinding grants them everywhere, cluster-scoped resources and paths
included. Only allows, no denies: the first matching rule wins.
"""
import dataclasses

from shepherd_ha.model.rbac_defaults import BUILTIN_CLUSTER_ROLE_BINDINGS, BUILTIN_CLUSTER_ROLES

ALL = "*"


@dataclasses.dataclass(frozen=True)
class Rule:
    verbs: frozenset
    api_groups: frozenset
    resources: frozenset
    resource_names: frozenset
    paths: tuple                # nonResourceURLs

    @classmethod
    def of(cls, rule):
        def strings(key):
            value = rule.get(key) if isinstance(rule, dict) else None
            return frozenset(v for v in value if isinstance(v, str)) if isinstance(value, list) else frozenset()
        paths = tuple(strings("nonResourceURLs"))
        return cls(strings("verbs"), strings("apiGroups"), strings("resources"), strings("resourceNames"), paths)

    def allows(self, attrs):
        if ALL not in self.verbs and attrs.verb not in self.verbs:
            return False
        if not attrs.is_resource:
            return any(p == ALL or p == attrs.path or (p.endswith("*") and attrs.path.startswith(p[:-1]))
                       for p in self.paths)
        if ALL not in self.api_groups and attrs.api_group not in self.api_groups:
            return False
        if not self._resource_matches(attrs):
            return False
        return not self.resource_names or attrs.name in self.resource_names

    def _resource_matches(self, attrs):
        if ALL in self.resources or attrs.full_resource in self.resources:
            return True
        return bool(attrs.subresource) and ("*/" + attrs.subresource) in self.resources

    def as_review_rule(self):
        """The rule as SelfSubjectRulesReview shows it."""
        if self.paths:
            return {"verbs": sorted(self.verbs), "nonResourceURLs": sorted(self.paths)}
        out = {"verbs": sorted(self.verbs), "apiGroups": sorted(self.api_groups),
               "resources": sorted(self.resources)}
        if self.resource_names:
            out["resourceNames"] = sorted(self.resource_names)
        return out


@dataclasses.dataclass(frozen=True)
class Grant:
    namespace: str              # "" = everywhere (a ClusterRoleBinding)
    rules: tuple
    binding: str                # 'ClusterRoleBinding "x"' or 'RoleBinding "ns/x"'
    role: str                   # 'ClusterRole "view"'


def subject_keys(user, groups):
    return [("User", user)] + [("Group", g) for g in groups]


def _subject_key(subject, binding_namespace):
    if not isinstance(subject, dict) or not isinstance(subject.get("name"), str):
        return None
    kind = subject.get("kind")
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return ("User", "system:serviceaccount:%s:%s" % (ns, subject["name"]))
    if kind in ("User", "Group"):
        return (kind, subject["name"])
    return None


class RbacIndex:
    """Grants by subject, from the stored RBAC objects plus the built-in ones."""

    def __init__(self, roles=(), cluster_roles=(), role_bindings=(), cluster_role_bindings=()):
        cluster_role_rules = {name: self._rules(r) for name, r in BUILTIN_CLUSTER_ROLES.items()}
        self.raw_rules = {("ClusterRole", "", name): r.get("rules") for name, r in BUILTIN_CLUSTER_ROLES.items()}
        for r in cluster_roles:
            cluster_role_rules.setdefault(r["metadata"]["name"], self._rules(r))
            self.raw_rules.setdefault(("ClusterRole", "", r["metadata"]["name"]), r.get("rules"))
        role_rules = {(r["metadata"].get("namespace", ""), r["metadata"]["name"]): self._rules(r) for r in roles}
        for r in roles:
            self.raw_rules[("Role", r["metadata"].get("namespace", ""), r["metadata"]["name"])] = r.get("rules")
        self.grants = {}
        bindings = list(BUILTIN_CLUSTER_ROLE_BINDINGS.values())
        bindings += [b for b in cluster_role_bindings if b["metadata"]["name"] not in BUILTIN_CLUSTER_ROLE_BINDINGS]
        for b in bindings:
            ref = b.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole" and ref.get("name") in cluster_role_rules:
                self._grant(b, "", cluster_role_rules[ref["name"]], 'ClusterRoleBinding "%s"' % b["metadata"]["name"],
                            'ClusterRole "%s"' % ref["name"])
        for b in role_bindings:
            ns = b["metadata"].get("namespace", "")
            ref = b.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole":
                rules = cluster_role_rules.get(ref.get("name"))
            elif ref.get("kind") == "Role":
                rules = role_rules.get((ns, ref.get("name")))
            else:
                rules = None
            if rules:        # a binding to a missing role grants nothing (until the role exists)
                self._grant(b, ns, rules, 'RoleBinding "%s/%s"' % (ns, b["metadata"]["name"]),
                            '%s "%s"' % (ref["kind"], ref["name"]))

    @staticmethod
    def _rules(role):
        rules = role.get("rules")
        return tuple(Rule.of(r) for r in rules if isinstance(r, dict)) if isinstance(rules, list) else ()

    def _grant(self, binding, namespace, rules, binding_name, role_name):
        grant = Grant(namespace, rules, binding_name, role_name)
        for subject in binding.get("subjects") or []:
            key = _subject_key(subject, namespace)
            if key is not None:
                self.grants.setdefault(key, []).append(grant)

    def _applicable(self, user, groups, namespace):
        for key in subject_keys(user, groups):
            for grant in self.grants.get(key, ()):
                if not grant.namespace or grant.namespace == namespace:
                    yield key, grant

    def authorize(self, user, groups, attrs):
        """(allowed, reason): reason names the binding and role that allowed it."""
        for key, grant in self._applicable(user, groups, attrs.namespace):
            if grant.namespace and not attrs.is_resource:
                continue            # paths are granted cluster-wide only
            for rule in grant.rules:
                if rule.allows(attrs):
                    return True, 'RBAC: allowed by %s of %s to %s "%s"' % (grant.binding, grant.role, key[0], key[1])
        return False, ""

    def rules_for(self, user, groups, namespace):
        """(resource rules, non-resource rules) the subject has in `namespace`."""
        resource, paths = [], []
        for _, grant in self._applicable(user, groups, namespace):
            for rule in grant.rules:
                if rule.paths:
                    if not grant.namespace:
                        paths.append(rule.as_review_rule())
                else:
                    resource.append(rule.as_review_rule())
        return resource, paths
