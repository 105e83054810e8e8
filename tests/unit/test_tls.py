"""The cluster CA and certificates, the TLS terminator in front of waitress, the
kubeconfig, and the TLS options: real certificates, real sockets, real handshakes."""
import base64
import datetime
import errno
import os
import socket
import ssl
import threading
import time

import pytest
import requests
import waitress
import yaml
from cryptography import x509

from ctl import config as ctl_config
from shepherd_ha import config
from shepherd_ha.options import ConfigError
from shepherd_ha.tls import contexts, kubeconfig, pki, server_options, serving
from shepherd_ha.tls.terminator import ACCEPT_PAUSE, TlsTerminator, listening_socket


@pytest.fixture
def ca(tmp_path):
    return pki.create_ca(str(tmp_path / "ca"))


@pytest.fixture
def other_ca(tmp_path):
    return pki.create_ca(str(tmp_path / "other"))


def mode(path):
    return os.stat(path).st_mode & 0o777


# ---- certificates ----

def test_the_ca_is_a_self_signed_ca_with_a_private_key(ca, tmp_path):
    assert ca.cert.issuer == ca.cert.subject
    assert ca.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert mode(tmp_path / "ca" / "ca.key") == 0o600
    assert mode(tmp_path / "ca" / "ca.crt") == 0o644
    with pytest.raises(FileExistsError):
        pki.create_ca(str(tmp_path / "ca"))
    assert pki.ensure_ca(str(tmp_path / "ca")).cert == ca.cert      # reused, never replaced


def test_a_serving_certificate_names_every_address_and_expires_in_a_year(ca, tmp_path):
    cert_path, key_path = pki.issue_files(ca, str(tmp_path / "r1"), "tls", "r1",
                                          ["localhost", "127.0.0.1", "::1", "R1", "10.0.0.5", "r1"])
    cert = pki.read_certificate(cert_path)
    dns, ips = pki.subject_alt_names(cert)
    assert dns == ["localhost", "r1"]
    assert ips == ["127.0.0.1", "::1", "10.0.0.5"]
    left = pki.expires_in(cert)
    assert datetime.timedelta(days=364) < left <= datetime.timedelta(days=365)
    assert cert.not_valid_before_utc < datetime.datetime.now(datetime.timezone.utc)
    assert mode(key_path) == 0o600 and mode(cert_path) == 0o644
    assert cert.issuer == ca.cert.subject
    with pytest.raises(ValueError):
        pki.issue(ca, "nobody", [])                 # a server certificate with no name verifies for nothing


def test_a_key_file_is_never_readable_by_others_even_when_it_existed(ca, tmp_path):
    target = tmp_path / "tls.key"
    target.write_text("old")
    os.chmod(target, 0o644)
    pki.issue_files(ca, str(tmp_path), "tls", "x", ["localhost"])
    assert mode(target) == 0o600


# ---- the terminator, with waitress behind it ----

def _app(environ, start_response):
    if environ["PATH_INFO"] == "/slow":
        time.sleep(0.2)
    start_response("200 OK", [("Content-Type", "text/plain")])
    if environ["PATH_INFO"] == "/peer":
        return [("%s %s" % (environ["REMOTE_ADDR"], environ["REMOTE_PORT"])).encode()]
    return [("%s %s" % (environ["wsgi.url_scheme"], environ["PATH_INFO"])).encode()]


@pytest.fixture
def served(ca, tmp_path):
    """A waitress app behind the terminator, with a certificate for localhost/127.0.0.1."""
    cert, key = pki.issue_files(ca, str(tmp_path / "srv"), "tls", "srv", ["localhost", "127.0.0.1"])
    files = contexts.TlsFiles(cert, key, ca.cert_path)
    backend = str(tmp_path / "srv" / "app.sock")
    server = serving._backend_server(_app, backend, {"threads": 4})
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    term = TlsTerminator(contexts.server_context(files), listening_socket("127.0.0.1", 0), backend,
                         handshake_timeout=0.5, max_connections=3).start()
    yield term, "https://127.0.0.1:%d" % term.port
    term.stop()
    server.close()


