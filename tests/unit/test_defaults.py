"""One source for each default: the server's and the agent's option tables read their
defaults from the settings classes that own them, and the Vagrant VMs pass only the
options that differ from those defaults."""
import argparse
import ast
import dataclasses
import importlib
import inspect
import os
import sys

import pytest

from agent import config as agent_config
from agent.node import NodeManager
from shepherd_ha import config
from shepherd_ha.controllers.controller import Controller
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.model.quantity import parse_cpu, parse_memory
from shepherd_ha.store import raft_node
from shepherd_ha.store.raft_node import RaftSettings
from shepherd_ha.store.replica import Replica
from shepherd_ha.store.watch_log import WatchLog

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "vagrant"))

import cluster_layout  # noqa: E402

REQUIRED = dict(id="r1", raft_address="127.0.0.1:7001", data_dir="/tmp/x", raft_password="correct-horse-battery-staple-42", raft_salt="00112233445566778899aabbccddeeff",
                peers="r2@127.0.0.1:7002/127.0.0.1:8002")
# RaftSettings fields the server fills from differently named options (or not at all).
RAFT_IDENTITY = {"self_address", "peer_addresses", "data_dir", "password", "salt", "accepted_passwords",
                 "bind_address"}


def parse(argv=()):
    parser = argparse.ArgumentParser()
    config.add_arguments(parser, config.SERVER_OPTIONS)
    return parser.parse_args(list(argv))


def no_flag_settings(environ=None):
    values = config.resolve(parse(), config.SERVER_OPTIONS, {} if environ is None else environ)
    values.update(REQUIRED)
    raft, *_ = config.server_settings(values)
    return values, raft, ControllerSettings.from_values(values)


def parameter_default(func, name):
    return inspect.signature(func).parameters[name].default


def test_no_flags_give_every_settings_class_its_own_defaults():
    values, raft, controllers = no_flag_settings()
    tunables = {f.name for f in dataclasses.fields(RaftSettings) if f.name not in RAFT_IDENTITY}
    assert tunables >= {"heartbeat", "election_timeout_min", "election_timeout_max", "leader_fallback"}
    for name in tunables:
        assert getattr(raft, name) == getattr(RaftSettings, name), name
    assert controllers == ControllerSettings()
    assert values["write_timeout"] == parameter_default(Replica.__init__, "write_timeout")
    assert values["watch_log_size"] == parameter_default(Replica.__init__, "watch_log_size")
    assert values["watch_log_size"] == parameter_default(WatchLog.__init__, "capacity")


def test_a_flag_still_reaches_the_settings():
    values = config.resolve(parse(["--heartbeat", "0.07", "--node-grace-period", "33"]), config.SERVER_OPTIONS, {})
    values.update(REQUIRED)
    raft, *_ = config.server_settings(values)
    assert raft.heartbeat == 0.07 and raft.heartbeat != RaftSettings.heartbeat
    assert ControllerSettings.from_values(values).node_grace_period == 33.0


def test_the_option_table_writes_no_default_a_settings_class_owns():
    """A literal default next to a settings field would be a second source that can drift."""
    owned = set(config.RAFT) | set(config.CONTROLLERS) | {"write_timeout", "watch_log_size"}
    tree = ast.parse(inspect.getsource(config))
    checked = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Option":
            name = node.args[0].value
            if name in owned:
                assert not isinstance(node.args[2], ast.Constant), "Option %r repeats a literal default" % name
                checked.add(name)
    assert checked >= {"heartbeat", "election_timeout_min", "leader_fallback", "log_compaction_entries",
                       "node_grace_period", "pod_eviction_timeout", "node_lease_interval", "event_max",
                       "write_timeout", "watch_log_size"}


@dataclasses.dataclass
class SlowerRaft(RaftSettings):
    heartbeat: float = 0.1
    election_timeout_min: float = 0.5


@pytest.fixture
def config_over_slower_raft(monkeypatch):
    monkeypatch.setattr(raft_node, "RaftSettings", SlowerRaft)
    importlib.reload(config)
    yield config
    monkeypatch.undo()
    importlib.reload(config)


