"""sheepctl auth can-i: what it asks the server, and yes/no with exit 0/1."""
from ctl.commands.auth import resource_attributes
from ctl.main import main as sheepctl


def test_can_i_arguments_become_review_attributes():
    assert resource_attributes("list", "pods", None, "default") == \
        {"resourceAttributes": {"verb": "list", "resource": "pods", "group": "", "namespace": "default"}}
    assert resource_attributes("get", "po/log", "web", "ns") == \
        {"resourceAttributes": {"verb": "get", "resource": "pods", "group": "", "subresource": "log",
                                "name": "web", "namespace": "ns"}}
    assert resource_attributes("patch", "deploy/scale", "web", "ns")["resourceAttributes"]["group"] == "apps"
    assert resource_attributes("list", "deployments.apps", None, "ns")["resourceAttributes"]["group"] == "apps"
    nodes = resource_attributes("list", "nodes", None, "default")["resourceAttributes"]
    assert "namespace" not in nodes                       # cluster-scoped: no namespace
    assert resource_attributes("create", "rolebindings", None, "ns")["resourceAttributes"]["group"] == \
        "rbac.authorization.k8s.io"
    assert resource_attributes("get", "/metrics", None, "ns") == \
        {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}
    assert resource_attributes("*", "*", None, "ns")["resourceAttributes"]["resource"] == "*"


def test_can_i_prints_yes_or_no_and_exits_like_kubectl(capsys):
    from authz_kit import FsmReplica, binding, token_for, user
    from shepherd_ha.api import auth
    from shepherd_ha.api.app import create_app
    from test_api_pod_logs import Served
    replica = FsmReplica()
    replica.put("rolebindings", binding("v", "view", [user("alice")], "default", "ClusterRole"))
    table = auth.TokenTable({token_for(n): auth.User(n, n, g) for n, g in
                             (("alice", ()), ("admin", ("system:masters",)))})
    served = Served(create_app(replica, tokens=table))
    try:
        def can_i(*argv, who="alice"):
            code = sheepctl(["auth", "can-i"] + list(argv) + ["--server", served.url, "--token", token_for(who)])
            return code, capsys.readouterr()
        assert can_i("list", "pods", "-n", "default")[0] == 0
        code, out = can_i("list", "pods", "-n", "kube-system")
        assert code == 1 and out.out.strip() == "no"
        code, out = can_i("delete", "pods", "web", "-n", "default")
        assert (code, out.out.strip()) == (1, "no")
        code, out = can_i("get", "pods/log", "web", "-n", "default", "-q")
        assert (code, out.out) == (0, "")
        code, out = can_i("create", "pods", "--as", "alice", who="admin")
        assert (code, out.out.strip()) == (1, "no")
        code, out = can_i("get", "pods", "--as", "admin", who="alice")
        assert code == 1 and 'cannot impersonate resource "users"' in out.err
        code, out = can_i("--list", "-n", "default")
        assert code == 0 and "pods" in out.out and "[get list watch]" in out.out
        code, out = can_i()
        assert code == 1 and "usage: sheepctl auth can-i" in out.err
        code, out = can_i("get", "pods", "--as-group", "g")
        assert code == 1 and "--as-group needs --as" in out.err
    finally:
        served.stop()