def test_a_client_verifying_the_ca_is_served_and_one_with_another_ca_is_refused(served, ca, other_ca):
    term, url = served
    assert requests.get(url + "/x", verify=ca.cert_path, timeout=5).text == "https /x"
    with pytest.raises(requests.exceptions.SSLError) as err:
        requests.get(url + "/x", verify=other_ca.cert_path, timeout=5)
    assert "certificate verify failed" in str(err.value)
    # the name is checked too: the certificate is not for 127.0.0.2
    ctx = contexts.client_context(ca.cert_path)
    with socket.create_connection(("127.0.0.1", term.port), timeout=5) as raw:
        with pytest.raises(ssl.SSLCertVerificationError):
            ctx.wrap_socket(raw, server_hostname="other.example")


def test_plain_http_to_the_tls_port_gets_a_400_that_says_https(served):
    term, url = served
    reply = requests.get(url.replace("https", "http") + "/x", timeout=5)
    assert reply.status_code == 400 and "use https://" in reply.text
    assert term.refused_plain == 1


def test_a_client_certificate_is_optional_but_one_from_another_ca_is_refused(served, ca, other_ca, tmp_path):
    _, url = served
    good = pki.issue_files(ca, str(tmp_path / "c"), "good", "admin", server=False, client=True)
    bad = pki.issue_files(other_ca, str(tmp_path / "c"), "bad", "admin", server=False, client=True)
    assert requests.get(url + "/", verify=ca.cert_path, cert=good, timeout=5).status_code == 200
    with pytest.raises(requests.exceptions.RequestException):
        requests.get(url + "/", verify=ca.cert_path, cert=bad, timeout=5)


def test_a_silent_connection_is_closed_after_the_handshake_timeout(served):
    term, _ = served
    with socket.create_connection(("127.0.0.1", term.port), timeout=5) as idle:
        started = time.monotonic()
        assert idle.recv(1) == b""            # closed by the terminator, not by our timeout
        assert time.monotonic() - started < 3


def test_connections_beyond_the_limit_are_closed_and_the_rest_still_served(served, ca):
    term, url = served
    held = [socket.create_connection(("127.0.0.1", term.port), timeout=5) for _ in range(3)]
    try:
        time.sleep(0.1)
        extra = socket.create_connection(("127.0.0.1", term.port), timeout=5)
        assert extra.recv(1) == b""
        extra.close()
    finally:
        for s in held:
            s.close()
    deadline = time.monotonic() + 3
    while term.open and time.monotonic() < deadline:
        time.sleep(0.05)
    assert requests.get(url + "/", verify=ca.cert_path, timeout=5).status_code == 200


def test_many_requests_on_one_keep_alive_connection_and_in_parallel(served, ca):
    _, url = served
    session = requests.Session()
    session.trust_env = False         # else $REQUESTS_CA_BUNDLE would win over session.verify
    session.verify = ca.cert_path
    assert all(session.get(url + "/k%d" % i, timeout=5).text == "https /k%d" % i for i in range(20))
    session.close()
    results = []

    def one():
        results.append(requests.get(url + "/slow", verify=ca.cert_path, timeout=5).status_code)
    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [200, 200, 200]


# ---- kubeconfig ----

def test_the_kubeconfig_has_the_cluster_ca_the_token_and_a_current_context(ca, tmp_path):
    servers = ["https://127.0.0.1:8001", "https://127.0.0.1:8002"]
    path = kubeconfig.write(str(tmp_path / "kubeconfig"), kubeconfig.build(servers, ca.pem, token="t0k"))
    assert mode(path) == 0o600
    data = yaml.safe_load(open(path))
    assert data["apiVersion"] == "v1" and data["kind"] == "Config"
    (cluster,) = data["clusters"]
    assert cluster["cluster"]["server"] == servers[0]
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == ca.pem
    (user,) = data["users"]
    assert user["user"] == {"token": "t0k"}
    (context,) = data["contexts"]
    assert data["current-context"] == context["name"]
    assert context["context"]["cluster"] == cluster["name"] and context["context"]["user"] == user["name"]
    back = kubeconfig.read(data, path)
    assert back["servers"] == servers and back["token"] == "t0k"
    assert open(back["ca_file"], "rb").read() == ca.pem


