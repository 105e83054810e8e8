"""Where sheepctl finds the cluster.

Servers, first match wins:
  --server URL[,URL...]  >  $SHEPHERD_SERVERS  >  --config FILE  >  $SHEPHERD_CONFIG
  >  --kubeconfig FILE  >  $KUBECONFIG (its first file)  >  ~/.shepherd/config  >  error

The config file is YAML (written by `shepherd-ha local up`):

    servers: ["https://127.0.0.1:8001", "https://127.0.0.1:8002", "https://127.0.0.1:8003"]
    namespace: default          # optional
    token: 0123...              # optional: bearer token, for replicas run with --token-file
    certificate-authority: ca.crt   # the cluster CA (relative to the file); https servers are
                                    # verified against it (default: the system's CAs)
    cluster_id: 0123...         # optional: a replica of another cluster answers 421

A kubeconfig (DIR/kubeconfig, or any with `kind: Config`) works too, as --config or
--kubeconfig: its current context's cluster (every replica, from the cluster's
`shepherd.io/servers` extension, else its one server), CA, user token and namespace.
The CA: --certificate-authority > the config file's.

The token, first match wins: --token > $SHEPHERD_TOKEN > the config file's `token`,
the last only when the servers come from that same file (a token is never sent to
servers named elsewhere).

A directory given as config means DIR/config.  The namespace is -n, else the
config file's `namespace`, else "default".
"""
import os
from dataclasses import dataclass, field

import yaml

from shepherd_ha.client.http_client import normalize_servers
from shepherd_ha.tls import kubeconfig

DEFAULT_CONFIG = os.path.join("~", ".shepherd", "config")

NO_SERVERS = ("no servers configured: pass --server URL or --config DIR/config "
              "(written by `shepherd-ha local up`)")


class ConfigError(Exception):
    pass


@dataclass
class Settings:
    servers: list
    namespace: str = "default"
    source: str = ""                      # where the servers came from
    config_path: str = None               # the config file consulted, if any
    config: dict = field(default_factory=dict)
    token: str = None
    ca_file: str = None                   # the CA https servers are verified against (None: the system's)
    client_cert: tuple = None             # (certificate file, key file) from a kubeconfig
    cluster_id: str = None


def read_config(path):
    """Parse a config file (or DIR/config) -> dict.  ConfigError when missing or bad."""
    path = os.path.expanduser(path)
    if os.path.isdir(path):
        path = os.path.join(path, "config")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ConfigError("config file %s: no such file" % path) from None
    except OSError as exc:
        raise ConfigError("config file %s: %s" % (path, exc.strerror or exc)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = " line %d:" % (mark.line + 1) if mark is not None else ""
        raise ConfigError("config file %s:%s %s" % (path, where, getattr(exc, "problem", None) or exc)) \
            from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("config file %s: expected a mapping with `servers`" % path)
    if kubeconfig.is_kubeconfig(data):
        try:
            # keys it lacks are left out (a kubeconfig without a token is not a config with a bad one)
            return dict({k: v for k, v in kubeconfig.read(data, path).items() if v is not None}, kubeconfig=True)
        except (kubeconfig.KubeconfigError, OSError) as exc:
            raise ConfigError(str(exc)) from None
    ca = data.get("certificate-authority")
    if ca is not None:
        if not isinstance(ca, str) or not ca.strip():
            raise ConfigError("config file %s: `certificate-authority` must be a file path" % path)
        data["ca_file"] = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.expanduser(ca.strip()))
    return data


def _servers_of(data, path):
    servers = data.get("servers")
    if isinstance(servers, str):
        servers = servers.split(",")
    if not isinstance(servers, list):
        raise ConfigError("config file %s has no `servers` list" % path)
    try:
        return normalize_servers(servers)
    except ValueError:
        raise ConfigError("config file %s has an empty `servers` list" % path) from None


def config_file_candidate(config_arg=None, env=None, home_config=DEFAULT_CONFIG, kubeconfig_arg=None):
    """(path, explicit) of the config file to consult, or (None, False)."""
    env = os.environ if env is None else env
    if config_arg:
        return config_arg, True
    if env.get("SHEPHERD_CONFIG"):
        return env["SHEPHERD_CONFIG"], True
    if kubeconfig_arg:
        return kubeconfig_arg, True
    if env.get("KUBECONFIG", "").strip():
        # kubectl merges a list; sheepctl takes its first file
        return env["KUBECONFIG"].split(os.pathsep)[0], True
    path = os.path.expanduser(home_config)
    if os.path.exists(path):
        return path, False
    return None, False


def resolve(server_arg=None, config_arg=None, namespace_arg=None, env=None,
            home_config=DEFAULT_CONFIG, token_arg=None, kubeconfig_arg=None, ca_arg=None):
    """-> Settings, or ConfigError."""
    env = os.environ if env is None else env
    path, _explicit = config_file_candidate(config_arg, env, home_config, kubeconfig_arg)
    data, data_error = {}, None
    if path:
        try:
            data = read_config(path)
        except ConfigError as exc:
            data_error = exc

    if server_arg:
        servers, source = _normalize(server_arg, "--server"), "--server"
    elif env.get("SHEPHERD_SERVERS", "").strip():
        servers, source = _normalize(env["SHEPHERD_SERVERS"], "$SHEPHERD_SERVERS"), "$SHEPHERD_SERVERS"
    elif path:
        if data_error is not None:
            raise data_error
        servers, source = _servers_of(data, path), path
    else:
        raise ConfigError(NO_SERVERS)

    namespace = namespace_arg or (data.get("namespace") if isinstance(data.get("namespace"), str)
                                  else None) or "default"
    token = token_arg or env.get("SHEPHERD_TOKEN", "").strip() or None
    if token is None and "token" in data and source == path:
        if not isinstance(data["token"], str) or not data["token"].strip():
            raise ConfigError("config file %s: `token` must be a non-empty string (quote it if it is all "
                              "digits)" % path)
        token = data["token"].strip()
    ca_file = ca_arg or data.get("ca_file")
    if ca_file and not os.path.exists(ca_file):
        raise ConfigError("the cluster CA %s does not exist (%s)" % (
            ca_file, "--certificate-authority" if ca_arg else "certificate-authority of %s" % path))
    cluster_id = data.get("cluster_id") if source == path and isinstance(data.get("cluster_id"), str) else None
    return Settings(servers=servers, namespace=namespace, source=source, config_path=path,
                    config=data, token=token, ca_file=ca_file, client_cert=data.get("client_cert"),
                    cluster_id=cluster_id)


def resolve_namespace(config_arg=None, namespace_arg=None, env=None, home_config=DEFAULT_CONFIG,
                      kubeconfig_arg=None):
    """The namespace alone (never fails: a bad config file means "default")."""
    if namespace_arg:
        return namespace_arg
    path, _ = config_file_candidate(config_arg, env, home_config, kubeconfig_arg)
    if path:
        try:
            ns = read_config(path).get("namespace")
            if isinstance(ns, str) and ns:
                return ns
        except ConfigError:
            pass
    return "default"


def _normalize(value, what):
    try:
        return normalize_servers(value)
    except ValueError:
        raise ConfigError("%s: no server URLs given" % what) from None
