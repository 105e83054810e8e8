"""RBAC through the real app: changed at runtime (the next request sees it), the
access reviews `auth can-i` asks, impersonation, and the stored kinds' validation."""
from authz_kit import FsmReplica, app_client, bearer, binding, role, user

RBAC = "/apis/rbac.authorization.k8s.io/v1"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def make():
    replica = FsmReplica()
    return replica, app_client(replica, {"admin": ["system:masters"], "alice": ["team-a"], "bob": []})


def can(client, who, verb, resource, namespace="default", name="", **headers):
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": namespace,
                                            "name": name}}}
    resp = client.post(SSAR, json=body, headers=bearer(who, **headers))
    assert resp.status_code == 201, resp.json
    return resp.json["status"]["allowed"]


def test_rbac_changed_at_runtime_applies_to_the_next_request():
    replica, c = make()
    resp = c.get("/api/v1/namespaces/default/pods", headers=bearer("alice"))
    assert resp.status_code == 403
    assert resp.json["message"] == ('pods is forbidden: User "alice" cannot list resource "pods" in API group "" '
                                    'in the namespace "default"')
    assert resp.json["details"] == {"kind": "pods"}
    reader = role("pod-reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
                  "default")
    assert c.post(RBAC + "/namespaces/default/roles", json=reader, headers=bearer("admin")).status_code == 201
    assert c.get("/api/v1/namespaces/default/pods", headers=bearer("alice")).status_code == 403   # no binding yet
    grant = binding("alice-reads", "pod-reader", [user("alice")], "default")
    assert c.post(RBAC + "/namespaces/default/rolebindings", json=grant, headers=bearer("admin")).status_code == 201
    assert c.get("/api/v1/namespaces/default/pods", headers=bearer("alice")).status_code == 200
    assert c.get("/api/v1/namespaces/kube-system/pods", headers=bearer("alice")).status_code == 403
    assert c.post("/api/v1/namespaces/default/pods", json={}, headers=bearer("alice")).status_code == 403
    # a change of the role is in force at once, and so is a deleted binding
    patch = '{"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]}'
    assert c.patch(RBAC + "/namespaces/default/roles/pod-reader", data=patch,
                   headers=bearer("admin", **{"Content-Type": "application/merge-patch+json"})).status_code == 200
    assert c.get("/api/v1/namespaces/default/pods", headers=bearer("alice")).status_code == 403
    assert c.get("/api/v1/namespaces/default/pods/x", headers=bearer("alice")).status_code == 404
    assert c.delete(RBAC + "/namespaces/default/rolebindings/alice-reads", headers=bearer("admin")).status_code == 200
    assert c.get("/api/v1/namespaces/default/pods/x", headers=bearer("alice")).status_code == 403


def test_a_group_binding_to_a_built_in_cluster_role():
    _, c = make()
    grant = binding("team-a-edits", "edit", [{"kind": "Group", "name": "team-a"}], "default", "ClusterRole")
    assert c.post(RBAC + "/namespaces/default/rolebindings", json=grant, headers=bearer("admin")).status_code == 201
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    assert c.post("/api/v1/namespaces/default/configmaps", json=cm, headers=bearer("alice")).status_code == 201
    assert c.post("/api/v1/namespaces/kube-system/configmaps", json=cm, headers=bearer("alice")).status_code == 403
    assert c.post(RBAC + "/namespaces/default/rolebindings", json=dict(grant, metadata={"name": "escalate"}),
                  headers=bearer("alice")).status_code == 403          # edit may not grant roles


def test_the_built_in_roles_cannot_be_replaced_and_bad_rules_are_422():
    _, c = make()
    evil = role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], kind="ClusterRole")
    resp = c.post(RBAC + "/clusterroles", json=evil, headers=bearer("admin"))
    assert resp.status_code == 422 and "built-in ClusterRole" in resp.json["message"]
    bad = role("r", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["steal"]}], "default")
    resp = c.post(RBAC + "/namespaces/default/roles", json=bad, headers=bearer("admin"))
    assert resp.status_code == 422 and "'steal' is not a verb" in resp.json["message"]
    bad = binding("b", "r", [{"kind": "Robot", "name": "x"}], "default")
    assert c.post(RBAC + "/namespaces/default/rolebindings", json=bad, headers=bearer("admin")).status_code == 422


def test_self_subject_access_review_answers_what_the_authorizer_applies():
    _, c = make()
    assert can(c, "admin", "delete", "namespaces", "default", "default")
    assert not can(c, "alice", "list", "pods")
    grant = binding("v", "view", [user("alice")], "default", "ClusterRole")
    c.post(RBAC + "/namespaces/default/rolebindings", json=grant, headers=bearer("admin"))
    assert can(c, "alice", "list", "pods") and not can(c, "alice", "list", "pods", "kube-system")
    assert not can(c, "alice", "create", "pods")
    resp = c.post(SSAR, json={"spec": {}}, headers=bearer("alice"))
    assert resp.status_code == 422 and "resourceAttributes" in resp.json["message"]
    rules = c.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
                   json={"spec": {"namespace": "default"}}, headers=bearer("alice")).json["status"]
    assert any("pods" in r["resources"] for r in rules["resourceRules"])