def test_sheepctl_reads_a_kubeconfig_from_the_flag_or_kubeconfig_env(ca, tmp_path):
    path = kubeconfig.write(str(tmp_path / "kc"), kubeconfig.build(["https://h:1", "https://h:2"], ca.pem,
                                                                   token="secret-token"))
    for kwargs in ({"kubeconfig_arg": path, "env": {}}, {"env": {"KUBECONFIG": path + os.pathsep + "/x"}}):
        s = ctl_config.resolve(home_config=str(tmp_path / "none"), **kwargs)
        assert s.servers == ["https://h:1", "https://h:2"] and s.token == "secret-token"
        assert open(s.ca_file, "rb").read() == ca.pem
    # --server elsewhere: the kubeconfig's token is not sent there
    s = ctl_config.resolve(server_arg="https://elsewhere:1", kubeconfig_arg=path, env={},
                           home_config=str(tmp_path / "none"))
    assert s.token is None


def test_the_kubeconfig_carries_the_cluster_id_to_sheepctl_but_not_to_servers_named_elsewhere(ca, tmp_path):
    cluster_id = "0123456789abcdef0123456789abcdef"
    path = kubeconfig.write(str(tmp_path / "kc"), kubeconfig.build(["https://h:1"], ca.pem, token="secret-token",
                                                                   cluster_id=cluster_id))
    s = ctl_config.resolve(kubeconfig_arg=path, env={}, home_config=str(tmp_path / "none"))
    assert s.cluster_id == cluster_id
    s = ctl_config.resolve(server_arg="https://elsewhere:1", kubeconfig_arg=path, env={},
                           home_config=str(tmp_path / "none"))
    assert s.cluster_id is None
    plain = kubeconfig.write(str(tmp_path / "kc2"), kubeconfig.build(["https://h:1"], ca.pem))
    assert ctl_config.resolve(kubeconfig_arg=plain, env={}, home_config=str(tmp_path / "none")).cluster_id is None


def test_the_sheepctl_config_names_its_ca_relative_to_itself(ca, tmp_path):
    cfg = tmp_path / "config"
    cfg.write_text("servers: [https://h:1]\ncertificate-authority: ca/ca.crt\n")
    s = ctl_config.resolve(config_arg=str(cfg), env={})
    assert s.ca_file == ca.cert_path
    cfg.write_text("servers: [https://h:1]\ncertificate-authority: nope.crt\n")
    with pytest.raises(ctl_config.ConfigError, match="does not exist"):
        ctl_config.resolve(config_arg=str(cfg), env={})


# ---- server options ----

def _values(**kw):
    values = {o.name: o.default for o in config.SERVER_OPTIONS}
    values.update(kw)
    return values


def test_the_server_wants_certificates_or_an_explicit_insecure_http(ca, tmp_path):
    with pytest.raises(ConfigError, match="--insecure-http"):
        server_options.server_tls(_values())
    assert server_options.server_tls(_values(insecure_http=True)).files is None
    cert, key = pki.issue_files(ca, str(tmp_path), "tls", "r1", ["localhost"])
    tls = server_options.server_tls(_values(tls_cert_file=cert, tls_private_key_file=key,
                                            client_ca_file=ca.cert_path))
    assert tls.scheme == "https" and tls.outbound.tls and tls.outbound.ca_file == ca.cert_path
    with pytest.raises(ConfigError, match="choose one"):
        server_options.server_tls(_values(tls_cert_file=cert, tls_private_key_file=key, insecure_http=True))
    with pytest.raises(ConfigError, match="go together"):
        server_options.server_tls(_values(tls_cert_file=cert))
    with pytest.raises(ConfigError, match="cannot be read"):
        server_options.server_tls(_values(tls_cert_file=cert, tls_private_key_file=str(tmp_path / "missing")))
    other = pki.issue_files(ca, str(tmp_path), "other", "r2", ["localhost"])
    with pytest.raises(ConfigError, match="its own key"):
        server_options.server_tls(_values(tls_cert_file=cert, tls_private_key_file=other[1]))


def test_https_is_the_default_scheme_of_the_api_url_and_the_peers(tmp_path):
    base = dict(id="r1", raft_address="127.0.0.1:7001", data_dir=str(tmp_path), raft_password="correct-horse-battery-staple-42",
                raft_salt="00112233445566778899aabbccddeeff", peers="r2@127.0.0.1:7002/127.0.0.1:8002")
    _, peers, _, _, url = config.server_settings(_values(**base))
    assert url == "https://127.0.0.1:8001" and peers[0].api == "https://127.0.0.1:8002"
    _, peers, _, _, url = config.server_settings(_values(insecure_http=True, **base))
    assert url == "http://127.0.0.1:8001" and peers[0].api == "http://127.0.0.1:8002"


