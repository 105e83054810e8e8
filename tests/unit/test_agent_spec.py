"""Pod spec -> ContainerConfig -> docker create arguments (pure parts of the agent)."""
import docker

from agent import labels as L
from agent import spec as P
from agent.runtime.base import ContainerConfig, PortBinding
from agent.runtime.docker_runtime import create_kwargs, docker_time, info_from_inspect


def pod(containers, **spec):
    body = {"containers": containers}
    body.update(spec)
    return {"metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1"}, "spec": body}


def c(**kw):
    out = {"name": "main", "image": "shepherd/busybox:1"}
    out.update(kw)
    return out


API = docker.APIClient(base_url="unix:///nonexistent.sock", version="1.41")


def test_command_and_args_map_to_entrypoint_and_cmd():
    p = pod([c(command=["httpd", "-f"], args=["-p", "8080"])])
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert cfg.entrypoint == ["httpd", "-f"]
    assert cfg.command == ["-p", "8080"]
    kw = create_kwargs(API, cfg)
    assert kw["entrypoint"] == ["httpd", "-f"] and kw["command"] == ["-p", "8080"]


def test_command_alone_drops_the_image_cmd_and_args_alone_keep_the_entrypoint():
    p = pod([c(command=["sleep", "5"])])
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert cfg.entrypoint == ["sleep", "5"] and cfg.command == []
    p = pod([c(args=["echo", "hi"])])
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert cfg.entrypoint is None and cfg.command == ["echo", "hi"]
    kw = create_kwargs(API, cfg)
    assert "entrypoint" not in kw and kw["command"] == ["echo", "hi"]
    p = pod([c()])
    kw = create_kwargs(API, P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0))
    assert "entrypoint" not in kw and "command" not in kw


def test_env_working_dir_and_limits():
    p = pod([c(env=[{"name": "A", "value": "1"}, {"name": "EMPTY"}], workingDir="/www",
               resources={"limits": {"memory": "64Mi", "cpu": "500m"}, "requests": {"cpu": "250m"}})])
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert cfg.env == ["A=1", "EMPTY="]
    assert cfg.working_dir == "/www"
    assert cfg.mem_limit == 64 * 1024 * 1024
    assert cfg.nano_cpus == 500_000_000
    assert cfg.cpu_shares == 256
    kw = create_kwargs(API, cfg)
    hc = kw["host_config"]
    assert hc["Memory"] == 64 * 1024 * 1024 and hc["NanoCpus"] == 500_000_000 and hc["CpuShares"] == 256
    assert kw["environment"] == ["A=1", "EMPTY="] and kw["working_dir"] == "/www"


def test_no_limits_means_no_host_config_limits():
    p = pod([c()])
    kw = create_kwargs(API, P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0))
    hc = kw["host_config"]
    assert "Memory" not in hc and "NanoCpus" not in hc and "CpuShares" not in hc
    assert hc["NetworkMode"] == "bridge"


def test_host_ports_are_published_on_the_node_address():
    p = pod([c(ports=[{"containerPort": 8080, "hostPort": 30080, "protocol": "TCP"},
                      {"containerPort": 53, "hostPort": 30053, "protocol": "UDP"},
                      {"containerPort": 9000}])])
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert PortBinding(8080, "TCP", 30080, "10.0.0.5") in cfg.ports
    assert PortBinding(9000, "TCP", 0, "") in cfg.ports
    kw = create_kwargs(API, cfg)
    assert 8080 in kw["ports"] and (53, "udp") in kw["ports"] and 9000 in kw["ports"]
    bindings = kw["host_config"]["PortBindings"]
    assert bindings["8080/tcp"] == [{"HostIp": "10.0.0.5", "HostPort": "30080"}]
    assert bindings["53/udp"] == [{"HostIp": "10.0.0.5", "HostPort": "30053"}]
    assert "9000/tcp" not in bindings


def test_an_explicit_host_ip_wins():
    p = pod([c(ports=[{"containerPort": 80, "hostPort": 8081, "hostIP": "127.0.0.1"}])])
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert cfg.ports == [PortBinding(80, "TCP", 8081, "127.0.0.1")]


