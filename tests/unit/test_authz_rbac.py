"""RBAC evaluation (api/authz/rbac.py) and request attributes (attributes.py)."""
from shepherd_ha.api.authz.attributes import Attributes, forbidden_message, from_request
from shepherd_ha.api.authz.rbac import RbacIndex

from authz_kit import binding, group, role, user


def attrs(verb, resource, namespace="", name="", sub="", group_=""):
    return Attributes(verb, resource, group_, sub, namespace, name)


def allowed(index, who, a, groups=()):
    return index.authorize(who, tuple(groups), a)[0]


def test_request_attributes_follow_kubernetes_request_info():
    cases = {
        ("GET", "/api/v1/namespaces/default/pods", ""): ("list", "pods", "", "default", ""),
        ("GET", "/api/v1/namespaces/default/pods", "watch=true"): ("watch", "pods", "", "default", ""),
        ("GET", "/api/v1/namespaces/default/pods", "watch=yes"): ("watch", "pods", "", "default", ""),
        ("GET", "/api/v1/namespaces/default/pods", "watch=YES"): ("watch", "pods", "", "default", ""),
        ("GET", "/api/v1/pods", ""): ("list", "pods", "", "", ""),
        ("POST", "/api/v1/namespaces/default/pods", ""): ("create", "pods", "", "default", ""),
        ("GET", "/api/v1/namespaces/default/pods/web/log", ""): ("get", "pods", "log", "default", "web"),
        ("PATCH", "/api/v1/nodes/n1/status", ""): ("patch", "nodes", "status", "", "n1"),
        ("DELETE", "/api/v1/namespaces/default", ""): ("delete", "namespaces", "", "default", "default"),
        ("PUT", "/api/v1/namespaces/team/finalize", ""): ("update", "namespaces", "finalize", "team", "team"),
        ("GET", "/api/v1/namespaces/team/configmaps", ""): ("list", "configmaps", "", "team", ""),
        ("PUT", "/apis/apps/v1/namespaces/ns/deployments/d/scale", ""): ("update", "deployments", "scale", "ns", "d"),
        ("DELETE", "/api/v1/namespaces/default/configmaps", ""): ("deletecollection", "configmaps", "", "default", ""),
    }
    for (method, path, query), (verb, resource, sub, ns, name) in cases.items():
        args = dict(q.split("=") for q in query.split("&") if q)
        a = from_request(method, path, args)
        assert (a.verb, a.resource, a.subresource, a.namespace, a.name) == (verb, resource, sub, ns, name), path
    a = from_request("GET", "/apis/apps/v1/deployments", {})
    assert a.api_group == "apps"
    a = from_request("GET", "/metrics", {})
    assert not a.is_resource and a.path == "/metrics" and a.verb == "get"


def test_forbidden_message_has_kubernetes_shape():
    assert forbidden_message("alice", attrs("list", "pods", "default")) == \
        'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "default"'
    assert forbidden_message("bob", attrs("get", "deployments", "ns", "d", "scale", "apps")) == \
        'deployments.apps "d" is forbidden: User "bob" cannot get resource "deployments/scale" in API group ' \
        '"apps" in the namespace "ns"'
    assert forbidden_message("bob", attrs("list", "nodes")).endswith('in API group "" at the cluster scope')
    assert forbidden_message("bob", Attributes("get", path="/metrics")) == \
        'forbidden: User "bob" cannot get path "/metrics"'


def test_a_role_binding_grants_its_roles_rules_in_its_namespace_only():
    index = RbacIndex(roles=[role("reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
                                  "team-a")],
                      role_bindings=[binding("alice-reads", "reader", [user("alice")], "team-a")])
    assert allowed(index, "alice", attrs("list", "pods", "team-a"))
    assert allowed(index, "alice", attrs("get", "pods", "team-a", "web"))
    assert not allowed(index, "alice", attrs("list", "pods", "team-b"))
    assert not allowed(index, "alice", attrs("list", "pods"))           # all namespaces: needs a cluster grant
    assert not allowed(index, "alice", attrs("delete", "pods", "team-a", "web"))
    assert not allowed(index, "bob", attrs("list", "pods", "team-a"))