def test_a_switch_option_parses_true_and_false_from_the_environment():
    import argparse
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, config.SERVER_OPTIONS)
    assert config.resolve(parser.parse_args(["--insecure-http"]), config.SERVER_OPTIONS, environ={})[
        "insecure_http"] is True
    for raw, want in (("true", True), ("0", False), ("no", False)):
        assert config.resolve(parser.parse_args([]), config.SERVER_OPTIONS,
                              environ={"SHEPHERD_INSECURE_HTTP": raw})["insecure_http"] is want
    with pytest.raises(ConfigError, match="true or false"):
        config.resolve(parser.parse_args([]), config.SERVER_OPTIONS, environ={"SHEPHERD_INSECURE_HTTP": "maybe"})


def test_a_plain_client_that_sends_slowly_does_not_stall_the_others(served, ca):
    term, url = served
    slow = socket.create_connection(("127.0.0.1", term.port), timeout=5)
    try:
        slow.sendall(b"G")                      # a plain request that never completes
        time.sleep(0.2)
        started = time.monotonic()
        assert requests.get(url + "/", verify=ca.cert_path, timeout=5).status_code == 200
        assert time.monotonic() - started < 1.0
        assert b"400 Bad Request" in slow.recv(4096)
    finally:
        slow.close()


def test_the_client_gives_up_at_once_on_a_wrong_ca_and_knows_a_write_was_never_sent(served, other_ca):
    from shepherd_ha.client import Client, NoReplicaReachable
    _, url = served
    client = Client([url, url], timeout=2.0, retry_deadline=30.0, ca_file=other_ca.cert_path)
    try:
        started = time.monotonic()
        with pytest.raises(NoReplicaReachable) as err:
            client.request("POST", "/x", body={"a": 1}, idempotent_write=False)   # not OutcomeUnknown
        assert time.monotonic() - started < 5
        assert "does not verify" in str(err.value) and "CA" in str(err.value)
    finally:
        client.close()


def test_the_app_sees_the_tls_client_address_not_the_unix_socket(served, ca):
    term, _ = served
    ctx = contexts.client_context(ca.cert_path)
    with socket.create_connection(("127.0.0.1", term.port), timeout=5) as raw:
        local_port = raw.getsockname()[1]
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(b"GET /peer HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            while True:
                chunk = tls.recv(4096)
                if not chunk:
                    break
                answer += chunk
            assert answer.split(b"\r\n\r\n", 1)[1].decode() == "127.0.0.1 %d" % local_port


def test_a_failing_accept_pauses_accepts_instead_of_spinning(served, ca):
    """accept() failing (EMFILE: no descriptor free) leaves the listener readable: the
    terminator looks again after ACCEPT_PAUSE, not at once and again (a spin that filled
    the log), and serves the connection once accept works."""
    term, url = served
    real, calls = term.sock, []

    class Failing:
        def __getattr__(self, name):
            return getattr(real, name)

        def accept(self):
            calls.append(time.monotonic())
            if len(calls) <= 3:
                raise OSError(errno.EMFILE, "Too many open files")
            return real.accept()
    term.sock = Failing()
    try:
        assert requests.get(url + "/x", verify=ca.cert_path, timeout=5).text == "https /x"
    finally:
        term.sock = real
    assert len(calls) >= 4 and calls[3] - calls[0] >= 3 * ACCEPT_PAUSE * 0.9, calls


def test_stopping_ends_the_handshakes_still_waiting_instead_of_leaving_their_tasks_pending(served):
    """A connection that sent nothing yet has a handshake task waiting: stopping the
    terminator ends it (its per-address count released), not a loop closed under it."""
    term, url = served
    silent = socket.create_connection(("127.0.0.1", term.port))
    try:
        deadline = time.monotonic() + 5
        while not term.handshaking and time.monotonic() < deadline:
            time.sleep(0.01)
        assert term.handshaking, "the silent connection's handshake is waiting"
        term.stop()
        assert term.handshaking == {} and not term._tasks
    finally:
        silent.close()
