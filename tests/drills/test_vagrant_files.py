"""Static checks of the Vagrant cluster files (the VM run itself is too slow for CI):
shellcheck of the box, provisioning and host scripts and `vagrant validate` of the
Vagrantfile, through scripts/check-vagrant.sh; and the host-side layout the drills'
VagrantTarget uses. A missing shellcheck FAILS (never skips)."""
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vagrant"))

from cluster_layout import ClusterLayout, LayoutError  # noqa: E402


def test_check_vagrant_script_passes():
    if shutil.which("shellcheck") is None:
        pytest.fail("shellcheck is missing: apt-get install -y shellcheck")
    proc = subprocess.run(["bash", os.path.join(ROOT, "scripts", "check-vagrant.sh")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "check-vagrant: OK" in proc.stdout


def test_layout_matches_the_vagrantfile_rules():
    layout = ClusterLayout.from_env({})
    assert layout.control_planes == ["cp1", "cp2", "cp3"]
    assert layout.workers == ["w1", "w2"]
    assert layout.api_urls() == ["https://192.168.56.11:8001", "https://192.168.56.12:8001",
                                 "https://192.168.56.13:8001"]
    assert layout.address("w2") == "192.168.56.52"
    assert layout.replica_id("cp2") == "r2"
    assert layout.host_of_replica("r3") == "cp3"
    # The Vagrantfile must spell the same rules.
    with open(os.path.join(ROOT, "vagrant", "Vagrantfile"), encoding="utf-8") as f:
        text = f.read()
    for rule in ('"cp#{i}"', '"r#{i}"', '"#{NET}.#{10 + i}"', '"w#{i}"', '"#{NET}.#{50 + i}"',
                 "API_PORT = 8001", '"192.168.56"'):
        assert rule in text, rule


def test_layout_rejects_bad_sizes_with_the_variable_name():
    with pytest.raises(LayoutError, match="CP="):
        ClusterLayout.from_env({"CP": "0"})
    with pytest.raises(LayoutError, match="WORKERS="):
        ClusterLayout.from_env({"WORKERS": "many"})
    with pytest.raises(LayoutError, match="PRIVATE_NET="):
        ClusterLayout.from_env({"PRIVATE_NET": "10.0"})
    with pytest.raises(LayoutError, match="unknown replica"):
        ClusterLayout.from_env({}).host_of_replica("r9")


def test_sheepctl_config_lists_every_replica(tmp_path):
    out = tmp_path / "config"
    env = dict(os.environ, CP="5", WORKERS="0")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "vagrant", "cluster_layout.py"),
                           "sheepctl-config", str(out)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    for i in range(1, 6):
        assert f"- https://192.168.56.{10 + i}:8001" in text
    assert "namespace: default" in text


def test_sheepctl_config_carries_the_admin_token_privately(tmp_path):
    artifacts = tmp_path / "artifacts"
    (artifacts / "secrets").mkdir(parents=True)
    (artifacts / "secrets" / "admin-token").write_text("a" * 32 + "\n")
    out = tmp_path / "config"
    env = dict(os.environ, ARTIFACTS=str(artifacts))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "vagrant", "cluster_layout.py"),
                           "sheepctl-config", str(out)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "token: " + "a" * 32 in out.read_text().splitlines()
    assert oct(os.stat(out).st_mode & 0o777) == "0o600"


def test_provisioning_wires_the_tokens_and_keeps_them_apart():
    def read(*parts):
        with open(os.path.join(ROOT, "vagrant", *parts), encoding="utf-8") as f:
            return f.read()
    assert "token_file: /etc/shepherd/tokens.csv" in read("provision", "control-plane.sh")
    assert "token_file: /etc/shepherd/node-token" in read("provision", "worker.sh")
    vagrantfile = read("Vagrantfile")
    # workers never get the Raft password or the token table; control planes never the node token
    assert '["secrets/raft-password", "secrets/tokens.csv", "secrets/admin-token"]' in vagrantfile
    assert '"secrets/node-token", "secrets/admin-token"]' in vagrantfile
    artifacts = read("scripts", "prepare-artifacts.sh")
    assert '"system:masters"' in artifacts and '"system:nodes"' in artifacts and "umask 077" in artifacts


def test_every_vm_gets_a_certificate_for_its_names_and_none_gets_the_ca_key(tmp_path):
    from shepherd_ha.tls import pki
    from cluster_layout import ClusterLayout
    layout = ClusterLayout.from_env({})
    ca_path = layout.make_certificates(str(tmp_path))
    ca = pki.read_certificate(ca_path)
    for host in layout.hosts:
        cert = pki.read_certificate(str(tmp_path / (host + ".crt")))
        assert cert.issuer == ca.subject
        dns, ips = pki.subject_alt_names(cert)
        assert host in dns and layout.address(host) in ips, (host, dns, ips)
        assert os.stat(tmp_path / (host + ".key")).st_mode & 0o777 == 0o600
    assert "r1" in pki.subject_alt_names(pki.read_certificate(str(tmp_path / "cp1.crt")))[0]
    for spare in layout.spare_control_planes:     # a drill may add them: they serve TLS like the others
        dns, ips = pki.subject_alt_names(pki.read_certificate(str(tmp_path / (spare + ".crt"))))
        assert layout.replica_id(spare) in dns and layout.address(spare) in ips
    vagrantfile = open(os.path.join(ROOT, "vagrant", "Vagrantfile")).read()
    assert '"secrets/pki/ca.key"' in vagrantfile
    assert 'https://#{c[:ip]}:#{API_PORT}' in vagrantfile
    provision = open(os.path.join(ROOT, "vagrant", "provision", "control-plane.sh")).read()
    assert "tls_cert_file: /etc/shepherd/pki/tls.crt" in provision and "api_url: https://" in provision
    worker = open(os.path.join(ROOT, "vagrant", "provision", "worker.sh")).read()
    assert "ca_file: /etc/shepherd/pki/ca.crt" in worker
def test_spare_control_planes_join_instead_of_listing_peers():
    layout = ClusterLayout.from_env({})
    assert layout.spare_control_planes == ["cp4", "cp5"]
    assert layout.control_planes == ["cp1", "cp2", "cp3"], "spares are not members until a drill adds them"
    assert layout.address("cp5") == "192.168.56.15" and layout.replica_id("cp4") == "r4"
    assert ClusterLayout.from_env({"CP": "39"}).spare_control_planes == []
    with pytest.raises(LayoutError, match="CP_SPARE="):
        ClusterLayout.from_env({"CP": "38", "CP_SPARE": "2"})
    with open(os.path.join(ROOT, "vagrant", "Vagrantfile"), encoding="utf-8") as f:
        vagrantfile = f.read()
    assert "autostart: !node[:spare]" in vagrantfile
    assert '"join=#{SERVER_URLS}"' in vagrantfile
    with open(os.path.join(ROOT, "vagrant", "provision", "control-plane.sh"), encoding="utf-8") as f:
        script = f.read()
    assert 'MEMBERS="join: ${PEERS#join=}"' in script
