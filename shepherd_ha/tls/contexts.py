"""SSL contexts from certificate files, and the settings that name them.

Server side: TLS 1.2 or newer, HTTP/1.1 by ALPN (kubectl and Go clients offer h2 too:
they fall back), a client certificate asked for but optional, and verified against
--client-ca-file when one is sent. Client side (replica to replica, replica to agent,
sheepctl, the agents): `requests`' `verify=CA file`, so a server whose certificate the
cluster CA did not sign is refused before any byte of the request (token included)
leaves.
"""
import dataclasses
import os
import ssl

from shepherd_ha.options import ConfigError


@dataclasses.dataclass(frozen=True)
class TlsFiles:
    """A listener's certificate, its key, and the CA its clients' certificates are
    checked against (optional)."""
    cert_file: str
    key_file: str
    client_ca_file: str = None

    def check(self, what="--tls-cert-file"):
        for flag, path in (("--tls-cert-file", self.cert_file), ("--tls-private-key-file", self.key_file),
                           ("--client-ca-file", self.client_ca_file)):
            if path and not os.access(path, os.R_OK):
                raise ConfigError("%s %s cannot be read (%s)" % (flag, path, "no such file" if not os.path.exists(path)
                                                                 else "permission denied"))
        try:
            server_context(self)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError("%s %s with --tls-private-key-file %s: %s (a PEM certificate and its own key)"
                              % (what, self.cert_file, self.key_file, exc))
        return self


def tls_files(values, prefix=""):
    """TlsFiles from resolved options (tls_cert_file, tls_private_key_file, client_ca_file),
    or None when no certificate is given. One of the pair alone is a ConfigError."""
    cert, key = values.get(prefix + "tls_cert_file"), values.get(prefix + "tls_private_key_file")
    if not cert and not key:
        if values.get(prefix + "client_ca_file"):
            raise ConfigError("--client-ca-file needs --tls-cert-file and --tls-private-key-file: client "
                              "certificates are checked on a TLS listener only")
        return None
    if not (cert and key):
        raise ConfigError("--tls-cert-file and --tls-private-key-file go together (given: %s)"
                          % ("--tls-cert-file" if cert else "--tls-private-key-file"))
    return TlsFiles(cert, key, values.get(prefix + "client_ca_file") or None).check()


def server_context(files):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(files.cert_file, files.key_file)
    ctx.set_alpn_protocols(["http/1.1"])
    if files.client_ca_file:
        ctx.load_verify_locations(cafile=files.client_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL     # optional for now; a certificate sent must verify
    ctx.options |= ssl.OP_NO_COMPRESSION
    return ctx


def client_context(ca_file, cert_file=None, key_file=None):
    """An ssl client context verifying the server against `ca_file` (host names checked)."""
    ctx = ssl.create_default_context(cafile=ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_file:
        ctx.load_cert_chain(cert_file, key_file)
    return ctx


def verify_arg(ca_file):
    """`requests`' verify= for a CA file: the file, or True (the system's CAs) without one."""
    return ca_file or True


def check_ca_file(path, flag):
    if path and not os.access(path, os.R_OK):
        raise ConfigError("%s %s cannot be read" % (flag, path))
    if path:
        try:
            ssl.create_default_context(cafile=path)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError("%s %s is not a PEM CA certificate: %s" % (flag, path, exc))
    return path
