"""Per-request cost of authorization (api/authz/): the decision the API makes before
every authenticated request, over an FSM holding many RBAC objects and pods. Prints
figures, asserts nothing.

    python3 bench/bench_authz.py [--namespaces 200] [--bindings-per-ns 5] [--pods-per-ns 50]

Cases: an admin (system:masters, short-circuited); an RBAC user allowed by a
RoleBinding in one namespace among thousands of bindings, and one refused; a node
patching its own pod's status (one local read), getting a ConfigMap its pod uses
(a scan of the namespace's pods) and listing its pods; the rebuild of the RBAC
index after a change (paid once per change, not per request); and a whole request
through the Flask app (GET of one pod) with and without authorization.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit"))

from common import print_machine, say, table  # noqa: E402

from authz_kit import FsmReplica, app_client, bearer, binding, role, user  # noqa: E402
from shepherd_ha.api.authz.attributes import Attributes, from_request  # noqa: E402
from shepherd_ha.api.authz.authorizer import Authorizer  # noqa: E402
from shepherd_ha.store.mirror import Mirror  # noqa: E402


class MirrorReplica:
    """The read side of an API worker (RemoteReplica) over a Mirror: what production runs."""

    def __init__(self, fsm):
        self.mirror = Mirror()
        self.mirror.replace({r: dict(b) for r, b in fsm.objects.items()}, fsm.revision)

    def get(self, resource, namespace, name, consistent=True):
        return self.mirror.get(resource, namespace, name), self.mirror.revision

    def list(self, resource, namespace=None, consistent=True, selection=None):
        return self.mirror.list(resource, namespace, selection), self.mirror.revision

    def revision(self):
        return self.mirror.revision

    def change_marks(self, resources):
        return self.mirror.change_marks(resources)


def fill(replica, namespaces, bindings_per_ns, pods_per_ns):
    for i in range(namespaces):
        ns = "ns-%03d" % i
        replica.put("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                                   "spec": {}, "status": {"phase": "Active"}})
        replica.put("roles", role("reader", [{"apiGroups": [""], "resources": ["pods", "configmaps"],
                                              "verbs": ["get", "list", "watch"]}], ns))
        for b in range(bindings_per_ns):
            replica.put("rolebindings", binding("b-%d" % b, "reader", [user("user-%d-%d" % (i, b))], ns))
        replica.put("configmaps", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns},
                                   "data": {"k": "v"}})
        for p in range(pods_per_ns):
            spec = {"containers": [{"name": "app", "image": "busybox"}], "nodeName": "node-%d" % (p % 10)}
            if p == 0:
                spec["volumes"] = [{"name": "v", "configMap": {"name": "cfg"}}]
            replica.put("pods", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-%d" % p, "namespace": ns},
                                 "spec": spec})


def per_call(fn, seconds=1.0):
    fn()
    count, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(100):
            fn()
        count += 100
    return (time.perf_counter() - t0) / count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--namespaces", type=int, default=200)
    ap.add_argument("--bindings-per-ns", type=int, default=5)
    ap.add_argument("--pods-per-ns", type=int, default=50)
    args = ap.parse_args()
    print_machine()
    replica = FsmReplica()
    t0 = time.perf_counter()
    fill(replica, args.namespaces, args.bindings_per_ns, args.pods_per_ns)
    say("filled: %d namespaces, %d roles, %d rolebindings, %d pods (%.1f s)" % (
        args.namespaces, args.namespaces, args.namespaces * args.bindings_per_ns,
        args.namespaces * args.pods_per_ns, time.perf_counter() - t0))
    authz = Authorizer(replica)
    authz.index.current()
    ns = "ns-%03d" % (args.namespaces // 2)
    n0 = ("system:node:node-0", ("system:nodes", "system:authenticated"))
    cases = [
        ("admin (system:masters)", lambda: authz.authorize("root", ("system:masters",), Attributes("delete", "pods", "", "", ns, "p-1"))),
        ("RBAC user, allowed", lambda: authz.authorize("user-%d-0" % (args.namespaces // 2), ("system:authenticated",),
                                                       Attributes("list", "pods", "", "", ns))),
        ("RBAC user, refused", lambda: authz.authorize("user-0-0", ("system:authenticated",),
                                                       Attributes("list", "pods", "", "", ns))),
        ("node: patch own pod status", lambda: authz.authorize(*n0, Attributes("patch", "pods", "", "status", ns, "p-0"))),
        ("node: get configmap its pod uses", lambda: authz.authorize(*n0, Attributes("get", "configmaps", "", "", ns, "cfg"))),
        ("node: watch its pods", lambda: authz.authorize(*n0, Attributes("watch", "pods", field_selector="spec.nodeName=node-0"))),
        ("request attributes from the URL", lambda: from_request("PATCH", "/api/v1/namespaces/%s/pods/p-0/status" % ns, {})),
    ]
    rows = []
    for label, fn in cases:
        assert fn() is not None
        rows.append((label, "%.1f" % (per_call(fn) * 1e6)))

    def rebuild():
        authz.index._revision = None        # as after any write
        authz.index._fingerprint = None     # as after an RBAC write
        authz.index.current()
    rows.append(("index rebuild after an RBAC change", "%.0f" % (per_call(rebuild, 2.0) * 1e6)))

    def unchanged():
        authz.index._revision = None        # a write of something else: fingerprint only
        authz.index.current()
    rows.append(("index check after a write, FSM-backed replica (tests)", "%.0f" % (per_call(unchanged, 1.0) * 1e6)))
    worker = Authorizer(MirrorReplica(replica.fsm))
    worker.index.current()
    rows.append(("index check, API worker (mirror change marks)", "%.1f" % (per_call(worker.index.current) * 1e6)))
    rows.append(("RBAC user allowed, API worker", "%.1f" % (per_call(lambda: worker.authorize(
        "user-%d-0" % (args.namespaces // 2), ("system:authenticated",), Attributes("list", "pods", "", "", ns)))
        * 1e6)))
    say()
    table(["case", "µs per call"], rows)

    users = {"root": ["system:masters"], "user-%d-0" % (args.namespaces // 2): []}
    with_authz = app_client(replica, users)
    from shepherd_ha.api.app import create_app
    plain = create_app(replica).test_client()
    path = "/api/v1/namespaces/%s/pods/p-1?resourceVersion=0" % ns
    who = "user-%d-0" % (args.namespaces // 2)
    with_authz.get(path, headers=bearer(who))
    runs = {"GET one pod, no auth at all": lambda: plain.get(path),
            "GET one pod, token + RBAC (RoleBinding)": lambda: with_authz.get(path, headers=bearer(who)),
            "GET one pod, token + system:masters": lambda: with_authz.get(path, headers=bearer("root"))}
    best = {label: float("inf") for label in runs}
    for _ in range(3):          # interleaved, best of 3: the machine is shared
        for label, fn in runs.items():
            best[label] = min(best[label], per_call(fn, 1.0))
    rows = [(label, "%.0f" % (value * 1e6)) for label, value in best.items()]
    say()
    table(["whole request (Flask test client, no network)", "µs"], rows)


if __name__ == "__main__":
    main()
