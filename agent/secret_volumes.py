"""Secret volumes live in memory: a tmpfs mounted on the volume's directory under
the agent's state dir (`<state-dir>/pods/<uid>/volumes/<name>`), bind-mounted into
the containers like any pod volume, so a Secret's files never reach the node's disk.

Mounting needs root (CAP_SYS_ADMIN), as the kubelet does; without it the container
waits with CreateContainerConfigError rather than falling back to a disk directory.
`unmount_under(dir)` unmounts every mount below a pod's directory before it is
removed (rmtree would otherwise empty the tmpfs and leave it mounted).
"""
import base64
import ctypes
import ctypes.util
import os

MS_NOSUID, MS_NODEV, MS_NOEXEC = 2, 4, 8
MNT_DETACH = 2
TMPFS_BYTES = 4 * 1024 * 1024        # a Secret holds at most 1 MiB; room for the atomic rewrites

_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _libc


def mount_tmpfs(path, size=TMPFS_BYTES):
    """Mount a fresh tmpfs on `path` (made if missing) unless one is there already.
    OSError when it cannot (not root)."""
    os.makedirs(path, mode=0o755, exist_ok=True)
    if os.path.ismount(path):
        return
    options = ("mode=0755,size=%d" % size).encode()
    if _c().mount(b"tmpfs", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, options) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "cannot mount a tmpfs for a secret volume on %s: %s (the agent needs root)"
                      % (path, os.strerror(err)))


def mounts_under(directory):
    """Mount points strictly below `directory`, deepest first (from /proc/self/mountinfo)."""
    prefix = os.path.join(os.path.realpath(directory), "")
    found = []
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                fields = line.split()
                if len(fields) > 4:
                    point = fields[4].encode().decode("unicode_escape")     # \040 for spaces
                    if point.startswith(prefix):
                        found.append(point)
    except OSError:
        return []
    return sorted(found, key=len, reverse=True)


def unmount_under(directory):
    """Unmount (lazily) every mount below `directory`; returns how many."""
    count = 0
    for point in mounts_under(directory):
        if _c().umount2(os.fsencode(point), MNT_DETACH) == 0:
            count += 1
    return count


def secret_text(secret):
    """{key: str} of a Secret's base64 data, for env vars (undecodable values skipped)."""
    out = {}
    for key, value in ((secret or {}).get("data") or {}).items():
        try:
            out[key] = base64.b64decode(value).decode("utf-8", errors="replace")
        except (ValueError, TypeError):
            continue
    return out


def secret_files(volume, secret, missing):
    """({relative path: bytes}, {relative path: mode}) of a secret volume holding `secret`
    (None when there is none). `missing(message)` builds the exception to raise."""
    src = volume["secret"]
    default_mode = src.get("defaultMode") if isinstance(src.get("defaultMode"), int) else 0o644
    if secret is None:
        if src.get("optional"):
            return {}, {}
        raise missing('secret "%s" not found (volume %s): create it, or mark the volume optional: true'
                      % (src.get("secretName"), volume.get("name")))
    content = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            content[key] = base64.b64decode(value)
        except (ValueError, TypeError):
            continue
    items = src.get("items")
    if not items:
        return content, {k: default_mode for k in content}
    files, modes = {}, {}
    for item in items:
        key = item.get("key")
        if key not in content:
            if src.get("optional"):
                continue
            raise missing('key "%s" not found in secret "%s" (volume %s items): add the key, or fix items[].key'
                          % (key, src.get("secretName"), volume.get("name")))
        path = item.get("path") or key
        files[path] = content[key]
        modes[path] = item["mode"] if isinstance(item.get("mode"), int) else default_mode
    return files, modes