def test_labels_name_and_restart_count():
    p = pod([c()])
    last = {"exitCode": 3, "reason": "Error", "startedAt": "2026-01-01T00:00:00Z",
            "finishedAt": "2026-01-01T00:00:01Z", "containerID": "docker://abc"}
    cfg = P.container_config(p, p["spec"]["containers"][0], "node-1", "10.0.0.5", 4, last=last)
    assert cfg.name == "shepherd_node-1_shop_web-1_main_4"
    labels = cfg.labels
    assert labels[L.NODE] == "node-1" and labels[L.POD_UID] == "u-1"
    assert labels[L.POD_NAMESPACE] == "shop" and labels[L.POD_NAME] == "web-1"
    assert labels[L.CONTAINER_NAME] == "main" and labels[L.RESTART_COUNT] == "4"
    assert labels[L.SPEC_HASH] == L.spec_hash(p["spec"]["containers"][0])
    assert L.restart_count_of(labels) == 4
    assert L.last_state_of(labels) == last
    assert create_kwargs(API, cfg)["labels"] == labels


def test_spec_hash_changes_with_the_image_only_when_the_spec_changes():
    a = c()
    assert L.spec_hash(a) == L.spec_hash(dict(a))
    assert L.spec_hash(a) != L.spec_hash(c(image="shepherd/busybox:2"))


def test_restart_count_label_garbage_is_zero():
    assert L.restart_count_of({L.RESTART_COUNT: "x"}) == 0
    assert L.restart_count_of({}) == 0
    assert L.last_state_of({}) is None


def test_multi_container_pods_share_a_sandbox_network():
    p = pod([c(name="web", ports=[{"containerPort": 8080, "hostPort": 30080}]), c(name="side")])
    assert P.needs_sandbox(p)
    sb = P.sandbox_config(p, "n1", "10.0.0.5", "shepherd/busybox:1", 0)
    assert L.is_sandbox(sb.labels) and sb.labels[L.CONTAINER_NAME] == L.SANDBOX_CONTAINER
    assert sb.command == P.SANDBOX_COMMAND and sb.hostname == "web-1"
    assert sb.ports == [PortBinding(8080, "TCP", 30080, "10.0.0.5")]
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0, sandbox_id="abc")
    assert cfg.network_mode == "container:abc" and cfg.ports == [] and cfg.hostname is None
    kw = create_kwargs(API, cfg)
    assert kw["host_config"]["NetworkMode"] == "container:abc"
    assert "ports" not in kw and "hostname" not in kw


def test_single_container_pods_own_their_network_and_host_network_pods_use_the_node():
    p = pod([c()])
    assert not P.needs_sandbox(p)
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert cfg.network_mode == "bridge" and cfg.hostname == "web-1"
    p = pod([c(ports=[{"containerPort": 80, "hostPort": 80}]), c(name="b")], hostNetwork=True)
    assert not P.needs_sandbox(p)
    cfg = P.container_config(p, p["spec"]["containers"][0], "n1", "10.0.0.5", 0)
    assert cfg.network_mode == "host" and cfg.ports == []
    kw = create_kwargs(API, cfg)
    assert kw["host_config"]["NetworkMode"] == "host" and "ports" not in kw


def test_split_image():
    assert P.split_image("busybox") == ("busybox", "latest")
    assert P.split_image("shepherd/busybox:1") == ("shepherd/busybox", "1")
    assert P.split_image("reg:5000/a/b") == ("reg:5000/a/b", "latest")
    assert P.split_image("reg:5000/a/b:2") == ("reg:5000/a/b", "2")
    assert P.split_image("a@sha256:00") == ("a", "sha256:00")


def test_docker_time_and_inspect():
    assert docker_time("0001-01-01T00:00:00Z") is None
    assert docker_time("2026-11-29T18:07:16.239103985Z") == "2026-11-29T18:07:16Z"
    info = info_from_inspect({
        "Id": "abc", "Name": "/shepherd_x", "Image": "sha256:1",
        "Config": {"Labels": {"a": "b"}, "Image": "shepherd/busybox:1"},
        "State": {"Status": "exited", "ExitCode": 3, "OOMKilled": False, "Error": "",
                  "StartedAt": "2026-11-29T18:07:16.2Z", "FinishedAt": "2026-11-29T18:07:17.2Z"},
        "NetworkSettings": {"IPAddress": "", "Networks": {"bridge": {"IPAddress": "172.17.0.9"}}}})
    assert info.name == "shepherd_x" and info.state == "exited" and info.exit_code == 3
    assert info.ip == "172.17.0.9" and not info.running and info.ever_started
    created = info_from_inspect({"Id": "x", "State": {"Status": "created", "ExitCode": 128,
                                                      "StartedAt": "0001-01-01T00:00:00Z"}})
    assert created.exit_code is None and not created.ever_started


def test_container_config_is_plain_data():
    cfg = ContainerConfig(name="n", image="i", labels={})
    assert cfg.network_mode == "bridge" and cfg.env == [] and cfg.ports == []
