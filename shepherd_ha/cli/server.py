"""`shepherd-ha server`: run one control-plane replica until SIGTERM/SIGINT."""
import logging
import os
import signal
import socket
import sys
import threading
import time

from shepherd_ha import cluster_identity, config
from shepherd_ha.api import auth, http_server
from shepherd_ha.api.app import MAX_BODY_BYTES, create_app
from shepherd_ha.api.flow_control import SPARE_THREADS, FlowControl
from shepherd_ha.api.metrics import ConnectionCollector, ThreadCollector
from shepherd_ha.api.replica_credentials import ReplicaCredentials
from shepherd_ha.api.thread_budget import ThreadBudget
from shepherd_ha.controllers.events import EventBudgets
from shepherd_ha.controllers.manager import ControllerManager
from shepherd_ha.controllers.registry import default_factories
from shepherd_ha.controllers.settings import ControllerSettings
from shepherd_ha.controllers.write_pacing import WritePacer
from shepherd_ha.options import ConfigError
from shepherd_ha.store import data_at_rest, gc_tuning, malloc_arenas
from shepherd_ha.store.encryption_at_rest import KeyFileError, SecretCipher
from shepherd_ha.store.remote_replica import RemoteReplica
from shepherd_ha.store.replica import Replica
from shepherd_ha.store.store_service import StoreService
from shepherd_ha.tls import serving
from shepherd_ha.tls.server_options import server_tls

from . import join, open_files, supervisor

log = logging.getLogger("shepherd_ha.server")



def add_parser(subparsers):
    parser = subparsers.add_parser("server", help="run one control-plane replica",
                                   description="Run one control-plane replica: a Raft member and the HTTP API.")
    config.add_arguments(parser, config.SERVER_OPTIONS)
    parser.set_defaults(func=run)


def _benign_truncation_filter(record):
    """PySyncObj logs CRITICAL whenever a follower drops and re-adds log entries it
    already applied. With pipelined appends (appendEntriesUseBatch=False) the leader
    re-sends ranges the follower already holds, with the same term, so the entries
    are identical and nothing diverged; divergence is checked by comparing store
    digests across replicas instead (tests/chaos). Keep it visible at DEBUG."""
    if record.getMessage().startswith("truncating already-applied log entries"):
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger("pysyncobj.syncobj").isEnabledFor(logging.DEBUG)
    return True


# Connection limits, idle timeout and body size: api/http_server.py (serve).
WAITRESS_OPTIONS = dict(ident="shepherd-ha", clear_untrusted_proxy_headers=True,
                        # lets a stream notice that its client left (pod logs -f on a quiet container)
                        channel_request_lookahead=1, _quiet=True)


LEGACY_THREADS = 48     # when a flow-control limit is off, nothing sizes the thread pool


def api_threads(values, flow):
    """Waitress threads: enough that every request flow control lets in, queues or
    refuses has a thread; a request left in waitress's own queue would wait there
    unclassified, a lease renewal behind a 30,000-pod list."""
    needed = flow.threads_needed()
    asked = values["api_threads"]
    if asked < 0:
        raise ConfigError("--api-threads must be 0 (as many as flow control needs) or more")
    if not asked:
        return needed or LEGACY_THREADS
    if needed and asked < needed:
        raise ConfigError("--api-threads %d is fewer than flow control needs (%d: one per seat and per queued "
                          "request, one per watch, %d spare); use 0, or lower --max-requests-inflight or "
                          "--max-watches" % (asked, needed, SPARE_THREADS))
    return asked


def _can_bind(host, port):
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
            return True
        except OSError:
            return False


