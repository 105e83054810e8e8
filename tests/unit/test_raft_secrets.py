"""How strong a hand-given Raft password must be, and the cluster salt (store/raft_secrets.py)."""
import pytest

from shepherd_ha import config
from shepherd_ha.options import ConfigError
from shepherd_ha.store import raft_secrets


@pytest.mark.parametrize("weak", ["", "pw", "secret", "correcthorse", "a" * 40, "abababababababababababab",
                                  "0123456789012345", "Summer2026Summer"])
def test_weak_passwords_are_refused_with_a_way_out(weak):
    with pytest.raises(ConfigError) as info:
        raft_secrets.check_password(weak)
    assert "token_hex" in str(info.value) and "16 characters" in str(info.value)


@pytest.mark.parametrize("strong", [raft_secrets.new_password(), "3f9c1e0b7a6d4c2e8f1a0b9c7d6e5f4a",
                                    "correct-horse-battery-staple-42"])
def test_generated_and_long_mixed_passwords_pass(strong):
    raft_secrets.check_password(strong)


def test_generated_salts_differ_and_are_16_bytes():
    salts = {raft_secrets.new_salt() for _ in range(20)}
    assert len(salts) == 20 and all(len(raft_secrets.salt_bytes(s)) == 16 for s in salts)


def _values(**over):
    values = {o.name: o.default for o in config.SERVER_OPTIONS}
    values.update(id="r1", raft_address="127.0.0.1:7001", data_dir="/tmp/x", raft_password=raft_secrets.new_password(),
                  raft_salt=raft_secrets.new_salt())
    values.update(over)
    return values


def test_the_server_refuses_a_weak_password_and_a_missing_salt(tmp_path):
    with pytest.raises(ConfigError, match="too weak"):
        config.server_settings(_values(raft_password="hunter2"))
    weak_file = tmp_path / "pw"
    weak_file.write_text("hunter2hunter2\n")
    with pytest.raises(ConfigError, match="--raft-password-file .*too weak"):
        config.server_settings(_values(raft_password=None, raft_password_file=str(weak_file)))
    with pytest.raises(ConfigError, match="--raft-salt"):
        config.server_settings(_values(raft_salt=None))
    settings, *_ = config.server_settings(_values())
    assert settings.salt


def test_accepted_passwords_come_from_a_file_and_must_be_strong_too(tmp_path):
    accepted = tmp_path / "accepted"
    first, second = raft_secrets.new_password(), raft_secrets.new_password()
    accepted.write_text("%s\n\n%s\n" % (first, second))
    settings, *_ = config.server_settings(_values(raft_accepted_password_file=str(accepted)))
    assert settings.accepted_passwords == (first, second)
    accepted.write_text(first + "\nshort\n")
    with pytest.raises(ConfigError, match="--raft-accepted-password-file .*too weak"):
        config.server_settings(_values(raft_accepted_password_file=str(accepted)))
