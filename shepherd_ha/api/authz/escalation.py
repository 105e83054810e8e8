"""RBAC's escalation check, as Kubernetes does it: creating or changing a Role,
ClusterRole or a binding may not give anyone more than the writer already has.

A write of a role passes when the writer already holds every permission in it (in the
role's namespace; everywhere for a ClusterRole) or may `escalate` it; a write of a
binding passes when the writer holds every permission of the role it binds (where the
binding applies) or may `bind` that role. Wildcards are permissions of their own: a
rule with verbs ["*"] needs the writer to hold "*". Without this, a namespace's
`admin` could bind itself `cluster-admin` there or mint a role with any verb.
"""
from shepherd_ha.model.merge_patch import merge_patch

from .attributes import Attributes

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_KINDS = ("roles", "clusterroles")
BINDING_KINDS = ("rolebindings", "clusterrolebindings")


def _strings(rule, key):
    value = rule.get(key) if isinstance(rule, dict) else None
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def permissions(rules, namespace):
    """Every (verb, group, resource, subresource, name | path) a list of rules grants, as Attributes."""
    for rule in rules if isinstance(rules, list) else []:
        verbs = _strings(rule, "verbs")
        for path in _strings(rule, "nonResourceURLs"):
            for verb in verbs:
                yield Attributes(verb, path=path)
        for group in _strings(rule, "apiGroups") or ([] if _strings(rule, "nonResourceURLs") else [""]):
            for resource in _strings(rule, "resources"):
                base, _, sub = resource.partition("/")
                for name in _strings(rule, "resourceNames") or [""]:
                    for verb in verbs:
                        yield Attributes(verb, base, group, sub, namespace, name)


def _target(attrs, body, current):
    """The object as it will be after this write (a patch applied to the current object)."""
    if attrs.verb == "patch":
        return merge_patch(current, body) if isinstance(current, dict) and isinstance(body, dict) else None
    return body


def check(authorizer, replica, user, groups, attrs, body):
    """None when the write gives no one more than `user` has; else the sentence why not.
    body(): the parsed request body."""
    if attrs.api_group != RBAC_GROUP or attrs.verb not in ("create", "update", "patch") or attrs.subresource:
        return None
    if attrs.resource not in ROLE_KINDS + BINDING_KINDS:
        return None
    body = body()                      # read only for RBAC writes
    current = None
    if attrs.verb == "patch":
        current, _ = replica.get(attrs.resource, attrs.namespace or None, attrs.name, False)
    obj = _target(attrs, body, current)
    if not isinstance(obj, dict):
        return None                    # the handler answers the malformed body (400/404/422)
    namespace = attrs.namespace if attrs.resource in ("roles", "rolebindings") else ""
    if attrs.resource in ROLE_KINDS:
        name = (obj.get("metadata") or {}).get("name") if isinstance(obj.get("metadata"), dict) else attrs.name
        may, _ = authorizer.authorize(user, groups, Attributes("escalate", attrs.resource, RBAC_GROUP, "",
                                                               namespace, name or ""))
        if may:
            return None
        rules = obj.get("rules")
        what = "%s %s" % (attrs.resource[:-1], name)
    else:
        ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
        kind, role_name = ref.get("kind"), ref.get("name")
        plural = {"Role": "roles", "ClusterRole": "clusterroles"}.get(kind)
        if plural is None or not isinstance(role_name, str):
            return None                # validation refuses it
        may, _ = authorizer.authorize(user, groups, Attributes("bind", plural, RBAC_GROUP, "",
                                                               namespace if plural == "roles" else "", role_name))
        if may:
            return None
        rules = authorizer.role_rules(kind, namespace, role_name)
        what = "a binding to %s %s" % (kind, role_name)
    for permission in permissions(rules, namespace):
        allowed, _ = authorizer.authorize(user, groups, permission)
        if not allowed:
            held = ("path %s" % permission.path) if not permission.is_resource else \
                'resource "%s" in API group "%s"%s' % (permission.full_resource, permission.api_group,
                                                        ' named "%s"' % permission.name if permission.name else "")
            return ("%s would grant %s on %s%s, which User \"%s\" does not have: an RBAC write may not give more "
                    "than the writer holds (or needs the verb %s)" % (
                        what, permission.verb, held, ' in the namespace "%s"' % namespace if namespace else "",
                        user, "escalate" if attrs.resource in ROLE_KINDS else "bind"))
    return None
