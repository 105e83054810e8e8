"""Each stored object's JSON compressed on its own, against a preset dictionary of its kind.

Most of a pod's ~1.5-2 KB of JSON is the same on every pod: keys, defaults, the shapes
of conditions, statuses and owner references. Deflate primed with one typical object of
the kind (store/compression_dictionaries.py) keeps mostly what differs: a Running pod of
the hollow fleet is 292 bytes at level 3, against 1,605 of JSON and ~760 compressed
without a dictionary (docs/benchmarks.md, run X). Compressing costs ~5-10 us an object,
decompressing ~2 us: the store process decompresses an object when a command reads it,
for its digest, and once as a dump loads (the FSM's index of owner references); each
API worker's mirror once, as the change stream brings it.

Form: b"\\x00", the dictionary's id (one byte), then a zlib stream (its header names the
dictionary by checksum and its trailer checks the data, so a wrong dictionary or a
damaged object is an error, never a wrong object). JSON never starts with a NUL, so
plain JSON (an object that did not get smaller, or stored by an older version) reads as
before. Compressed bytes may differ between zlib builds: nothing compares them (the
store's digest and every reader decompress first).
"""
import zlib

from .compression_dictionaries import DICTIONARIES, FOR_ANY_KIND

MARK = b"\x00"
_LEVEL = 3                 # within 5 % of level 9 for a pod, at a third of its CPU
_WINDOW_BITS = 13          # 8 KB: a dictionary and a typical object fit; a smaller state to copy
_MEMORY_LEVEL = 4

# One compressor per dictionary, primed once; each object takes a copy (~5 us, against
# ~30 us for priming a fresh one).
_PRIMED = {ident: zlib.compressobj(_LEVEL, zlib.DEFLATED, _WINDOW_BITS, _MEMORY_LEVEL, zlib.Z_DEFAULT_STRATEGY,
                                   dictionary)
           for ident, (_kinds, dictionary) in DICTIONARIES.items()}
_BY_KIND = {kind: ident for ident, (kinds, _dictionary) in DICTIONARIES.items() for kind in kinds}
_HEADERS = {ident: MARK + bytes([ident]) for ident in DICTIONARIES}


def compress(data, kind):
    """`data` (an object's JSON bytes) compressed against `kind`'s dictionary, or `data`
    itself when that is not smaller."""
    ident = _BY_KIND.get(kind, FOR_ANY_KIND) if isinstance(kind, str) else FOR_ANY_KIND
    compressor = _PRIMED[ident].copy()
    packed = _HEADERS[ident] + compressor.compress(data) + compressor.flush()
    return packed if len(packed) < len(data) else data


def is_compressed(data):
    return data[:1] == MARK


def dictionary_of(data):
    """The dictionary (bytes) a compressed object needs; ValueError if this version has
    none by its id or the object is too short to be one."""
    if len(data) < 3:
        raise ValueError("stored object is truncated (%d bytes)" % len(data))
    entry = DICTIONARIES.get(data[1])
    if entry is None:
        raise ValueError("stored object compressed against dictionary %d, which this version does not have: "
                         "it was written by a newer version; run that version, or restore a snapshot "
                         "saved with `sheepctl cluster snapshot save`" % data[1])
    return entry[1]


def decompress(data):
    """The JSON bytes of a stored object, compressed or not."""
    if data[:1] != MARK:
        return data
    decompressor = zlib.decompressobj(zlib.MAX_WBITS, zdict=dictionary_of(data))
    ident = data[1]
    try:
        out = decompressor.decompress(data[2:])
    except zlib.error as exc:
        raise ValueError("stored object (%d bytes, dictionary %d) is damaged: %s" % (len(data), ident, exc)) from None
    if not decompressor.eof or decompressor.unused_data:
        raise ValueError("stored object (%d bytes, dictionary %d) is truncated or has data past its end"
                         % (len(data), ident))
    return out
