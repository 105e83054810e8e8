"""sheepctl server resolution: --server > $SHEPHERD_SERVERS > --config > $SHEPHERD_CONFIG
> ~/.shepherd/config > error."""
import pytest
import yaml

from ctl import config
from ctl.config import ConfigError, resolve
from ctl.main import main
from real_api import ApiServer


def write(path, servers=None, namespace=None, text=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        data = {"servers": servers}
        if namespace:
            data["namespace"] = namespace
        text = yaml.safe_dump(data)
    path.write_text(text)
    return str(path)


@pytest.fixture
def files(tmp_path):
    home = tmp_path / "home" / ".shepherd" / "config"
    return {"home": home, "env": tmp_path / "env.yaml", "arg": tmp_path / "arg.yaml"}


def test_nothing_configured(files):
    with pytest.raises(ConfigError) as ei:
        resolve(env={}, home_config=str(files["home"]))
    assert str(ei.value) == ("no servers configured: pass --server URL or --config DIR/config "
                             "(written by `shepherd-ha local up`)")


def test_precedence_chain(files):
    home = write(files["home"], ["http://home:1"], namespace="home-ns")
    env_cfg = write(files["env"], ["http://envcfg:1"])
    arg_cfg = write(files["arg"], ["http://argcfg:1", "argcfg:2"])
    kw = {"home_config": home}

    assert resolve(env={}, **kw).servers == ["http://home:1"]
    env = {"SHEPHERD_CONFIG": env_cfg}
    assert resolve(env=env, **kw).servers == ["http://envcfg:1"]
    assert resolve(config_arg=arg_cfg, env=env, **kw).servers == ["http://argcfg:1", "http://argcfg:2"]
    env["SHEPHERD_SERVERS"] = "envsrv:1,envsrv:2"
    assert resolve(config_arg=arg_cfg, env=env, **kw).servers == ["http://envsrv:1", "http://envsrv:2"]
    s = resolve(server_arg="http://flag:1", config_arg=arg_cfg, env=env, **kw)
    assert s.servers == ["http://flag:1"] and s.source == "--server"


def test_namespace_from_config_unless_flag(files):
    home = write(files["home"], ["http://home:1"], namespace="team-a")
    assert resolve(env={}, home_config=home).namespace == "team-a"
    assert resolve(env={}, home_config=home, namespace_arg="x").namespace == "x"
    # servers from --server, namespace still from the config file
    assert resolve(server_arg="h:1", env={}, home_config=home).namespace == "team-a"
    assert config.resolve_namespace(env={}, home_config=str(files["home"].parent / "nope")) == "default"


def test_config_directory_means_dir_config(tmp_path):
    write(tmp_path / "cluster" / "config", ["http://127.0.0.1:8001"])
    s = resolve(config_arg=str(tmp_path / "cluster"), env={}, home_config=str(tmp_path / "none"))
    assert s.servers == ["http://127.0.0.1:8001"]


def test_bad_config_files(tmp_path):
    none = str(tmp_path / "none")
    with pytest.raises(ConfigError, match="no such file"):
        resolve(config_arg=str(tmp_path / "missing"), env={}, home_config=none)
    bad = write(tmp_path / "bad.yaml", text="servers: [a\nnamespace: x\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: line \d+:"):
        resolve(config_arg=bad, env={}, home_config=none)
    empty = write(tmp_path / "empty.yaml", text="namespace: x\n")
    with pytest.raises(ConfigError, match="no `servers` list"):
        resolve(config_arg=empty, env={}, home_config=none)
    # a broken config file does not matter when the servers come from elsewhere
    assert resolve(server_arg="h:1", config_arg=bad, env={}, home_config=none).servers == ["http://h:1"]


@pytest.fixture
def server():
    s = ApiServer().start()
    yield s
    s.stop()


def test_end_to_end_precedence(server, tmp_path, monkeypatch, capsys, ctl_isolated):
    dead = "http://127.0.0.1:1"

    assert main(["get", "pods"]) == 1
    assert "no servers configured" in capsys.readouterr().err

    write(tmp_path / "home" / ".shepherd" / "config", [server.url], namespace="home-ns")
    assert main(["get", "pods"]) == 0
    assert capsys.readouterr().err == "No resources found in home-ns namespace.\n"

    cfg = write(tmp_path / "c.yaml", [dead])
    monkeypatch.setenv("SHEPHERD_CONFIG", cfg)
    assert main(["--retry-deadline", "0.1", "get", "pods"]) == 1  # env config (dead) wins over home
    assert "no replica reachable at %s" % dead in capsys.readouterr().err

    good = write(tmp_path / "good.yaml", [server.url])
    assert main(["--config", good, "get", "pods"]) == 0        # --config wins over env config
    capsys.readouterr()

    monkeypatch.setenv("SHEPHERD_SERVERS", server.url)
    assert main(["--config", cfg, "get", "pods"]) == 0         # env servers win over --config
    capsys.readouterr()

    assert main(["--server", dead, "--retry-deadline", "0.1", "get", "pods"]) == 1  # --server wins
    assert dead in capsys.readouterr().err


def test_token_flag_beats_env_beats_config_file(files):
    home = write(files["home"], text=yaml.safe_dump({"servers": ["http://home:1"], "token": " from-file "}))
    assert resolve(env={}, home_config=home).token == "from-file"
    assert resolve(env={"SHEPHERD_TOKEN": "from-env"}, home_config=home).token == "from-env"
    assert resolve(env={"SHEPHERD_TOKEN": "from-env"}, home_config=home, token_arg="flag").token == "flag"
    plain = write(files["arg"], ["http://arg:1"])
    assert resolve(config_arg=plain, env={}, home_config=home).token is None
    # the file's token never goes to servers named elsewhere
    assert resolve(server_arg="http://other:1", env={}, home_config=home).token is None
    assert resolve(env={"SHEPHERD_SERVERS": "other:1"}, home_config=home).token is None
    bad = write(files["env"], text=yaml.safe_dump({"servers": ["http://e:1"], "token": 12}))
    with pytest.raises(ConfigError, match="`token` must be a non-empty string"):
        resolve(config_arg=bad, env={}, home_config=home)
