"""The open-file limit a server needs: every API connection, watch and journal is a
file descriptor, and a shell's soft limit is often 1,024, far below what 1,000 nodes
open. Raised to the hard limit at start, as etcd (Go) does."""
import resource

# Below this a replica warns at start: ~2 connections per node (a watch, a request),
# the fleet of a failed replica moving over, plus headroom.
OPEN_FILES_WANTED = 8192


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
