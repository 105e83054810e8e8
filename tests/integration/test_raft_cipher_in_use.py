"""Raft traffic between real replicas goes through the AES-GCM cipher, never Fernet."""
import time
import uuid

import pytest
from cryptography.fernet import Fernet

from shepherd_ha.cli.local_cluster import find_base_port
from shepherd_ha.store.raft_cipher import RaftCipher
from shepherd_ha.store.raft_node import RaftSettings
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store.replica import Peer, Replica

pytestmark = pytest.mark.integration


def test_replicas_speak_aes_gcm_and_never_fernet(tmp_path, monkeypatch):
    used = {"aead": 0}

    def no_fernet(*args, **kwargs):
        raise AssertionError("Fernet used on a Raft connection")
    monkeypatch.setattr(Fernet, "encrypt_at_time", no_fernet)
    monkeypatch.setattr(Fernet, "decrypt", no_fernet)
    original = RaftCipher.encrypt_at_time

    def counting(self, data, timestamp):
        used["aead"] += 1
        return original(self, data, timestamp)
    monkeypatch.setattr(RaftCipher, "encrypt_at_time", counting)

    base = find_base_port(3)
    members = [("r%d" % i, "127.0.0.1:%d" % (base + 100 + i)) for i in (1, 2, 3)]
    password = uuid.uuid4().hex
    replicas = []
    try:
        for ident, address in members:
            others = [(i, a) for i, a in members if i != ident]
            settings = RaftSettings(self_address=address, peer_addresses=[a for _, a in others],
                                    data_dir=str(tmp_path / ident), password=password,
                                    salt="00112233445566778899aabbccddeeff")
            replicas.append(Replica(ident, settings, [Peer(i, a) for i, a in others]))
        assert all(isinstance(r.node.syncobj.encryptor, RaftCipher) for r in replicas)
        op = {"op": "create", "resource": "namespaces", "object": {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "cipher", "uid": str(uuid.uuid4()), "creationTimestamp": now_rfc3339()},
            "spec": {}, "status": {"phase": "Active"}}}
        deadline, result = time.monotonic() + 30, None
        while time.monotonic() < deadline:
            try:
                result = replicas[0].write([op], key=uuid.uuid4().hex)
                break
            except Exception:     # no leader yet
                time.sleep(0.2)
        assert result and result["ok"], result
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(r.node.fsm.get("namespaces", None, "cipher") for r in replicas):
            time.sleep(0.05)
        assert all(r.node.fsm.get("namespaces", None, "cipher") for r in replicas), "not replicated everywhere"
        assert used["aead"] > 0
    finally:
        for r in replicas:
            r.close()