def run(args):
    try:
        values = config.resolve(args, config.SERVER_OPTIONS)
        settings, peers, host, port, api_url = config.server_settings(values)
        tls = server_tls(values)
        # scrypt: once, before the fork (and before --join, which shows the peer token)
        credentials = ReplicaCredentials(settings.password, settings.salt, settings.accepted_passwords)
        if values.get("join"):
            peers, settings.joining = join.peers_to_join(values, settings, credentials.peer_token, tls.outbound)
            settings.peer_addresses = [p.raft for p in peers]
        controller_settings = ControllerSettings.from_values(values)
        tokens = (auth.load_token_file(values["token_file"], credentials.accepted_peer_tokens)
                  if values["token_file"] else None)
        _secrets_cipher(values)         # a bad key file stops the server here, with its line
        flow = FlowControl.from_values(values, values["id"])
        threads = api_threads(values, flow)
        if values["api_workers"] < 1:
            raise ConfigError("--api-workers must be 1 or more")
        connection_limits = _connection_limits(values)
    except ConfigError as exc:
        print("shepherd-ha server: %s" % exc, file=sys.stderr)
        return 2
    logging.basicConfig(level=values["log_level"].upper(), format=_log_format(values["id"], "server"))
    logging.getLogger("pysyncobj.syncobj").addFilter(_benign_truncation_filter)
    try:
        settings.cluster_id = cluster_identity.resolve_replica_id(settings.data_dir, values["cluster_id"],
                                                                  settings.password)
    except (cluster_identity.IdentityError, OSError) as exc:
        print("shepherd-ha server: %s" % exc, file=sys.stderr)
        return 2

    def child_main(role, worker, socket_path):
        if role == "store":
            _log_as(values["id"], "store")
            return run_store(values, settings, peers, api_url, socket_path)
        if role == "tls":
            _log_as(values["id"], "tls-%d" % worker)
            return serving.run_terminator(tls.files, host, port, serving.backend_path(socket_path, worker),
                                          connection_limits)
        _log_as(values["id"], "api-%d" % worker)
        return run_api_worker(values, settings, peers, host, port, api_url, controller_settings, tokens, flow,
                              threads, worker, socket_path, connection_limits, credentials, tls)

    soft, _ = open_files.raise_open_file_limit()
    wanted = open_files.open_files_wanted(values["max_connections"], bool(tls.files))
    if soft < wanted:
        log.warning("open-file limit %d: a replica serving many nodes needs more (%d with --max-connections %d%s; "
                    "raise `ulimit -Hn` to %d or more, or LimitNOFILE in its systemd unit)", soft, wanted,
                    values["max_connections"], " and TLS" if tls.files else "", wanted)
    if not _wait_bindable(host, port):
        print("shepherd-ha server: cannot bind the API address %s:%d (is another process using the port?)"
              % (host, port), file=sys.stderr)
        return 2
    log.info("replica %s of cluster %s: Raft %s, API %s (%d worker process%s), peers %s, data %s", values["id"],
             settings.cluster_id,
             settings.self_address, api_url, values["api_workers"], "" if values["api_workers"] == 1 else "es",
             ", ".join("%s@%s" % (p.id, p.raft) for p in peers) or "none", settings.data_dir)
    code = supervisor.Supervisor(child_main, values["api_workers"], settings.data_dir, tls=bool(tls.files)).run()
    logging.shutdown()
    return code


def _log_format(replica_id, role):
    return "%(asctime)s %(levelname)s " + replica_id + "/" + role + " %(name)s: %(message)s"