def test_impersonation_is_for_those_allowed_to_impersonate():
    _, c = make()
    grant = binding("v", "view", [user("alice")], "default", "ClusterRole")
    c.post(RBAC + "/namespaces/default/rolebindings", json=grant, headers=bearer("admin"))
    assert can(c, "admin", "list", "pods", **{"Impersonate-User": "alice"})
    assert not can(c, "admin", "create", "pods", **{"Impersonate-User": "alice"})
    assert not can(c, "admin", "list", "pods", **{"Impersonate-User": "carol"})
    assert can(c, "admin", "list", "pods", **{"Impersonate-User": "carol", "Impersonate-Group": "system:masters"})
    node = {"Impersonate-User": "system:node:n1", "Impersonate-Group": "system:nodes"}
    assert not can(c, "admin", "list", "configmaps", **node)
    resp = c.get("/api/v1/pods", headers=bearer("alice", **{"Impersonate-User": "admin"}))
    assert resp.status_code == 403 and 'cannot impersonate resource "users"' in resp.json["message"]
    resp = c.get("/api/v1/pods", headers=bearer("admin", **{"Impersonate-Group": "x"}))
    assert resp.status_code == 400 and "Impersonate-User" in resp.json["message"]


def test_the_index_is_rebuilt_only_when_rbac_objects_change():
    replica, c = make()
    authorizer = c.application.extensions["shepherd_authorizer"]
    c.get("/api/v1/namespaces/default/pods", headers=bearer("alice"))
    rebuilds = authorizer.index.rebuilds
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    c.post("/api/v1/namespaces/default/configmaps", json=cm, headers=bearer("admin"))
    c.get("/api/v1/namespaces/default/pods", headers=bearer("alice"))
    assert authorizer.index.rebuilds == rebuilds
    c.post(RBAC + "/namespaces/default/roles", json=role("r", [], "default"), headers=bearer("admin"))
    c.get("/api/v1/namespaces/default/pods", headers=bearer("alice"))
    assert authorizer.index.rebuilds == rebuilds + 1


def test_a_watch_needs_the_watch_verb_however_the_flag_is_spelled():
    _, c = make()
    lister = role("lister", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], "default")
    c.post(RBAC + "/namespaces/default/roles", json=lister, headers=bearer("admin"))
    c.post(RBAC + "/namespaces/default/rolebindings", json=binding("b", "lister", [user("bob")], "default"),
           headers=bearer("admin"))
    assert c.get("/api/v1/namespaces/default/pods", headers=bearer("bob")).status_code == 200
    for value in ("1", "true", "yes", "True"):
        resp = c.get("/api/v1/namespaces/default/pods?watch=" + value, headers=bearer("bob"))
        assert resp.status_code == 403 and "cannot watch" in resp.json["message"], value


def test_rbac_writes_may_not_grant_more_than_the_writer_holds():
    _, c = make()
    c.post(RBAC + "/namespaces/default/rolebindings", json=binding("boss", "admin", [user("bob")], "default",
                                                                    "ClusterRole"), headers=bearer("admin"))
    ok = binding("alice-edits", "edit", [user("alice")], "default", "ClusterRole")
    assert c.post(RBAC + "/namespaces/default/rolebindings", json=ok, headers=bearer("bob")).status_code == 201
    grab = binding("bob-root", "cluster-admin", [user("bob")], "default", "ClusterRole")
    resp = c.post(RBAC + "/namespaces/default/rolebindings", json=grab, headers=bearer("bob"))
    assert resp.status_code == 403 and "a binding to ClusterRole cluster-admin would grant" in resp.json["message"]
    assert "(or needs the verb bind)" in resp.json["message"]
    small = role("reader", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], "default")
    assert c.post(RBAC + "/namespaces/default/roles", json=small, headers=bearer("bob")).status_code == 201
    for rules in ([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
                  [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}],
                  [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["delete"]}]):
        resp = c.post(RBAC + "/namespaces/default/roles", json=role("big", rules, "default"), headers=bearer("bob"))
        assert resp.status_code == 403 and "an RBAC write may not give more" in resp.json["message"], rules
    patch = '{"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}'
    resp = c.patch(RBAC + "/namespaces/default/roles/reader", data=patch,
                   headers=bearer("bob", **{"Content-Type": "application/merge-patch+json"}))
    assert resp.status_code == 403
    assert c.post(RBAC + "/namespaces/default/roles", json=role("big", [{"apiGroups": ["*"], "resources": ["*"],
                                                                        "verbs": ["*"]}], "default"),
                  headers=bearer("admin")).status_code == 201     # system:masters may
    # bind: may bind a role it could not have written
    c.post(RBAC + "/clusterroles", json=role("binder", [{"apiGroups": ["rbac.authorization.k8s.io"],
                                                         "resources": ["roles"], "resourceNames": ["big"],
                                                         "verbs": ["bind"]}], kind="ClusterRole"),
           headers=bearer("admin"))
    c.post(RBAC + "/namespaces/default/rolebindings", json=binding("bob-binds", "binder", [user("bob")], "default",
                                                                    "ClusterRole"), headers=bearer("admin"))
    resp = c.post(RBAC + "/namespaces/default/rolebindings", json=binding("x", "big", [user("alice")], "default"),
                  headers=bearer("bob"))
    assert resp.status_code == 201, resp.json


