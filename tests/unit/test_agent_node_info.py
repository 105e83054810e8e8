"""The agent's Node status is complete (agent/node_info.py, agent/node.py): every
nodeInfo field, addresses, capacity, allocatable, conditions and daemonEndpoints, so
the official typed client (kubernetes 31+, whose models refuse a nodeInfo without
bootID, kernelVersion, kubeProxyVersion, machineID, osImage or systemUUID) reads it."""
import json
import threading

from kubernetes.client import ApiClient

from agent import node_info
from agent.node import NodeManager
from agent.runtime.hollow_runtime import HollowRuntime

NODE_INFO_FIELDS = {"architecture", "bootID", "containerRuntimeVersion", "kernelVersion", "kubeProxyVersion",
                    "kubeletVersion", "machineID", "operatingSystem", "osImage", "systemUUID"}


def node_object():
    manager = NodeManager(None, HollowRuntime("n1"), "n1", "10.0.0.7", threading.Event(), port=10250,
                          cpu_millicores=2000, memory_bytes=4 << 30, hostname="host-n1")
    obj = manager.node_object()
    obj["metadata"]["creationTimestamp"] = "2026-12-01T00:00:00Z"     # the server stamps it
    return obj


def test_every_node_info_field_is_a_string_and_the_host_facts_are_real():
    info = node_object()["status"]["nodeInfo"]
    assert set(info) == NODE_INFO_FIELDS
    assert all(isinstance(v, str) for v in info.values())
    with open(node_info.BOOT_ID) as fh:
        assert info["bootID"] == fh.read().strip()
    assert info["kernelVersion"] and info["osImage"] and info["machineID"]
    assert info["containerRuntimeVersion"] == "hollow://1" and info["kubeletVersion"].startswith("shepherd-agent/")


def test_os_image_reads_pretty_name_and_falls_back(tmp_path):
    release = tmp_path / "os-release"
    release.write_text('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    assert node_info.os_image((str(tmp_path / "missing"), str(release))) == "Debian GNU/Linux 12 (bookworm)"
    assert node_info.os_image((str(tmp_path / "missing"),))     # the system's name, never empty


def test_the_official_typed_client_deserializes_the_node():
    obj = node_object()
    node = ApiClient().deserialize(json.dumps(obj), "V1Node", "application/json")
    assert node.metadata.name == "n1"
    info = node.status.node_info
    assert info.boot_id == obj["status"]["nodeInfo"]["bootID"] and info.kube_proxy_version == ""
    assert {(a.type, a.address) for a in node.status.addresses} == {("InternalIP", "10.0.0.7"),
                                                                   ("Hostname", "host-n1")}
    assert node.status.capacity["cpu"] == "2" and node.status.allocatable["pods"] == "110"
    assert node.status.daemon_endpoints.kubelet_endpoint.port == 10250
    assert [c.type for c in node.status.conditions] == ["Ready"]
