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
    # workers never get the Raft password, the token table or another node's token; control planes no node token
    assert '["secrets/raft-password", "secrets/tokens.csv", "secrets/admin-token"] +' in vagrantfile
    assert 'WORKER_NODES.reject { |w| w[:name] == node[:name] }.map { |w| "secrets/nodes/#{w[:name]}.token" }' \
        in vagrantfile
    assert '"secrets/nodes/", "secrets/admin-token"]' in vagrantfile
    assert '"$DIST/secrets/nodes/$NODE.token" /etc/shepherd/node-token' in read("provision", "worker.sh")
    artifacts = read("scripts", "prepare-artifacts.sh")
    assert '"system:masters"' in artifacts and "umask 077" in artifacts
    assert "shepherd_ha.cli.node_tokens create --node" in artifacts and "cluster_layout.py\" workers" in artifacts


def test_prepare_artifacts_gives_each_worker_its_own_token(tmp_path):
    """The token part of prepare-artifacts.sh, run for real on a copy of its lines."""
    script = read_script_part()
    artifacts = tmp_path / "artifacts"
    (artifacts / "secrets").mkdir(parents=True)
    (artifacts / "secrets" / "tokens.csv").write_text('%s,admin,admin,"system:masters"\n%s,system:node,system:node,'
                                                    '"system:nodes"\n' % ("a" * 32, "n" * 32))
    env = dict(os.environ, ARTIFACTS=str(artifacts), PROJECT=ROOT, PYTHON=sys.executable, WORKERS="3")
    proc = subprocess.run(["bash", "-euc", "log() { echo \"$*\"; }\n" + script], env=env, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    from shepherd_ha.api import auth
    table = auth.load_token_file(str(artifacts / "secrets" / "tokens.csv"))
    tokens = {w: (artifacts / "secrets" / "nodes" / (w + ".token")).read_text().strip() for w in ("w1", "w2", "w3")}
    for worker, token in tokens.items():
        assert table.authenticate(token).name == "system:node:" + worker
        assert oct(os.stat(artifacts / "secrets" / "nodes" / (worker + ".token")).st_mode & 0o777) == "0o600"
    assert len(set(tokens.values())) == 3
    assert table.authenticate("n" * 32) is None and table.authenticate("a" * 32).name == "admin"
    again = subprocess.run(["bash", "-euc", "log() { echo \"$*\"; }\n" + script], env=env, capture_output=True,
                           text=True, timeout=60)
    assert again.returncode == 0 and "generating" not in again.stdout      # made once per worker
    assert (artifacts / "secrets" / "nodes" / "w1.token").read_text().strip() == tokens["w1"]


def read_script_part():
    with open(os.path.join(ROOT, "vagrant", "scripts", "prepare-artifacts.sh"), encoding="utf-8") as f:
        text = f.read()
    start = text.index("# One identity per worker")
    return text[start:text.index('if [ ! -s "$ARTIFACTS/cluster-id" ]; then')]


def test_data_plane_defaults_overrides_and_refusals(tmp_path):
    from cluster_layout import data_plane, provisioned_data_plane
    assert data_plane({}) == {"cluster_cidr": "10.244.0.0/16", "service_cidr": "10.96.0.0/12",
                              "cluster_domain": "cluster.local"}
    assert data_plane({"CLUSTER_CIDR": "10.50.0.0/16", "CLUSTER_DOMAIN": "corp.example"})["cluster_domain"] == \
        "corp.example"
    for env, name in (({"CLUSTER_CIDR": "10.96.0.0/16"}, "overlap"),
                      ({"SERVICE_CIDR": "10.96.0.1/12"}, "SERVICE_CIDR="),
                      ({"CLUSTER_CIDR": "10.244.0.0/24"}, "too small"),
                      ({"CLUSTER_DOMAIN": "Bad_Domain"}, "CLUSTER_DOMAIN=")):
        with pytest.raises(LayoutError, match=name):
            data_plane(env)
    out = tmp_path / "data-plane.yaml"
    env = dict(os.environ, ARTIFACTS=str(tmp_path), SERVICE_CIDR="10.100.0.0/16")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "vagrant", "cluster_layout.py"), "data-plane", str(out)],
                          env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert provisioned_data_plane({"ARTIFACTS": str(tmp_path)})["service_cidr"] == "10.100.0.0/16"


