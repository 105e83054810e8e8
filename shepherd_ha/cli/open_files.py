"""The open-file limit a server needs: every API connection, watch and journal is a
file descriptor, and a shell's soft limit is often 1,024, far below what 1,000 nodes
open. Raised to the hard limit at start, as etcd (Go) does."""
import resource

# A replica warns at start below what its busiest process may hold at the connection
# bound (open_files_wanted), and never below this.
OPEN_FILES_WANTED = 8192
HEADROOM = 256          # listeners, the store's socket, journal, logs, outbound connections


def open_files_wanted(max_connections, tls):
    """Descriptors one process of a replica may hold with `max_connections` open (0: no
    bound, the floor): a TLS terminator two per connection (the client's socket and its
    Unix socket to waitress) and up to 64 connections past the bound, waitress one."""
    if not max_connections:
        return OPEN_FILES_WANTED
    return max(OPEN_FILES_WANTED, (2 if tls else 1) * (max_connections + 64) + HEADROOM)


def raise_open_file_limit():
    """Raise RLIMIT_NOFILE's soft limit to its hard limit; returns the (soft, hard) in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):      # an unlimited hard limit some kernels refuse: keep the soft one
            pass
    return soft, hard