def test_the_built_in_roles_are_listed_and_read_only():
    _, c = make()
    mine = role("monitoring", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], kind="ClusterRole")
    assert c.post(RBAC + "/clusterroles", json=mine, headers=bearer("admin")).status_code == 201
    names = [o["metadata"]["name"] for o in c.get(RBAC + "/clusterroles", headers=bearer("admin")).json["items"]]
    assert {"cluster-admin", "admin", "edit", "view", "monitoring"} <= set(names)
    view = c.get(RBAC + "/clusterroles/view", headers=bearer("admin")).json
    assert view["metadata"]["annotations"]["shepherd.io/built-in"] == "true"
    assert any("pods" in r.get("resources", []) for r in view["rules"])
    bindings = c.get(RBAC + "/clusterrolebindings", headers=bearer("admin")).json["items"]
    assert {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:masters"} in \
        next(b for b in bindings if b["metadata"]["name"] == "cluster-admin")["subjects"]
    patch = '{"rules":[{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}]}'
    resp = c.patch(RBAC + "/clusterroles/view", data=patch,
                   headers=bearer("admin", **{"Content-Type": "application/merge-patch+json"}))
    assert resp.status_code == 422 and "built-in ClusterRole" in resp.json["message"]
    assert c.delete(RBAC + "/clusterroles/view", headers=bearer("admin")).status_code == 404
    assert c.get(RBAC + "/clusterroles/view", headers=bearer("admin")).status_code == 200


def test_any_authenticated_user_may_discover_the_api_and_nothing_more():
    """kubectl starts every command with discovery: a user with no role at all must get it
    (Kubernetes' system:discovery), or kubectl fails before the user's own rules are asked."""
    _, c = make()
    for path in ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/openapi/v3", "/openapi/v2", "/version"):
        resp = c.get(path, headers=bearer("bob"))
        assert resp.status_code == 200, (path, resp.status_code, resp.data[:200])
    assert c.get("/metrics", headers=bearer("bob")).status_code == 403
    assert c.get("/api/v1/namespaces/default/pods", headers=bearer("bob")).status_code == 403
    assert c.get("/api", headers={"Authorization": "Bearer not-a-token-at-all"}).status_code == 401
    names = [b["metadata"]["name"] for b in c.get(RBAC + "/clusterrolebindings", headers=bearer("admin")).json["items"]]
    assert "system:discovery" in names


def test_finalizing_a_namespace_needs_update_on_namespaces_finalize():
    _, c = make()
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    assert c.post("/api/v1/namespaces", json=ns, headers=bearer("admin")).status_code == 201
    editor = role("ns-editor", [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "update"]}],
                  kind="ClusterRole")
    assert c.post(RBAC + "/clusterroles", json=editor, headers=bearer("admin")).status_code == 201
    grant = binding("alice-ns", "ns-editor", [user("alice")], role_kind="ClusterRole")
    assert c.post(RBAC + "/clusterrolebindings", json=grant, headers=bearer("admin")).status_code == 201
    body = dict(ns, spec={"finalizers": []})
    resp = c.put("/api/v1/namespaces/team/finalize", json=body, headers=bearer("alice"))
    assert resp.status_code == 403, resp.json
    assert 'cannot update resource "namespaces/finalize"' in resp.json["message"]
    finalizer = role("ns-finalizer", [{"apiGroups": [""], "resources": ["namespaces/finalize"], "verbs": ["update"]}],
                     kind="ClusterRole")
    assert c.post(RBAC + "/clusterroles", json=finalizer, headers=bearer("admin")).status_code == 201
    grant = binding("alice-fin", "ns-finalizer", [user("alice")], role_kind="ClusterRole")
    assert c.post(RBAC + "/clusterrolebindings", json=grant, headers=bearer("admin")).status_code == 201
    assert c.put("/api/v1/namespaces/team/finalize", json=body, headers=bearer("alice")).status_code == 200
    assert c.get("/api/v1/namespaces/team", headers=bearer("admin")).json["spec"]["finalizers"] == []
