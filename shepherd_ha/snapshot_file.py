"""The snapshot file: every object of a cluster at one revision, checked end to end.

    {"format": "shepherd-ha-snapshot", "version": 1, "clusterId": ..., "revision": R,
     "objects": N, "resources": {plural: count}, "epoch": [term, replica], "createdAt": ...}
    {"resource": "pods", "object": {...}}           N lines, one object each
    {"end": true, "objects": N, "sha256": "..."}    over every byte before this line

One JSON document per line, so it is written and read as a stream (never the whole
store in one string). The checksum comes last because the writer computes it while
sending; a file that ends before that line is truncated, one whose bytes do not hash
to it is corrupted, and either is refused as a whole (`read` checks everything before
it returns anything). The epoch is informational: a restored cluster starts new Raft
terms, so it starts at epoch [0, ""] (docs/operations.md).
"""
import hashlib
import json

FORMAT = "shepherd-ha-snapshot"
VERSION = 1
MAX_LINE = 16 * 1024 * 1024        # an object is at most a few MiB (the API's body limit): more is not ours


class SnapshotError(ValueError):
    """A file that is not a whole, intact snapshot of a version we read; says which."""


def _line(document):
    return (json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n").encode()


def encode(header, items):
    """Yield the file's lines (bytes): `header` (format and version are added), then one
    line per (resource, object) of `items`, then the checksum line."""
    digest = hashlib.sha256()
    count = 0
    first = _line(dict(header, format=FORMAT, version=VERSION))
    digest.update(first)
    yield first
    for resource, obj in items:
        line = _line({"resource": resource, "object": obj})
        digest.update(line)
        count += 1
        yield line
    if count != header.get("objects"):
        # The header promised another count: refuse to finish the file (the reader would refuse it).
        raise SnapshotError("the snapshot holds %d objects, its header says %s" % (count, header.get("objects")))
    yield _line({"end": True, "objects": count, "sha256": digest.hexdigest()})


class Reader:
    """Checks a snapshot fed line by line (`feed`); `finish` raises unless it was whole."""

    def __init__(self, source="the snapshot", keep_objects=True):
        self.source = source
        self.header = None
        self.keep_objects = keep_objects
        self.objects = []               # [(resource, object)], when kept
        self.count = 0
        self.trailer = None
        self._digest = hashlib.sha256()
        self._lines = 0

    def _bad(self, text):
        return SnapshotError("%s is corrupted: %s" % (self.source, text))

    def feed(self, line):
        self._lines += 1
        if self.trailer is not None:
            raise self._bad("line %d comes after the checksum line" % self._lines)
        if len(line) > MAX_LINE:
            raise self._bad("line %d is %d bytes long" % (self._lines, len(line)))
        if not line.endswith(b"\n"):
            raise SnapshotError("%s is truncated: line %d ends without a newline (after %d of %s objects)"
                                % (self.source, self._lines, self.count,
                                   self.header.get("objects") if self.header else "?"))
        try:
            document = json.loads(line)
        except ValueError:
            raise self._bad("line %d is not JSON" % self._lines) from None
        if not isinstance(document, dict):
            raise self._bad("line %d is not a JSON object" % self._lines)
        if self.header is None:
            self._check_header(document)
        elif document.get("end") is True:
            self.trailer = document
            return
        elif set(document) != {"resource", "object"} or not isinstance(document["object"], dict):
            raise self._bad("line %d is not an object line" % self._lines)
        else:
            self.count += 1
            if self.keep_objects:
                self.objects.append((document["resource"], document["object"]))
        self._digest.update(line)

    def _check_header(self, document):
        if document.get("format") != FORMAT:
            raise SnapshotError("%s is not a shepherd-ha snapshot (its first line has no \"format\": \"%s\")"
                                % (self.source, FORMAT))
        if document.get("version") != VERSION:
            raise SnapshotError("%s is snapshot format version %r; this shepherd-ha reads version %d (use the "
                                "release that wrote it, or a newer one)" % (self.source, document.get("version"),
                                                                             VERSION))
        for field, kind in (("revision", int), ("objects", int), ("clusterId", str)):
            if not isinstance(document.get(field), kind):
                raise self._bad("its header has no %s" % field)
        self.header = document

    def finish(self):
        if self.header is None:
            raise SnapshotError("%s is empty" % self.source)
        if self.trailer is None:
            raise SnapshotError("%s is truncated: it ends after %d of %d objects, before its checksum line"
                                % (self.source, self.count, self.header["objects"]))
        want = self.trailer.get("sha256")
        have = self._digest.hexdigest()
        if want != have:
            raise self._bad("its sha256 is %s, its checksum line says %s" % (have, want))
        if self.count != self.header["objects"] or self.trailer.get("objects") != self.header["objects"]:
            raise self._bad("it holds %d objects, its header says %d" % (self.count, self.header["objects"]))
        return self


def read(path):
    """The checked Reader of the file at `path` (header, objects); SnapshotError otherwise."""
    reader = Reader(path)
    try:
        with open(path, "rb") as fh:
            for line in fh:
                reader.feed(line)
    except OSError as exc:
        raise SnapshotError("cannot read %s: %s" % (path, exc.strerror)) from None
    return reader.finish()
