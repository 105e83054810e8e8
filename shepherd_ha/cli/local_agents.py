"""The node agents of a local cluster (a mixin of cli/local_cluster.py LocalCluster):
recorded in cluster.yaml, each with agents/<name>/agent.yaml, agent.log and pid;
started, stopped and killed by the PID recorded, after checking it still runs our
command line (LocalCluster._our_pid); their containers removed by label; their Nodes'
readiness as the API reports it."""
import os
import signal
import subprocess
import sys

import requests
import yaml

from . import cluster_tls
from .local_errors import LocalClusterError


class LocalAgents:
    def agents(self):
        """The agents of this cluster: [{"name", "runtime", "args"}]."""
        return list(self.spec().get("agents") or [])

    def agent(self, name):
        for a in self.agents():
            if a["name"] == name:
                return a
        raise LocalClusterError("no agent %r in %s (agents: %s)" % (
            name, self.dir, ", ".join(a["name"] for a in self.agents()) or "none"))

    def add_agent(self, name, runtime="docker", extra_args=()):
        """Record a node agent (node name `name`) talking to every replica; start it
        with start_agent. Adding an existing name replaces its settings."""
        spec = self.spec()
        adir = os.path.join(self.dir, "agents", name)
        os.makedirs(adir, exist_ok=True)
        # Volumes live under the cluster directory, not /var/lib (no root needed; `down --purge` removes them).
        config = {"servers": ",".join(self.api_urls()), "node_name": name, "runtime": runtime,
                  "state_dir": os.path.join(adir, "state"), "cluster_id": self.cluster_id()}
        config.update(spec.get("networks") or {})      # the agents' --cluster-cidr and --service-cidr
        if spec.get("admin_token"):
            self.node_token(name)
            config["token_file"] = self.node_token_file(name)
        if spec.get("tls"):
            config.update(cluster_tls.agent_options(self.dir, name, "127.0.0.1"))
        with open(os.path.join(adir, "agent.yaml"), "w") as fh:
            yaml.safe_dump(config, fh, sort_keys=False)
        agents = [a for a in spec.get("agents") or [] if a["name"] != name]
        agents.append({"name": name, "runtime": runtime, "args": [str(a) for a in extra_args]})
        spec["agents"] = agents
        self._write_spec(spec)
        return os.path.join(adir, "agent.yaml")

    def _agent_paths(self, name):
        adir = os.path.join(self.dir, "agents", name)
        return (os.path.join(adir, "agent.yaml"), os.path.join(adir, "pid"), os.path.join(adir, "agent.log"))

    def agent_log(self, name):
        return self._agent_paths(name)[2]

    def agent_pid(self, name):
        """The PID of our running agent process, or None."""
        config_path, pid_path, _ = self._agent_paths(name)
        return self._our_pid(pid_path, config_path)

    def start_agent(self, name):
        agent = self.agent(name)
        pid = self.agent_pid(name)
        if pid:
            return pid
        config_path, pid_path, log_path = self._agent_paths(name)
        argv = [sys.executable, "-m", "agent.main", "--config", config_path] + list(agent.get("args") or [])
        return self._spawn_agent(name, argv, log_path, pid_path)

    def _spawn_agent(self, name, argv, log_path, pid_path):
        """Start an agent's process, record its PID (cli/netns_cluster.py starts it inside
        its node's network namespace)."""
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, close_fds=True)
        with open(pid_path, "w") as fh:
            fh.write(str(proc.pid))
        return proc.pid

    def start_agents(self):
        return {a["name"]: self.start_agent(a["name"]) for a in self.agents()}

    def stop_agent(self, name, timeout=10.0):
        """SIGTERM (the agent exits; its containers keep running), SIGKILL after `timeout`."""
        return self._terminate(self.agent_pid(name), timeout)

    def kill_agent(self, name):
        """SIGKILL, for drills."""
        return self._kill(self.agent_pid(name))

    def stop_agents(self, timeout=10.0):
        names = [a["name"] for a in self.agents()] if self.exists else []
        for name in names:
            pid = self.agent_pid(name)
            if pid:
                os.kill(pid, signal.SIGTERM)
        for name in names:
            self.stop_agent(name, timeout)

    def purge_containers(self):
        """Remove every container of this cluster's agents: by their node label, and of this
        cluster (another cluster on the engine may have a node of the same name; a container
        without the cluster label was made before it, by one of ours). Returns the number removed."""
        import docker
        client = docker.from_env(timeout=30)
        cluster_id = self.cluster_id()
        removed = 0
        try:
            for a in self.agents():
                for c in client.api.containers(all=True, filters={"label": "shepherd.io/node=%s" % a["name"]}):
                    theirs = (c.get("Labels") or {}).get("shepherd.io/cluster-id")
                    if cluster_id and theirs and theirs != cluster_id:
                        continue
                    client.api.remove_container(c["Id"], force=True, v=True)
                    removed += 1
        finally:
            client.close()
        return removed

    def agent_status(self, timeout=0.5):
        """One row per agent: name, pid, runtime, and its Node's Ready condition."""
        rows, headers = [], self.auth_headers()
        for a in self.agents():
            ready = None
            for url in self.api_urls():
                try:
                    reply = requests.get("%s/api/v1/nodes/%s" % (url, a["name"]), params={"resourceVersion": "0"},
                                         headers=headers, timeout=timeout, verify=self.verify)
                except requests.RequestException:
                    continue
                if reply.status_code == 404:
                    ready = "unregistered"
                elif reply.ok:
                    ready = "Unknown"
                    for cond in (reply.json().get("status") or {}).get("conditions") or []:
                        if cond.get("type") == "Ready":
                            ready = {"True": "Ready", "False": "NotReady"}.get(cond.get("status"), "NotReady")
                break
            rows.append({"name": a["name"], "pid": self.agent_pid(a["name"]), "runtime": a.get("runtime", "docker"),
                         "node": ready or "?", "log": self.agent_log(a["name"])})
        return rows
