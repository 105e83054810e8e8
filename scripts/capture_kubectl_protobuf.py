"""Captures the protobuf request bodies the real kubectl (on PATH) sends, as golden test
data for tests/unit/test_api_protobuf_golden.py: runs the real API over the in-memory
store (tests/unit/real_api.py) on loopback, runs kubectl's typed commands against it
and writes each protobuf body to tests/unit/data/kubectl_protobuf/NAME.bin, and for
`kubectl create` the object it prints with --dry-run=client -o json to NAME.json (the
same object as JSON: what the decoded body must equal).

    PYTHONPATH=.:tests/unit python scripts/capture_kubectl_protobuf.py
"""
import os
import subprocess
import sys
import tempfile

import yaml

from real_api import ApiServer

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "unit", "data",
                   "kubectl_protobuf")
# file name: kubectl arguments (the first protobuf body each sends is kept). kubectl drain
# posts its Evictions as JSON, so there is none of those here.
COMMANDS = {
    "deployment": ["create", "deployment", "web", "--image=nginx:1.25", "--replicas=2", "--port=8080"],
    "selfsubjectaccessreview": ["auth", "can-i", "create", "pods"],
    "selfsubjectrulesreview": ["auth", "can-i", "--list"],
    "service_clusterip": ["create", "service", "clusterip", "web", "--tcp=80:8080"],
    "service_nodeport": ["create", "service", "nodeport", "web-np", "--tcp=80:8080", "--node-port=30080"],
    "role": ["create", "role", "reader", "--verb=get,list", "--resource=pods,deployments.apps"],
    "rolebinding": ["create", "rolebinding", "reader", "--role=reader", "--user=alice", "--serviceaccount=default:sa"],
    "clusterrole": ["create", "clusterrole", "nodes-reader", "--verb=get", "--resource=nodes",
                    "--non-resource-url=/healthz"],
    "clusterrolebinding": ["create", "clusterrolebinding", "nodes-reader", "--clusterrole=nodes-reader",
                           "--group=ops"],
    # drain without evictions deletes each pod (DeleteOptions); the pod stays terminating here
    # (no agent), so drain times out: only its body matters.
    "deleteoptions": ["drain", "capture-node", "--disable-eviction", "--force", "--grace-period=7",
                      "--timeout=2s"],
}


def main():
    server = ApiServer().start()
    server.store.put("nodes", {"metadata": {"name": "capture-node"}})
    server.store.put("pods", {"metadata": {"name": "victim", "namespace": "default"},
                              "spec": {"nodeName": "capture-node", "containers": [{"name": "a", "image": "x"}]}})
    with tempfile.TemporaryDirectory() as tmp:
        config = os.path.join(tmp, "config")
        with open(config, "w") as fh:
            yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                            "clusters": [{"name": "c", "cluster": {"server": server.url}}],
                            "contexts": [{"name": "c", "context": {"cluster": "c", "namespace": "default"}}],
                            "users": []}, fh)
        for name, args in COMMANDS.items():
            seen = len(server.requests)
            proc = subprocess.run(["kubectl", "--kubeconfig", config, "--cache-dir", os.path.join(tmp, "cache")]
                                  + args, capture_output=True, text=True, timeout=60)
            bodies = [r for r in server.requests[seen:]
                      if (r.get("content_type") or "").startswith("application/vnd.kubernetes.protobuf")]
            if not bodies:
                sys.exit("%s sent no protobuf body (kubectl said: %s %s)" % (name, proc.stdout, proc.stderr))
            with open(os.path.join(OUT, name + ".bin"), "wb") as fh:
                fh.write(bodies[0]["raw"])
            if args[0] == "create":    # what kubectl would send as JSON: the test's expected object
                proc = subprocess.run(["kubectl", "--kubeconfig", config, "--cache-dir", os.path.join(tmp, "cache")]
                                      + args + ["--dry-run=client", "-o", "json"], capture_output=True, text=True,
                                      timeout=60, check=True)
                with open(os.path.join(OUT, name + ".json"), "w") as fh:
                    fh.write(proc.stdout)
            print(name, bodies[0]["method"], bodies[0]["path"], len(bodies[0]["raw"]), "bytes; kubectl:",
                  (proc.stdout + proc.stderr).strip().splitlines()[:1])
    server.stop()


if __name__ == "__main__":
    main()
