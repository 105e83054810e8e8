"""sheepctl cluster snapshot save FILE: a checked snapshot of every object, from any replica.

The replica streams it (GET /shepherd/v1/snapshot, shepherd_ha/snapshot_file.py); it is
written to FILE.partial while each line is checked, and renamed to FILE only once the
checksum line matched: a broken transfer never leaves a FILE that looks whole.
"""
import os
import time

from shepherd_ha import snapshot_file

from ..context import UserError

PATH = "/shepherd/v1/snapshot"
PROGRESS_EVERY = 0.5         # seconds between progress lines


def register(csub, common):
    snap = csub.add_parser("snapshot", parents=[common], help="back up every object (restore: shepherd-ha restore)")
    ssub = snap.add_subparsers(dest="snapshot_command", metavar="ACTION")
    save = ssub.add_parser("save", parents=[common],
                           help="write a consistent snapshot at one revision, with a sha256, to FILE")
    save.add_argument("file", help="where to write it (refused if it exists)")
    save.add_argument("--force", action="store_true", help="replace FILE if it exists")
    save.set_defaults(func=run_save)
    snap.set_defaults(func=lambda args, ctx: snap.print_help() or 2)


def _lines(response, size=64 * 1024):
    """The body's lines, each with its newline (the last one may lack it: truncated)."""
    rest = b""
    for chunk in response.iter_content(size):
        rest += chunk
        *whole, rest = rest.split(b"\n")
        for line in whole:
            yield line + b"\n"
    if rest:
        yield rest


def run_save(args, ctx):
    target = args.file
    if os.path.exists(target) and not args.force:
        raise UserError("%s exists: pick another file or pass --force" % target)
    partial = target + ".partial"
    response = ctx.client.request("GET", PATH, stream=True, timeout=60.0)
    total = response.headers.get("Shepherd-Snapshot-Objects", "?")
    reader = snapshot_file.Reader("the snapshot from %s" % ctx.client.last_server, keep_objects=False)
    shown = 0.0
    try:
        with open(partial, "wb") as out:
            for line in _lines(response):
                reader.feed(line)
                out.write(line)
                now = time.monotonic()
                if now - shown >= PROGRESS_EVERY:
                    shown = now
                    ctx.error("  ... %d/%s objects" % (reader.count, total))
            reader.finish()
            out.flush()
            os.fsync(out.fileno())
        os.replace(partial, target)
    except (snapshot_file.SnapshotError, OSError) as exc:
        _remove(partial)
        raise UserError("snapshot not saved: %s" % exc) from None
    except BaseException:
        _remove(partial)
        raise
    finally:
        response.close()
    header = reader.header
    ctx.print("saved %s: cluster %s, revision %d, %d objects (%s), sha256 %s, from %s"
              % (target, header["clusterId"], header["revision"], header["objects"],
                 ", ".join("%s %d" % kv for kv in sorted(header.get("resources", {}).items())) or "none",
                 reader.trailer["sha256"], header.get("replica")))
    return 0


def _remove(path):
    try:
        os.remove(path)
    except OSError:
        pass
