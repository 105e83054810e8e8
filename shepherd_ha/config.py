"""Settings of `shepherd-ha server`: command line > SHEPHERD_* environment > YAML file > default.

One table describes every option, so --help, the environment and the file agree.
A default that a settings class also holds is read from that class (RAFT, CONTROLLERS,
the replica's constants), never written twice.
"""
import dataclasses

from shepherd_ha import options as options_module
from shepherd_ha.api import flow_control, http_server
from shepherd_ha.api.flow_control import FlowControl
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.options import ConfigError, Option, read_secret_file  # noqa: F401  (ConfigError: for callers)
from shepherd_ha.store import raft_secrets
from shepherd_ha.store.raft_node import RaftSettings
from shepherd_ha.store.replica import WRITE_TIMEOUT, Peer
from shepherd_ha.store.watch_log import WatchLog
from shepherd_ha.tls.server_options import TLS_OPTIONS


def field_defaults(settings_class):
    """{field name: default} of a settings dataclass (fields with a default only)."""
    return {f.name: f.default for f in dataclasses.fields(settings_class)
            if f.default is not dataclasses.MISSING}


def fields_from(values, settings_class):
    """The resolved values that are fields of settings_class, by name."""
    return {f.name: values[f.name] for f in dataclasses.fields(settings_class) if f.name in values}


RAFT = field_defaults(RaftSettings)
CONTROLLERS = field_defaults(ControllerSettings)


CONFIG_ENV = "SHEPHERD_SERVER_CONFIG"

