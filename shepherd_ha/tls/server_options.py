"""The TLS options of `shepherd-ha server` (added to config.SERVER_OPTIONS) and what
they resolve to. TLS is the default: a server with neither certificate files nor
--insecure-http refuses to start."""
import dataclasses

from shepherd_ha.options import ConfigError, Option

from .contexts import TlsFiles, check_ca_file, tls_files
from .outbound import Outbound

TLS_OPTIONS = (
    Option("tls_cert_file", str, None, "PEM certificate the API serves (its SANs: every name and address clients "
           "use); with --tls-private-key-file; required unless --insecure-http"),
    Option("tls_private_key_file", str, None, "PEM private key of --tls-cert-file (keep it 0600)"),
    Option("client_ca_file", str, None, "CA that client certificates are checked against (a certificate is "
           "optional; one that does not verify is refused)"),
    Option("cluster_ca_file", str, None, "CA this replica checks the other replicas' and the agents' "
           "certificates against (default: --client-ca-file; without either, the system's CAs)"),
    Option("insecure_http", bool, False, "serve plain HTTP without TLS (tests, benchmarks, a trusted network "
           "only: tokens and data cross the network in clear); talks plain HTTP to peers and agents too"),
)


@dataclasses.dataclass(frozen=True)
class ServerTls:
    files: TlsFiles        # None: plain HTTP (--insecure-http)
    outbound: Outbound

    @property
    def scheme(self):
        return "https" if self.files else "http"


def server_tls(values):
    """ServerTls from resolved options; ConfigError when TLS is neither set up nor
    explicitly refused."""
    files = tls_files(values)
    if values.get("insecure_http"):
        if files is not None:
            raise ConfigError("--insecure-http with --tls-cert-file: choose one (TLS, or plain HTTP)")
        return ServerTls(None, Outbound(tls=False))
    if files is None:
        raise ConfigError("the API serves HTTPS: give --tls-cert-file and --tls-private-key-file (`shepherd-ha "
                          "local up` and the provisioning make them), or --insecure-http for plain HTTP")
    ca = check_ca_file(values.get("cluster_ca_file"), "--cluster-ca-file") or files.client_ca_file
    return ServerTls(files, Outbound(tls=True, ca_file=ca))
