"""A real kubeconfig for a cluster (kubectl, client-go, the Python kubernetes client,
sheepctl --kubeconfig), and reading one back.

One cluster entry (kubectl takes one server URL per cluster: the first replica's),
with the CA inline (certificate-authority-data); every replica's URL is also kept in
the cluster's `shepherd.io/servers` extension, which sheepctl reads to fail over;
one user (the admin's bearer token, or a client certificate); one context, current.
With `replicas` ({id: URL}) each replica also gets a cluster and a context of its own,
CLUSTER-ID (`kubectl --context shepherd-r2`, the Python client's
`load_kube_config(context=...)`): clients that take one server per context (client-go,
the Python client) pick another replica by context when theirs is down.
"""
import base64
import hashlib
import os
import tempfile

import yaml

from .pki import write_private

SERVERS_EXTENSION = "shepherd.io/servers"


class KubeconfigError(ValueError):
    pass


def build(servers, ca_pem, token=None, cluster="shepherd", user="admin", namespace="default",
          client_cert_pem=None, client_key_pem=None, cluster_id=None, replicas=None):
    """The kubeconfig as a dict. `cluster_id` goes into the servers extension: sheepctl
    sends it with every request (a replica of another cluster answers 421). `replicas`
    ({id: URL}): a context per replica besides the current one."""
    if isinstance(ca_pem, str):
        ca_pem = ca_pem.encode()
    servers = list(servers)
    if not servers:
        raise KubeconfigError("a kubeconfig needs at least one server URL")
    entry = {"server": servers[0], "certificate-authority-data": base64.b64encode(ca_pem).decode()}
    extension = {"apiVersion": "v1", "kind": "Config", "servers": servers}
    if cluster_id:
        extension["clusterId"] = cluster_id
    entry["extensions"] = [{"name": SERVERS_EXTENSION, "extension": extension}]
    user_entry = {}
    if token:
        user_entry["token"] = token
    if client_cert_pem:
        user_entry["client-certificate-data"] = base64.b64encode(client_cert_pem).decode()
        user_entry["client-key-data"] = base64.b64encode(client_key_pem).decode()
    clusters = [{"name": cluster, "cluster": entry}]
    contexts = [{"name": cluster, "context": {"cluster": cluster, "user": user, "namespace": namespace}}]
    for ident, url in (replicas or {}).items():
        # one server only (sheepctl's failover list stays with the main context), the same cluster id
        name = "%s-%s" % (cluster, ident)
        clusters.append({"name": name, "cluster": {
            "server": url, "certificate-authority-data": entry["certificate-authority-data"],
            "extensions": [{"name": SERVERS_EXTENSION, "extension": dict(extension, servers=[url])}]}})
        contexts.append({"name": name, "context": {"cluster": name, "user": user, "namespace": namespace}})
    return {"apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": clusters, "users": [{"name": user, "user": user_entry}],
            "contexts": contexts, "current-context": cluster}


def write(path, config):
    """0600: it holds a credential."""
    write_private(path, yaml.safe_dump(config, sort_keys=False))
    return path


def is_kubeconfig(data):
    return isinstance(data, dict) and data.get("kind") == "Config" and "clusters" in data


def _named(items, name, what, path):
    for item in items or []:
        if isinstance(item, dict) and item.get("name") == name:
            return item.get(what) or {}
    raise KubeconfigError("kubeconfig %s has no %s named %r" % (path, what, name))


def ca_file_for(data_b64, directory=None):
    """certificate-authority-data as a file (requests verifies against a path), named by
    its digest under a private directory of ours; a CA certificate is public, the
    directory private only so that nobody else can swap it."""
    try:
        pem = base64.b64decode(data_b64, validate=True)
    except (ValueError, TypeError):
        raise KubeconfigError("certificate-authority-data is not base64")
    directory = directory or os.path.join(tempfile.gettempdir(), "shepherd-ca-%d" % os.getuid())
    os.makedirs(directory, mode=0o700, exist_ok=True)
    if os.stat(directory).st_uid != os.getuid():
        raise KubeconfigError("%s belongs to another user: cannot keep the CA there" % directory)
    os.chmod(directory, 0o700)
    path = os.path.join(directory, hashlib.sha256(pem).hexdigest()[:32] + ".crt")
    if not os.path.exists(path):
        tmp = path + ".%d.tmp" % os.getpid()
        with open(tmp, "wb") as fh:
            fh.write(pem)
        os.replace(tmp, path)
    return path


def read(data, path, context=None):
    """{servers, namespace, token, ca_file, client_cert, cluster_id} of a parsed kubeconfig's context."""
    name = context or data.get("current-context")
    if not name:
        raise KubeconfigError("kubeconfig %s has no current-context (pass a context)" % path)
    ctx = _named(data.get("contexts"), name, "context", path)
    cluster = _named(data.get("clusters"), ctx.get("cluster"), "cluster", path)
    user = _named(data.get("users"), ctx.get("user"), "user", path) if ctx.get("user") else {}
    servers = cluster_id = None
    for ext in cluster.get("extensions") or []:
        if isinstance(ext, dict) and ext.get("name") == SERVERS_EXTENSION:
            servers = (ext.get("extension") or {}).get("servers")
            cluster_id = (ext.get("extension") or {}).get("clusterId")
    if not servers:
        servers = [cluster.get("server")] if cluster.get("server") else []
    if not servers:
        raise KubeconfigError("kubeconfig %s: cluster %r has no server" % (path, ctx.get("cluster")))
    ca_file = cluster.get("certificate-authority")
    if ca_file and not os.path.isabs(ca_file):
        ca_file = os.path.join(os.path.dirname(os.path.abspath(path)), ca_file)
    if not ca_file and cluster.get("certificate-authority-data"):
        ca_file = ca_file_for(cluster["certificate-authority-data"])
    token = user.get("token")
    if not token and user.get("tokenFile"):
        with open(user["tokenFile"]) as fh:
            token = fh.read().strip()
    cert = None
    if user.get("client-certificate") and user.get("client-key"):
        cert = (user["client-certificate"], user["client-key"])
    return {"servers": [str(s) for s in servers], "namespace": ctx.get("namespace"), "token": token,
            "ca_file": ca_file, "client_cert": cert,
            "cluster_id": cluster_id if isinstance(cluster_id, str) and cluster_id else None}
