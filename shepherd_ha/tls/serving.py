"""A WSGI app over TLS: waitress on a private Unix socket, the TLS terminator on the
public port in front of it (why: shepherd_ha/tls/terminator.py, docs/security.md).

A replica runs the terminator as a process of its own beside each API worker
(run_terminator, serve_backend: the supervisor forks both); the agent's small log
server runs both in one process (create_tls_server)."""
import logging
import os
import signal

log = logging.getLogger(__name__)

TERMINATOR_SLACK = 64       # connections beyond waitress's total: answered (429/503) or an idle one closed

from .contexts import server_context
from .terminator import TlsTerminator, listening_socket, peer_from_name


def backend_path(store_socket_path, worker):
    """An API worker's Unix socket: beside the store's, in the replica's 0700 run directory."""
    return os.path.join(os.path.dirname(store_socket_path), "api-%d.sock" % worker)


def _backend_server(app, backend, waitress_options):
    """waitress on a Unix socket whose clients' addresses are the TLS clients' (REMOTE_ADDR,
    REMOTE_PORT), as the terminator names its end of each connection."""
    import waitress
    options = {k: v for k, v in waitress_options.items() if k != "_quiet"}     # serve()'s only
    server = waitress.create_server(app, unix_socket=backend, unix_socket_perms="600", url_scheme="https",
                                    **options)
    server.fix_addr = client_address
    return server


def client_address(addr):
    """The TLS client's (host, port) of a backend connection, as the terminator named it."""
    return peer_from_name(addr) or ("localhost", None)


def create_tls_server(app, files, host, port, backend, reuse_port=False, **waitress_options):
    """(waitress server on `backend`, started terminator on host:port). Run the server's
    .run() to serve; port 0 picks a free one (terminator.port)."""
    server = _backend_server(app, backend, waitress_options)
    terminator = TlsTerminator(server_context(files), listening_socket(host, port, reuse_port=reuse_port),
                               backend, max_connections=waitress_options.get("connection_limit", 1000),
                               name="tls:%d" % port)
    return server, terminator.start()


def serve_backend(app, backend, **waitress_options):
    """An API worker behind TLS: waitress on its Unix socket (0600), until the process ends."""
    _backend_server(app, backend, waitress_options).run()


def run_terminator(files, host, port, backend, limits):
    """The terminator process of one API worker: the public port (SO_REUSEPORT, shared with
    the other workers' terminators), piped to that worker's Unix socket. `limits`: the
    worker's api/http_server.Limits, which waitress applies per TLS client address; the
    terminator holds a little more in all (so that waitress, at its total, closes the
    longest-idle connection for a new one) and as many handshakes per address."""
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
    total = (limits.total or 10 ** 6) + TERMINATOR_SLACK
    terminator = TlsTerminator(server_context(files), listening_socket(host, port, reuse_port=True), backend,
                               max_connections=total, max_handshakes_per_address=limits.per_address or None,
                               name="tls:%d" % port)
    log.info("TLS on %s:%d in front of %s", host, port, backend)
    terminator.serve_forever()
    return 0