def test_a_role_binding_to_a_cluster_role_is_scoped_and_a_cluster_binding_is_not():
    reader = role("pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], kind="ClusterRole")
    index = RbacIndex(cluster_roles=[reader],
                      role_bindings=[binding("b", "pod-reader", [user("alice")], "team-a", "ClusterRole")],
                      cluster_role_bindings=[binding("c", "pod-reader", [group("ops")], role_kind="ClusterRole")])
    assert allowed(index, "alice", attrs("list", "pods", "team-a"))
    assert not allowed(index, "alice", attrs("list", "pods", "team-b"))
    assert allowed(index, "carol", attrs("list", "pods", "team-b"), ["ops"])
    assert allowed(index, "carol", attrs("list", "pods"), ["ops"])
    ok, reason = index.authorize("carol", ("ops",), attrs("list", "pods"))
    assert 'ClusterRoleBinding "c"' in reason and 'Group "ops"' in reason


def test_a_binding_to_a_role_of_another_namespace_or_a_missing_role_grants_nothing():
    index = RbacIndex(roles=[role("reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], "a")],
                      role_bindings=[binding("x", "reader", [user("alice")], "b"),
                                     binding("y", "nothing", [user("alice")], "a")])
    assert not allowed(index, "alice", attrs("list", "pods", "a"))
    assert not allowed(index, "alice", attrs("list", "pods", "b"))


def test_subresources_resource_names_groups_and_wildcards():
    rules = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
             {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"], "verbs": ["get", "update"]},
             {"apiGroups": ["apps"], "resources": ["*/scale"], "verbs": ["patch"]},
             {"apiGroups": ["*"], "resources": ["events"], "verbs": ["*"]}]
    index = RbacIndex(roles=[role("r", rules, "ns")], role_bindings=[binding("b", "r", [user("u")], "ns")])
    assert allowed(index, "u", attrs("get", "pods", "ns", "web"))
    assert not allowed(index, "u", attrs("get", "pods", "ns", "web", "log"))      # pods does not grant pods/log
    assert allowed(index, "u", attrs("get", "configmaps", "ns", "settings"))
    assert not allowed(index, "u", attrs("get", "configmaps", "ns", "other"))
    assert not allowed(index, "u", attrs("list", "configmaps", "ns"))             # a list names no object
    assert allowed(index, "u", attrs("patch", "deployments", "ns", "d", "scale", "apps"))
    assert not allowed(index, "u", attrs("patch", "deployments", "ns", "d", "", "apps"))
    assert not allowed(index, "u", attrs("patch", "deployments", "ns", "d", "scale", ""))   # wrong group
    assert allowed(index, "u", attrs("deletecollection", "events", "ns"))
    assert not allowed(index, "u", attrs("get", "pods", "ns", "web", group_="apps"))


def test_service_account_subjects_are_their_user_names():
    index = RbacIndex(roles=[role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], "ns")],
                      role_bindings=[binding("b", "r", [{"kind": "ServiceAccount", "name": "builder"}], "ns")])
    assert allowed(index, "system:serviceaccount:ns:builder", attrs("list", "pods", "ns"))
    assert not allowed(index, "builder", attrs("list", "pods", "ns"))


def test_built_in_roles_view_edit_admin_cluster_admin():
    bindings = [binding("v", "view", [user("viewer")], "ns", "ClusterRole"),
                binding("e", "edit", [user("editor")], "ns", "ClusterRole"),
                binding("a", "admin", [user("boss")], "ns", "ClusterRole")]
    index = RbacIndex(role_bindings=bindings)
    assert allowed(index, "viewer", attrs("list", "pods", "ns"))
    assert allowed(index, "viewer", attrs("get", "pods", "ns", "p", "log"))
    assert not allowed(index, "viewer", attrs("get", "secrets", "ns", "s"))
    assert not allowed(index, "viewer", attrs("create", "pods", "ns"))
    assert allowed(index, "editor", attrs("create", "pods", "ns"))
    assert allowed(index, "editor", attrs("patch", "deployments", "ns", "d", "scale", "apps"))
    assert allowed(index, "editor", attrs("get", "secrets", "ns", "s"))
    assert not allowed(index, "editor", attrs("create", "rolebindings", "ns", group_="rbac.authorization.k8s.io"))
    assert allowed(index, "boss", attrs("create", "rolebindings", "ns", group_="rbac.authorization.k8s.io"))
    assert not allowed(index, "boss", attrs("delete", "namespaces", "ns", "ns"))
    assert not allowed(index, "boss", attrs("list", "pods", "other"))
    # the built-in bindings: system:masters to cluster-admin, shepherd:view to view (cluster-wide)
    assert allowed(index, "root", attrs("delete", "nodes", name="n1"), ["system:masters"])
    assert allowed(index, "root", Attributes("get", path="/anything"), ["system:masters"])
    assert allowed(index, "old-viewer", attrs("list", "pods"), ["shepherd:view"])
    assert allowed(index, "old-viewer", attrs("list", "nodes"), ["shepherd:view"])
    assert allowed(index, "old-viewer", Attributes("get", path="/shepherd/v1/cluster"), ["shepherd:view"])
    assert not allowed(index, "old-viewer", attrs("create", "pods", "ns"), ["shepherd:view"])
    assert not allowed(index, "old-viewer", Attributes("get", path="/shepherd/v1/snapshot"), ["shepherd:view"])


def test_stored_objects_cannot_replace_the_built_in_ones():
    evil = role("view", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], kind="ClusterRole")
    index = RbacIndex(cluster_roles=[evil],
                      cluster_role_bindings=[binding("shepherd:view", "cluster-admin", [user("mallory")],
                                                     role_kind="ClusterRole")])
    assert not allowed(index, "x", attrs("create", "pods", "ns"), ["shepherd:view"])
    assert not allowed(index, "mallory", attrs("create", "pods", "ns"))


def test_non_resource_paths_need_a_cluster_binding():
    paths = role("paths", [{"nonResourceURLs": ["/metrics", "/shepherd/v1/*"], "verbs": ["get"]}], kind="ClusterRole")
    index = RbacIndex(cluster_roles=[paths],
                      cluster_role_bindings=[binding("c", "paths", [user("mon")], role_kind="ClusterRole")],
                      role_bindings=[binding("r", "paths", [user("ns-only")], "ns", "ClusterRole")])
    assert allowed(index, "mon", Attributes("get", path="/metrics"))
    assert allowed(index, "mon", Attributes("get", path="/shepherd/v1/replica"))
    assert not allowed(index, "mon", Attributes("post", path="/shepherd/v1/members"))
    assert not allowed(index, "ns-only", Attributes("get", path="/metrics"))


def test_rules_review_lists_what_applies_in_a_namespace():
    index = RbacIndex(role_bindings=[binding("v", "view", [user("viewer")], "ns", "ClusterRole")])
    resource, paths = index.rules_for("viewer", (), "ns")
    assert any("pods" in r["resources"] and "list" in r["verbs"] for r in resource) and paths == []
    assert index.rules_for("viewer", (), "other") == ([], [])
