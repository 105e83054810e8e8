"""The files of a cluster directory that name its replicas, written again whenever the
membership changes (`local up`, add-replica, remove-replica, restore):

  DIR/config               sheepctl's: the replicas' URLs (https on a TLS cluster), the
                           admin token, the CA (relative to DIR), the cluster id (0600)
  DIR/kubeconfig           kubectl's and client-go's, on a TLS cluster: the CA embedded,
                           every replica in the shepherd.io/servers extension, the
                           cluster id (0600); a context per replica (shepherd-ID)
  DIR/<id>/server.yaml     each replica's peers (ID@RAFT/API-URL), for its next start
  DIR/agents/*/agent.yaml  each agent's servers
"""
import os

import yaml

from shepherd_ha.tls import kubeconfig

from . import cluster_tls


def write_private(path, text):
    """Write a file only its owner can read, with no moment where others could."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)       # an existing file keeps its old mode through O_CREAT
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def write_client_files(cluster):
    """DIR/config, and DIR/kubeconfig when the cluster has TLS; returns DIR/config's path."""
    path = os.path.join(cluster.dir, "config")
    config = {"servers": cluster.api_urls(), "namespace": "default", "cluster_id": cluster.cluster_id()}
    token = cluster.token()
    if token:
        config["token"] = token
    if cluster.tls:
        config["certificate-authority"] = os.path.basename(cluster_tls.ca_path(cluster.dir))
        with open(cluster_tls.ca_path(cluster.dir), "rb") as fh:
            ca_pem = fh.read()
        replicas = {r["id"]: r["api"] for r in cluster.spec()["replicas"]}
        kubeconfig.write(cluster.kubeconfig_path, kubeconfig.build(cluster.api_urls(), ca_pem, token=token,
                                                                   cluster_id=cluster.cluster_id(), replicas=replicas))
    write_private(path, yaml.safe_dump(config, sort_keys=False))
    return path


def follow_membership(cluster):
    """Every file naming the replicas names the current ones: each replica's peers (for
    its next start: the Raft log has the membership anyway), DIR/config and DIR/kubeconfig,
    the agents' servers."""
    replicas = cluster.spec()["replicas"]
    for member in replicas:
        path = os.path.join(cluster.dir, member["id"], "server.yaml")
        with open(path) as fh:
            server = yaml.safe_load(fh)
        if "join" in server:
            continue           # it asks the cluster at each start
        server["peers"] = ",".join("%s@%s/%s" % (m["id"], m["raft"], m["api"]) for m in replicas if m is not member)
        with open(path, "w") as fh:
            yaml.safe_dump(server, fh, sort_keys=False)
    cluster.write_client_config()
    for agent in cluster.agents():
        path = os.path.join(cluster.dir, "agents", agent["name"], "agent.yaml")
        if os.path.exists(path):
            with open(path) as fh:
                config = yaml.safe_load(fh)
            config["servers"] = ",".join(cluster.api_urls())
            with open(path, "w") as fh:
                yaml.safe_dump(config, fh, sort_keys=False)