def _log_as(replica_id, role):
    """In a forked child: its role in every line it logs."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter(_log_format(replica_id, role)))


def _wait_bindable(host, port, timeout=5.0):
    """A SIGKILLed replica's children die with it, a moment after: give the port that moment."""
    deadline = time.monotonic() + timeout
    while not _can_bind(host, port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


# The store's other threads (the local socket, the change stream) hand the GIL back to the
# Raft tick thread within 1 ms instead of CPython's 5 ms: the tick gives it up at every
# send, poll and journal sync, and waited up to a switch interval each time it took it back.
STORE_SWITCH_INTERVAL = 0.001


def run_store(values, settings, peers, api_url, socket_path):
    """The store process: Raft + FSM + group commit, served on the local socket."""
    malloc_arenas.use_one_arena()       # before any thread of the store starts
    data_at_rest.private_files()        # the journal, the dump and their temporary files: 0600
    holder = []
    replica = Replica(values["id"], settings, peers, api_url=api_url, write_timeout=values["write_timeout"],
                      watch_log_size=values["watch_log_size"], previous_in_log=False,
                      on_leadership=lambda leader: holder and holder[0].leadership_changed(leader))
    try:
        replica.node.wait_bound()
    except ConfigError as exc:
        print("shepherd-ha server: %s" % exc, file=sys.stderr)
        replica.close()
        return 2
    service = StoreService(replica, socket_path)
    holder.append(service)
    service.leadership_changed()
    stopping = threading.Event()

    def stop(signum, frame):
        if stopping.is_set():
            return
        stopping.set()
        log.info("signal %d: stopping the store", signum)
        service.close()
        replica.node.syncobj.destroy()
        deadline = time.monotonic() + 5
        while replica.node.syncobj.tick_thread_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        logging.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    gc_tuning.configure_process()
    sys.setswitchinterval(STORE_SWITCH_INTERVAL)
    service.start()
    log.info("store serving %s", socket_path)
    while True:
        signal.pause()


def _secrets_cipher(values):
    try:
        return SecretCipher.from_file(values.get("encryption_key_file"))
    except KeyFileError as exc:
        raise ConfigError(str(exc))


def _connection_limits(values):
    for key in ("max_connections", "max_connections_per_address"):
        if values[key] < 0:
            raise ConfigError("--%s must be 0 (no limit) or more" % key.replace("_", "-"))
    if values["idle_connection_timeout"] <= 0:
        raise ConfigError("--idle-connection-timeout must be more than 0 seconds")
    return http_server.Limits(values["max_connections"], values["max_connections_per_address"])


def run_api_worker(values, settings, peers, host, port, api_url, controller_settings, tokens, flow, threads,
                   worker, socket_path, connection_limits, credentials, tls):
    """An API worker: waitress + Flask over the store process; worker 0 runs the controllers."""

    def stop(signum, frame):
        logging.shutdown()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    replica = RemoteReplica(values["id"], socket_path, peers, api_url=api_url,
                            write_timeout=values["write_timeout"], watch_log_size=values["watch_log_size"])
    replica.cluster_id = settings.cluster_id
    gc_tuning.configure_process(freeze_periodically=False)    # its requests leave cycles (gc_tuning.py)
    if worker == 0:
        # Controller writes yield to node heartbeats while renewals wait or are late (write_pacing.py).
        pacer = WritePacer(flow.system_pressure)
        # Events are best effort and rate limited (controllers/events.py, EventBudget).
        events = EventBudgets(controller_settings.event_qps, controller_settings.event_burst)
        manager = ControllerManager(replica, default_factories(controller_settings, events), pacer=pacer,
                                    event_budgets=events)
        replica._on_leadership = manager.leadership_changed
        replica.controller_status = manager.status
    replica.start()
    app = create_app(replica, tokens, credentials.peer_token if tokens is not None else None, flow,
                     secrets_cipher=_secrets_cipher(values), log_grants=credentials, outbound=tls.outbound)
    budget = ThreadBudget.of(flow) if not values["api_threads"] else None
    if worker == 0:
        log.info("flow control: %s; API threads per worker: %s", flow.describe(),
                 "%d, growing with watches up to %d" % (budget.threads, budget.ceiling) if budget else threads)
        if tokens is None:
            log.warning("no --token-file: the API at %s answers anyone who can reach it", api_url)
        log.info("API over %s; peers and agents over %s", "TLS" if tls.files else "plain HTTP (--insecure-http)",
                 tls.outbound.describe())
    app.extensions["shepherd_metrics"].registry.register(ConnectionCollector(connection_limits))
    gate = auth.body_gate(tokens) if tokens is not None else None
    if tls.files:
        # waitress on a private Unix socket; this worker's terminator process holds the port
        # (shepherd_ha/tls/serving.py); the limits count the TLS clients' own addresses
        where = dict(unix_socket=serving.backend_path(socket_path, worker), unix_socket_perms="600",
                     url_scheme="https", fix_addr=serving.client_address)
    elif values["api_workers"] > 1:
        where = dict(sockets=[supervisor.reuse_port_socket(host, port)])
    else:
        where = dict(host=host, port=port)
    if budget is not None:
        app.extensions["shepherd_metrics"].registry.register(ThreadCollector(budget))
    http_server.serve(app, connection_limits, MAX_BODY_BYTES, gate, idle_timeout=values["idle_connection_timeout"],
                      threads=budget.threads if budget else threads,
                      on_dispatcher=(lambda d: budget.attach(d, flow)) if budget else None, **where, **WAITRESS_OPTIONS)
    return 0
