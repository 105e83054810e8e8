"""How a replica reaches the other replicas (cluster view, status) and the agents (pod
logs): plain HTTP on a cluster run with --insecure-http, otherwise HTTPS verified
against the cluster CA (--cluster-ca-file, else --client-ca-file, else the system's CAs).

An agent's certificate must also name its node (a DNS SAN equal to the node name,
which `local up` and the provisioning put in every agent certificate): the address
comes from a Node object, which its agent writes, and a Node pointed at another
listener of the cluster (a replica's API, another agent) is refused before the
replica's token is sent.
"""
import requests
from requests.adapters import HTTPAdapter


class _NodeNameAdapter(HTTPAdapter):
    """Verifies that the server's certificate is valid for `node_name`, whatever
    address the connection goes to."""

    def __init__(self, node_name, **kwargs):
        self.node_name = node_name
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **kwargs):
        kwargs["assert_hostname"] = self.node_name
        return super().init_poolmanager(*args, **kwargs)


class Outbound:
    def __init__(self, tls=False, ca_file=None):
        self.tls = bool(tls)
        self.ca_file = ca_file

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    def session(self):
        """A session for another replica: no proxy or ~/.netrc from the environment (the
        token goes to the peer only), the cluster CA."""
        session = requests.Session()
        session.trust_env = False
        session.verify = self.ca_file or True
        return session

    def agent_session(self, node_name):
        """A session for the agent of node `node_name`."""
        session = self.session()
        if self.tls:
            session.mount("https://", _NodeNameAdapter(node_name))
        return session

    def describe(self):
        if not self.tls:
            return "plain HTTP"
        return "HTTPS, verified against %s" % (self.ca_file or "the system's CAs")


PLAIN = Outbound(tls=False)


def tls_reason(exc):
    """The part of a requests SSLError a person can act on (which check failed)."""
    text = str(exc)
    for marker in ("certificate verify failed: ", "doesn't match", "WRONG_VERSION_NUMBER"):
        if marker in text:
            return text[text.index(marker):].split("(_ssl")[0].split("')")[0].strip()[:200]
    return "handshake failed"
