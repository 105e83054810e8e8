"""The certificates of a cluster directory (`local up`, the netns cluster, the tests):

  DIR/ca.crt, DIR/ca.key          the cluster CA (the key 0600; it signs everything below)
  DIR/<id>/tls.crt, tls.key       replica <id>'s serving certificate: localhost, 127.0.0.1,
                                  ::1, this host's names, the replica's id and address
  DIR/agents/<name>/tls.crt, .key agent <name>'s: its node name (the API's log proxy checks
                                  it), its address, localhost
  DIR/kubeconfig                  kubectl / client-go / sheepctl --kubeconfig (0600)

and the server and agent options that point at them."""
import os

from shepherd_ha.tls import pki


def ca_path(directory):
    return os.path.join(directory, pki.CA_CERT)


def ensure_ca(directory):
    return pki.ensure_ca(directory)


def replica_options(directory, ident, address):
    """Issue replica `ident`'s certificate; the server options that use it."""
    ca = pki.load_ca(directory)
    rdir = os.path.join(directory, ident)
    cert, key = pki.issue_files(ca, rdir, "tls", ident, pki.local_names() + [ident, address],
                                server=True, client=True)
    return {"tls_cert_file": cert, "tls_private_key_file": key, "client_ca_file": ca_path(directory),
            "cluster_ca_file": ca_path(directory)}


def agent_options(directory, name, address):
    """Issue agent `name`'s certificate (valid for its node name and address); the agent
    options that use it and the CA it verifies the API with."""
    ca = pki.load_ca(directory)
    adir = os.path.join(directory, "agents", name)
    cert, key = pki.issue_files(ca, adir, "tls", "system:node:" + name, [name, address, "localhost", "127.0.0.1"],
                                server=True, client=True, organization="system:nodes")
    return {"ca_file": ca_path(directory), "tls_cert_file": cert, "tls_private_key_file": key}


INSECURE_SERVER = {"insecure_http": True}


class TlsLayout:
    """The TLS side of a LocalCluster (mixed into it): whether it has TLS, its CA, the
    options its replicas and clients get."""

    @property
    def tls(self):
        return bool(self.spec().get("tls"))

    @property
    def ca_file(self):
        """The cluster CA (None for a plain-HTTP cluster)."""
        return ca_path(self.dir) if self.tls else None

    @property
    def verify(self):
        """`requests`' verify= for this cluster's replicas."""
        return self.ca_file or True

    @property
    def kubeconfig_path(self):
        return os.path.join(self.dir, "kubeconfig")

    def client_options(self):
        """Keyword arguments of shepherd_ha.client.Client for this cluster."""
        return {"token": self.token(), "ca_file": self.ca_file, "cluster_id": self.cluster_id()}

    def _tls_server_options(self, tls, member, host):
        """Server options of replica `member`: its certificate (issued now, SANs for its id
        and `host`) and the CA, or plain HTTP."""
        if not tls:
            return dict(INSECURE_SERVER)
        return replica_options(self.dir, member["id"], host)


def reissue(cluster):
    """New certificates for every replica and agent of a TLS cluster, from its CA (kept);
    returns the names. The processes read them when they start again."""
    if not cluster.tls:
        raise ValueError("%s serves plain HTTP: it has no certificates" % cluster.dir)
    done = []
    for member in cluster.spec()["replicas"]:
        host = member.get("address") or "127.0.0.1"
        replica_options(cluster.dir, member["id"], host)
        done.append(member["id"])
    for agent in cluster.agents():
        agent_options(cluster.dir, agent["name"], agent.get("address") or "127.0.0.1")
        done.append(agent["name"])
    return done

