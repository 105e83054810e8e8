"""Server settings: flag > env > file > default, and bad settings say how to fix them."""
import argparse

import pytest

from shepherd_ha import config
from shepherd_ha.store.raft_node import ConfigError, RaftSettings


def parse(argv):
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, config.SERVER_OPTIONS)
    return parser.parse_args(argv)


def test_precedence_flag_env_file_default(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("id: from-file\nheartbeat: 0.07\napi-bind: 127.0.0.1:9999\nwrite_timeout: 3\n")
    env = {"SHEPHERD_ID": "from-env", "SHEPHERD_HEARTBEAT": "0.06"}
    values = config.resolve(parse(["--config", str(path), "--id", "from-flag"]), config.SERVER_OPTIONS, env)
    assert values["id"] == "from-flag"
    assert values["heartbeat"] == 0.06
    assert values["api_bind"] == "127.0.0.1:9999"
    assert values["write_timeout"] == 3.0
    assert values["election_timeout_max"] == 2.0


def test_unknown_file_key_and_bad_types_are_named(tmp_path):
    path = tmp_path / "server.yaml"
    path.write_text("idd: r1\n")
    with pytest.raises(ConfigError, match="unknown option.*idd"):
        config.resolve(parse(["--config", str(path)]), config.SERVER_OPTIONS, {})
    with pytest.raises(ConfigError, match="SHEPHERD_HEARTBEAT.*float"):
        config.resolve(parse([]), config.SERVER_OPTIONS, {"SHEPHERD_HEARTBEAT": "fast"})
    with pytest.raises(ConfigError, match="cannot read config file"):
        config.resolve(parse(["--config", str(tmp_path / "missing.yaml")]), config.SERVER_OPTIONS, {})


def test_peers_parse_and_reject_bad_forms():
    peers = config.parse_peers("r2@127.0.0.1:7002/127.0.0.1:8002, r3@10.0.0.3:7000")
    assert [(p.id, p.raft, p.api) for p in peers] == [("r2", "127.0.0.1:7002", "http://127.0.0.1:8002"),
                                                      ("r3", "10.0.0.3:7000", None)]
    with pytest.raises(ConfigError, match="ID@RAFT"):
        config.parse_peers("127.0.0.1:7002")
    with pytest.raises(ConfigError, match="unique"):
        config.parse_peers("r2@a:1,r2@b:2")


def base_values(**over):
    values = {o.name: o.default for o in config.SERVER_OPTIONS}
    values.update(id="r1", raft_address="127.0.0.1:7001", data_dir="/tmp/x", raft_password="correct-horse-battery-staple-42",
                  raft_salt="00112233445566778899aabbccddeeff", peers="r2@127.0.0.1:7002/127.0.0.1:8002")
    values.update(over)
    return values


def test_server_settings_require_password_and_id():
    with pytest.raises(ConfigError, match="password"):
        config.server_settings(base_values(raft_password=None))
    with pytest.raises(ConfigError, match="--id"):
        config.server_settings(base_values(id=None))
    with pytest.raises(ConfigError, match="own id"):
        config.server_settings(base_values(peers="r1@127.0.0.1:7002"))


def test_password_file(tmp_path):
    secret = tmp_path / "pw"
    secret.write_text("Tr0ub4dor&3-correct-horse\n")
    settings, *_ = config.server_settings(base_values(raft_password=None, raft_password_file=str(secret)))
    assert settings.password == "Tr0ub4dor&3-correct-horse"


@pytest.mark.parametrize("over, match", [
    (dict(heartbeat=0.1, election_timeout_min=0.2), "3 x heartbeat"),
    (dict(election_timeout_min=0.5, election_timeout_max=0.4), "must exceed min"),
    (dict(leader_fallback=0.05), "leader fallback"),
    (dict(log_compaction_entries=1), "at least 2 entries"),
    (dict(log_compaction_seconds=0), "positive age"),
])
def test_timeouts_are_validated_against_each_other(over, match):
    settings = dict(self_address="127.0.0.1:7001", peer_addresses=["127.0.0.1:7002"], data_dir="/tmp/x",
                    password="pw", salt="00112233445566778899aabbccddeeff")
    settings.update(over)
    with pytest.raises(ConfigError, match=match):
        RaftSettings(**settings).validate()
