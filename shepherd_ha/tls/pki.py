"""The cluster CA and the certificates it signs (with `cryptography`).

- a CA: an EC P-256 key and a self-signed certificate (basicConstraints CA, keyCertSign),
  10 years;
- a serving certificate per replica and per agent: SANs for every name and address it
  is reached by, serverAuth (and clientAuth, so the same pair can later identify a
  replica or a node to the API), 1 year;
- a client certificate (clientAuth only), for the admin or a test.

Keys are written 0600 from their first byte (`write_private`), certificates 0644.
P-256 rather than RSA: a handshake costs a fraction of RSA-2048's signature, and every
client kubectl, Go and OpenSSL ship verifies it.
"""
import dataclasses
import datetime
import ipaddress
import os
import socket

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
CERT_DAYS = 365
CLOCK_SKEW = datetime.timedelta(minutes=5)   # valid a little before now: peers' clocks differ

CA_CERT, CA_KEY = "ca.crt", "ca.key"


def write_private(path, data):
    """Write a file only its owner can read, with no moment where others could."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)       # an existing file keeps its old mode through O_CREAT
    with os.fdopen(fd, "wb") as fh:
        fh.write(data if isinstance(data, bytes) else data.encode())


def _write_public(path, data):
    with open(path, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o644)


def _now():
    return datetime.datetime.now(datetime.timezone.utc)


def _key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert):
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclasses.dataclass
class CertificateAuthority:
    cert: x509.Certificate
    key: object
    cert_path: str = None

    @property
    def pem(self):
        return _cert_pem(self.cert)


def create_ca(directory, name="shepherd-ha cluster CA", days=CA_DAYS):
    """A new CA in DIRECTORY (ca.crt 0644, ca.key 0600); refuses to overwrite one."""
    os.makedirs(directory, exist_ok=True)
    cert_path, key_path = os.path.join(directory, CA_CERT), os.path.join(directory, CA_KEY)
    if os.path.exists(cert_path) or os.path.exists(key_path):
        raise FileExistsError("%s already holds a CA: load it (load_ca) or remove it to make a new one" % directory)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - CLOCK_SKEW).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False),
                           critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    write_private(key_path, _key_pem(key))
    _write_public(cert_path, _cert_pem(cert))
    return CertificateAuthority(cert, key, cert_path)


def load_ca(directory):
    cert_path = os.path.join(directory, CA_CERT)
    with open(cert_path, "rb") as fh:
        cert = x509.load_pem_x509_certificate(fh.read())
    with open(os.path.join(directory, CA_KEY), "rb") as fh:
        key = serialization.load_pem_private_key(fh.read(), password=None)
    return CertificateAuthority(cert, key, cert_path)


def ensure_ca(directory):
    """The CA in DIRECTORY, made on first use."""
    if os.path.exists(os.path.join(directory, CA_CERT)):
        return load_ca(directory)
    return create_ca(directory)


def split_names(names):
    """Host names and IP addresses -> (sorted unique DNS names, unique IPs in order)."""
    dns, ips = [], []
    for name in names:
        name = str(name).strip()
        if not name:
            continue
        try:
            ip = ipaddress.ip_address(name.strip("[]"))
        except ValueError:
            if name.lower() not in dns:
                dns.append(name.lower())
            continue
        if ip not in ips:
            ips.append(ip)
    return dns, ips


def local_names():
    """Names a process on this machine is reached by: localhost, 127.0.0.1, ::1, the host name."""
    names = ["localhost", "127.0.0.1", "::1"]
    host = socket.gethostname()
    if host:
        names += [host, socket.getfqdn()]
    return names


def issue(ca, common_name, names=(), server=True, client=False, organization=None, days=CERT_DAYS):
    """(certificate, key) signed by `ca`. `names`: every DNS name and IP address the
    holder is reached by (its SANs; verification checks them, not the CN)."""
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH]
                                                                        if client else [])
    if not usages:
        raise ValueError("a certificate must be for a server, a client or both")
    now = _now()
    builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(ca.cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - CLOCK_SKEW).not_valid_after(now + datetime.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, key_cert_sign=False,
                                            crl_sign=False, content_commitment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                              critical=False))
    dns, ips = split_names(names)
    if server and not (dns or ips):
        raise ValueError("a serving certificate needs at least one name or address (its SANs)")
    if dns or ips:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName(d) for d in dns] + [x509.IPAddress(i) for i in ips]), critical=False)
    return builder.sign(ca.key, hashes.SHA256()), key


def write_pair(cert, key, cert_path, key_path):
    """The certificate (0644) and its key (0600), in PEM."""
    os.makedirs(os.path.dirname(os.path.abspath(cert_path)), exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(key_path)), exist_ok=True)
    write_private(key_path, _key_pem(key))
    _write_public(cert_path, _cert_pem(cert))
    return cert_path, key_path


def issue_files(ca, directory, stem, common_name, names=(), server=True, client=False, organization=None,
                days=CERT_DAYS):
    """Issue a pair and write DIRECTORY/STEM.crt and DIRECTORY/STEM.key; returns their paths."""
    cert, key = issue(ca, common_name, names, server=server, client=client, organization=organization, days=days)
    return write_pair(cert, key, os.path.join(directory, stem + ".crt"), os.path.join(directory, stem + ".key"))


def read_certificate(path):
    with open(path, "rb") as fh:
        return x509.load_pem_x509_certificate(fh.read())


def subject_alt_names(cert):
    """(DNS names, IP address strings) of a certificate."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return san.get_values_for_type(x509.DNSName), [str(i) for i in san.get_values_for_type(x509.IPAddress)]


def expires_in(cert, now=None):
    """Time left until the certificate expires (negative once it has)."""
    return cert.not_valid_after_utc - (now or _now())