SERVER_OPTIONS = (
    Option("id", str, None, "this replica's id, unique in the cluster (e.g. r1)"),
    Option("raft_address", str, None, "host:port where this replica's Raft peers reach it; also its bind "
           "address unless --raft-bind is given"),
    Option("raft_bind", str, None, "host:port to bind Raft on when it differs from --raft-address (NAT)"),
    Option("peers", str, "", "the other replicas: ID@RAFT_HOST:PORT/API_HOST:PORT, comma-separated, "
           "e.g. r2@10.0.0.2:7000/10.0.0.2:8000 (the API part feeds the cluster view)"),
    Option("join", str, None, "API URLs of existing replicas, comma-separated: start with the cluster's current "
           "members as peers (instead of --peers) and wait to be added (sheepctl cluster add-replica)"),
    Option("api_bind", str, "127.0.0.1:8001", "host:port the HTTP API listens on"),
    Option("api_url", str, None, "URL other replicas and clients use for this API (default https://API_BIND, "
           "http:// with --insecure-http)"),
    Option("data_dir", str, None, "directory for the Raft journal and snapshots (kept across restarts)"),
    Option("raft_password", str, None, "shared secret encrypting Raft traffic; required (also "
           "--raft-password-file)"),
    Option("raft_password_file", str, None, "file holding the Raft password"),
    Option("raft_accepted_password_file", str, None, "file of further Raft passwords (one per line) this replica "
           "accepts from its peers, but never sends with, while the Raft secret is rotated (docs/security.md)"),
    Option("raft_salt", str, None, "the cluster's random salt for the Raft key derivations, hex, 16 bytes or more, "
           "the same on every replica (not secret; `shepherd-ha local up` and the Vagrant provisioning "
           "write one); required"),
    Option("cluster_id", str, RAFT["cluster_id"], "the cluster this replica belongs to (32 hex digits, made by `shepherd-ha "
           "local up` or the provisioning); kept in DATA_DIR/cluster-id, which must agree; unset, a new data dir "
           "takes one derived from the Raft password"),
    Option("token_file", str, None, "require bearer tokens on the API: a file of lines token,user,uid,"
           "\"groups\", re-read when it changes (who may do what: docs/security.md); "
           "unset, anyone who reaches the API may do anything"),
    Option("encryption_key_file", str, None, "encrypt Secrets at rest (journal, dump, snapshots) with AES-GCM: a "
           "file of lines NAME:BASE64 (32-byte keys); the first encrypts, all decrypt; the same file on every replica"),
    Option("heartbeat", float, RAFT["heartbeat"], "seconds between leader heartbeats"),
    Option("election_timeout_min", float, RAFT["election_timeout_min"], "lower bound of the random election "
           "timeout (s); must exceed 3 x heartbeat"),
    Option("election_timeout_max", float, RAFT["election_timeout_max"], "upper bound of the random election "
           "timeout (s)"),
    Option("leader_fallback", float, RAFT["leader_fallback"], "a leader that hears from no majority for this long "
           "steps down (s)"),
    Option("log_compaction_entries", int, RAFT["log_compaction_entries"], "snapshot the store and trim the Raft "
           "log after this many entries (also every %d minutes)" % (RAFT["log_compaction_seconds"] // 60)),
    Option("log_compaction_bytes", int, RAFT["log_compaction_bytes"], "also snapshot the store and trim the Raft "
           "log once the log holds this many bytes (it is held in memory until then)"),
    Option("write_timeout", float, WRITE_TIMEOUT, "seconds a write or linearizable read may wait for Raft before "
           "503"),
    Option("watch_log_size", int, WatchLog.CAPACITY, "changes kept in memory for watches to resume from"),
    Option("api_workers", int, 1, "API worker processes sharing the API port (SO_REUSEPORT), each with its own "
           "copy of the store; the controllers run in the first one"),
    Option("api_threads", int, 0, "HTTP worker threads (each open watch holds one); 0: those the flow control "
           "limits below need besides watches (%d with their defaults) and more as watches open, up to %d; N: "
           "exactly N, which must be at least that most (one per seat, queued request and watch slot)"
           % (FlowControl().threads_without_watches(), FlowControl().threads_needed())),
    Option("node_grace_period", float, CONTROLLERS["node_grace_period"], "a node whose lease has not changed and "
           "which posted no status for this long becomes NotReady (s); at least 2 x --node-lease-interval"),
    Option("pod_eviction_timeout", float, CONTROLLERS["pod_eviction_timeout"], "pods of a node NotReady this much "
           "longer are deleted so their owners recreate them elsewhere (s)"),
    Option("node_eviction_rate", float, CONTROLLERS["node_eviction_rate"], "nodes per second whose pods may "
           "start being evicted while their zone (label topology.kubernetes.io/zone) is healthy; 0: none"),
    Option("secondary_node_eviction_rate", float, CONTROLLERS["secondary_node_eviction_rate"], "the same while "
           "the zone is partially disrupted (see --unhealthy-zone-threshold); zones of at most "
           "--large-cluster-size-threshold nodes then evict none"),
    Option("unhealthy_zone_threshold", float, CONTROLLERS["unhealthy_zone_threshold"], "share of a zone's nodes "
           "NotReady (more than 2) that makes it partially disrupted; with none Ready in any zone nothing is "
           "evicted"),
    Option("large_cluster_size_threshold", int, CONTROLLERS["large_cluster_size_threshold"], "zones of more "
           "nodes than this keep evicting at --secondary-node-eviction-rate while partially disrupted"),
    Option("node_lease_interval", float, CONTROLLERS["node_lease_interval"], "how often agents renew their node "
           "lease (s); checked against the grace period"),
    Option("orphan_pod_grace", float, CONTROLLERS["orphan_pod_grace"], "pods bound to a node that does not exist "
           "are deleted once it has been missing this long (s): a deleted node whose agent registers it again "
           "keeps its pods"),
    Option("pod_batch_period", float, CONTROLLERS["pod_batch_period"], "Deployments and ReplicaSets react to "
           "their pods' changes at most this long after the first one, each burst in one pass (s); 0: at once"),
    Option("event_ttl", float, CONTROLLERS["event_ttl"], "events older than this are deleted (s)"),
    Option("event_max", int, CONTROLLERS["event_max"], "at most this many events are kept; the oldest go first"),
    Option("event_qps", float, CONTROLLERS["event_qps"], "events the controllers write per second at most; "
           "more are dropped and counted (shepherd_controller_events_dropped_total)"),
    Option("event_burst", int, CONTROLLERS["event_burst"], "events the controllers may write at once, "
           "beyond --event-qps"),
    Option("service_cidr", str, CONTROLLERS["service_cidr"], "IPv4 range Services' cluster IPs are allocated "
           "from (the leader sets it in the store; give every replica the same one, and the agents too)"),
    Option("log_level", str, "INFO", "DEBUG, INFO, WARNING or ERROR"),
) + (
    # ---- the pod network: the FSM gives every node one block (store/pod_cidrs.py) ----
    Option("cluster_cidr", str, CONTROLLERS["cluster_cidr"], "the pods' addresses, one block per node in "
           "spec.podCIDR; fixed once the cluster has started (agents take the same --cluster-cidr)"),
    Option("node_cidr_mask_size", int, CONTROLLERS["node_cidr_mask_size"], "prefix length of each node's block "
           "of --cluster-cidr"),
) + (
    # ---- flow control: overload gets 429 + Retry-After, by priority (api/flow_control.py) ----
    Option("max_requests_inflight", int, flow_control.MAX_INFLIGHT, "requests worked on at once, shared by priority levels (system: "
           "leases, node status, agents' watches; status: replica status, metrics, version; workload; bulk: "
           "unselected lists of large collections; late: renewals of late node leases while system is busy); beyond "
           "a level's share a request waits up to --request-queue-wait, then gets 429; 0: no limit"),
    Option("max_watches", int, flow_control.MAX_WATCHES, "watches and followed logs open at once (3/4 for agents' watches); beyond, "
           "429; 0: no limit"),
    Option("request_queue_wait", float, flow_control.QUEUE_WAIT, "seconds a request may wait for a seat at its priority level "
           "before 429 Too Many Requests"),
) + (
    # ---- connection and watch limits (api/http_server.py, api/flow_control.py; docs/security.md) ----
    Option("max_connections", int, http_server.MAX_CONNECTIONS, "open API connections per worker process; at the "
           "limit the longest-idle one is closed for a new one (none idle: 503); 0: no limit"),
    Option("max_connections_per_address", int, http_server.MAX_CONNECTIONS_PER_ADDRESS, "open API connections "
           "from one client address per worker process; beyond, 429 and close; 0: no limit"),
    Option("idle_connection_timeout", float, http_server.IDLE_TIMEOUT, "an API connection with no request for "
           "this long is closed (s)"),
    Option("max_watches_per_user", int, flow_control.MAX_WATCHES_PER_USER, "watches and followed logs one user "
           "(without --token-file: one client address) may hold open, outside agents' watches; beyond, 429; "
           "0: no limit"),
) + TLS_OPTIONS      # ---- TLS on the API (shepherd_ha/tls/server_options.py) ----


def add_arguments(parser, options):
    options_module.add_arguments(parser, options, CONFIG_ENV)


def resolve(args, options, environ=None):
    return options_module.resolve(args, options, CONFIG_ENV, environ)


def parse_peers(text, scheme="http"):
    """'r2@h:7002/h:8002,r3@h:7003' -> [Peer]; an API address without a scheme gets `scheme`."""
    peers = []
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        ident, at, rest = part.partition("@")
        raft, _, api = rest.partition("/")
        if not at or not ident or not raft:
            raise ConfigError("peer %r is not ID@RAFT_HOST:PORT[/API_HOST:PORT]" % part)
        if api and not api.startswith("http"):
            api = scheme + "://" + api
        peers.append(Peer(ident, raft, api or None))
    ids = [p.id for p in peers]
    if len(set(ids)) != len(ids):
        raise ConfigError("peer ids must be unique: %s" % ", ".join(ids))
    return peers


def server_settings(values):
    """(RaftSettings, peers, api host, api port, api url) from resolved values."""
    for required in ("id", "raft_address", "data_dir"):
        if not values.get(required):
            raise ConfigError("--%s is required (or %s)" % (required.replace("_", "-"),
                                                            "SHEPHERD_" + required.upper()))
    password = values.get("raft_password")
    source = "--raft-password"
    if not password and values.get("raft_password_file"):
        password = read_secret_file(values["raft_password_file"], "--raft-password-file")
        source = "--raft-password-file %s" % values["raft_password_file"]
    if password:
        raft_secrets.check_password(password, source)
    accepted = ()
    if values.get("raft_accepted_password_file"):
        flag = "--raft-accepted-password-file %s" % values["raft_accepted_password_file"]
        accepted = tuple(line.strip() for line in read_secret_file(values["raft_accepted_password_file"],
                                                                   "--raft-accepted-password-file").splitlines()
                         if line.strip())
        for other in accepted:
            raft_secrets.check_password(other, flag)
    scheme = "http" if values.get("insecure_http") else "https"
    peers = parse_peers(values.get("peers"), scheme)
    if values["id"] in {p.id for p in peers}:
        raise ConfigError("--peers lists this replica's own id %s; list only the others" % values["id"])
    # data_dir and the timings share their names with RaftSettings' fields.
    settings = RaftSettings(
        self_address=values["raft_address"], peer_addresses=[p.raft for p in peers], password=password,
        salt=values.get("raft_salt"), accepted_passwords=accepted,
        bind_address=values.get("raft_bind"), **fields_from(values, RaftSettings))
    settings.validate()
    host, _, port = values["api_bind"].rpartition(":")
    if not host or not (port.isascii() and port.isdigit()):
        raise ConfigError("--api-bind %r is not host:port" % values["api_bind"])
    api_url = values.get("api_url") or "%s://%s:%s" % (scheme, host, port)
    if values["write_timeout"] <= 0:
        raise ConfigError("--write-timeout must be positive")
    return settings, peers, host, int(port), api_url