def test_changing_the_dataclass_default_changes_what_the_server_uses(config_over_slower_raft):
    _, raft, _ = no_flag_settings()
    assert (raft.heartbeat, raft.election_timeout_min) == (0.1, 0.5)
    assert [o.default for o in config.SERVER_OPTIONS if o.name == "heartbeat"] == [0.1]


def test_the_lease_interval_agents_use_is_the_one_the_server_assumes():
    values = agent_config.resolve(argparse.Namespace(), environ={})
    assert values["lease_interval"] == ControllerSettings().node_lease_interval
    # NodeManager's own defaults (for callers that pass none) are the agent options' defaults.
    assert parameter_default(NodeManager.__init__, "lease_interval") == values["lease_interval"]
    assert parameter_default(NodeManager.__init__, "status_interval") == values["status_interval"]
    assert parameter_default(NodeManager.__init__, "max_pods") == values["max_pods"]
    assert parameter_default(NodeManager.__init__, "reserved_cpu") == parse_cpu(values["reserved_cpu"])
    assert parameter_default(NodeManager.__init__, "reserved_memory") == parse_memory(values["reserved_memory"])


def test_controllers_resync_as_the_settings_say_by_default():
    assert Controller.resync_period == ControllerSettings().resync_period


# ---- the Vagrant VMs: only what differs, generated from one table ----

def test_vm_options_are_server_options_that_differ_from_the_defaults():
    defaults = {o.name: o.default for o in config.SERVER_OPTIONS}
    for name, value in cluster_layout.VM_SERVER_OPTIONS.items():
        assert name in defaults, name
        assert value != defaults[name], "%s repeats the server's default %r" % (name, value)
    assert set(cluster_layout.SERVER_OPTION_ENV) <= set(defaults)


def test_the_generated_file_is_what_the_server_reads(tmp_path):
    path = tmp_path / "server.yaml"
    lines = ["%s: %s" % kv for kv in REQUIRED.items()]
    path.write_text("\n".join(lines) + "\n" + cluster_layout.server_options_yaml(cluster_layout.vm_server_options({})))
    values = config.resolve(parse(["--config", str(path)]), config.SERVER_OPTIONS, {})
    raft, *_ = config.server_settings(values)              # validates the VM timings against each other
    controllers = ControllerSettings.from_values(values)
    vm = cluster_layout.VM_SERVER_OPTIONS
    assert (raft.heartbeat, raft.election_timeout_min, raft.election_timeout_max, raft.leader_fallback) == (
        vm["heartbeat"], vm["election_timeout_min"], vm["election_timeout_max"], vm["leader_fallback"])
    assert controllers.node_grace_period == vm["node_grace_period"]
    assert controllers.pod_eviction_timeout == ControllerSettings().pod_eviction_timeout


def test_environment_overrides_and_bad_values(tmp_path):
    options = cluster_layout.vm_server_options({"RAFT_HEARTBEAT": "0.3", "POD_EVICTION_TIMEOUT": "12"})
    assert options["heartbeat"] == 0.3 and options["pod_eviction_timeout"] == 12.0
    assert options["election_timeout_min"] == cluster_layout.VM_SERVER_OPTIONS["election_timeout_min"]
    with pytest.raises(cluster_layout.LayoutError, match="NODE_GRACE_PERIOD='soon'"):
        cluster_layout.vm_server_options({"NODE_GRACE_PERIOD": "soon"})
    # The drills read back what the artifacts hold, not what the environment says now.
    (tmp_path / cluster_layout.SERVER_OPTIONS_FILE).write_text(cluster_layout.server_options_yaml(options))
    assert cluster_layout.provisioned_server_options({"ARTIFACTS": str(tmp_path)}) == options
    assert cluster_layout.provisioned_server_options({"ARTIFACTS": str(tmp_path / "none")}) == \
        cluster_layout.VM_SERVER_OPTIONS