def test_provisioning_sets_the_kernel_and_passes_the_data_plane():
    def read(*parts):
        with open(os.path.join(ROOT, "vagrant", *parts), encoding="utf-8") as f:
            return f.read()
    worker = read("provision", "worker.sh")
    for line in ("modprobe br_netfilter", "net.ipv4.ip_forward = 1", "net.bridge.bridge-nf-call-iptables = 1",
                 "/etc/modules-load.d/shepherd.conf",
                 "grep -E '^(cluster_cidr|service_cidr|cluster_domain):' \"$DATA_PLANE\" >>/etc/shepherd/agent.yaml"):
        assert line in worker, line
    assert "grep -E '^(cluster_cidr|service_cidr):' \"$DATA_PLANE\" >>/etc/shepherd/server.yaml" in \
        read("provision", "control-plane.sh")
    assert 'data-plane "$ARTIFACTS/data-plane.yaml"' in read("scripts", "prepare-artifacts.sh")


def test_the_data_plane_keys_provisioned_are_options_of_the_server_and_agent():
    """A key the server or agent does not know makes it refuse its config file at boot."""
    from agent.config import AGENT_OPTIONS
    from cluster_layout import AGENT_DATA_PLANE, SERVER_DATA_PLANE
    from shepherd_ha.config import SERVER_OPTIONS
    assert set(SERVER_DATA_PLANE) <= {o.name for o in SERVER_OPTIONS}
    assert set(AGENT_DATA_PLANE) <= {o.name for o in AGENT_OPTIONS}
    for key in ("cluster_cidr", "service_cidr"):
        assert key in SERVER_DATA_PLANE and key in AGENT_DATA_PLANE, "servers and agents must agree on %s" % key


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
    assert layout.spare_control_planes == ["cp4", "cp5", "cp6"], "replace-replica takes one, grow-shrink two"
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


def _bare_target(tmp_path, leases, states=None):
    """A VagrantTarget without its tool checks: libvirt answers from `leases` (uuid -> the
    text of `virsh domifaddr --source lease`) and `states` (uuid -> `virsh domstate`)."""
    sys.path.insert(0, os.path.join(ROOT, "vagrant", "drills"))
    from target_vagrant import VagrantTarget  # noqa: E402
    target = VagrantTarget.__new__(VagrantTarget)
    target.layout = ClusterLayout.from_env({})
    target.control_planes, target.workers = target.layout.control_planes, target.layout.workers
    target.vagrant_dir, target.state_dir = str(tmp_path), str(tmp_path / "state")
    target.ssh_config_path = str(tmp_path / "state" / "ssh-config")
    for host, uuid in (("cp1", "u-cp1"), ("cp4", "u-cp4"), ("w1", "u-w1"), ("w2", "u-w2")):
        machine = tmp_path / ".vagrant" / "machines" / host / "libvirt"
        machine.mkdir(parents=True)
        (machine / "id").write_text(uuid + "\n")
    answers = {"domifaddr": leases, "domstate": states or {}}
    target.virsh = lambda *args, **kw: subprocess.CompletedProcess(args, 0, answers[args[0]].get(args[1], ""), "")
    return target


LEASE = (" Name       MAC address          Protocol     Address\n"
         "-------------------------------------------------------------------------------\n"
         " vnet8      52:54:00:ff:d0:8a    ipv4         192.168.124.%d/24\n")


def test_ssh_config_lists_every_vm_with_a_lease_even_past_one_without(tmp_path):
    """`vagrant ssh-config` stopped at the first machine not up (the spare cp4 never
    created) and left the workers out; the config from libvirt's leases keeps every VM
    that has an address and leaves out only those without one (w1 here, powered off)."""
    target = _bare_target(tmp_path, {"u-cp1": LEASE % 81, "u-cp4": LEASE % 90, "u-w2": LEASE % 226})
    target.refresh_ssh_config()
    with open(target.ssh_config_path, encoding="utf-8") as f:
        config = f.read()
    hosts = [line.split()[1] for line in config.splitlines() if line.startswith("Host ")]
    assert hosts == ["cp1", "cp4", "w2"]
    assert "HostName 192.168.124.226" in config
    assert os.path.join(str(tmp_path), ".vagrant", "machines", "w2", "libvirt", "private_key") in config


def test_a_spare_control_plane_is_waited_for_as_a_server(tmp_path):
    """A spare (cp4) runs shepherd-server before it is a member: waiting for
    shepherd-agent there hung the replace-replica drill until its deadline."""
    target = _bare_target(tmp_path, {})
    assert target.service("cp4") == "shepherd-server"
    assert target.service("cp1") == "shepherd-server"
    assert target.service("w1") == "shepherd-agent"


def test_a_retired_spare_is_not_started_again(tmp_path):
    """After replace-replica, cp4 is a member; a spare created and powered off (retired by a
    drill: its data is a removed member's) is skipped; a running one or one never created
    is taken."""
    target = _bare_target(tmp_path, {}, {"u-cp4": "shut off\n"})
    assert not target._usable_spare("cp4")
    assert target._usable_spare("cp5"), "never created: vagrant up makes it"
    target = _bare_target(tmp_path / "again", {}, {"u-cp4": "running\n"})
    assert target._usable_spare("cp4")
