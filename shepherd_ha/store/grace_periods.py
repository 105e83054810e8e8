"""A pod's graceful deletion as Kubernetes marks it, for the FSM and for dry runs: pure.

From command format 4 a pod's deletionTimestamp is when its grace period ends (the
request's time plus deletionGracePeriodSeconds), as Kubernetes writes it; a second delete
may only shorten the grace period, and moves the deadline back with it. Commands of older
formats stamped the request's time and kept it on a shorter second delete; a journal of
them replays as it was answered. (A pod marked by an older format and shortened by a
newer one has its old stamp moved back: a deadline at or before the first request, so
its agent stops it at once. docs/operations.md: let terminating pods finish first.)
"""
from shepherd_ha.model.times import format_time, parse_time

from .commands import GRACE_DEADLINE_FORMAT

DEFAULT_GRACE_SECONDS = 30     # a pod's terminationGracePeriodSeconds when it has none
# A deadline further away than this is written as this far (68 years): a grace period of
# up to int64 seconds validates, and its deadline would be no date at all.
LONGEST_SHIFT = 2 ** 31 - 1


def grace_seconds(graceful, pod):
    """The grace period a graceful delete gives `pod`: the request's gracePeriodSeconds,
    else the pod's own terminationGracePeriodSeconds as stored."""
    seconds = graceful.get("gracePeriodSeconds")
    if seconds is None:
        seconds = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    return int(seconds)


def _shifted(stamp, seconds):
    moment = parse_time(stamp)
    if moment is None:
        return None
    seconds = max(-LONGEST_SHIFT, min(LONGEST_SHIFT, seconds))
    try:
        return format_time(moment.timestamp() + seconds)
    except (OverflowError, OSError, ValueError):     # a stored stamp near the end of time
        return None


def terminating_metadata(meta, requested, seconds, version):
    """The metadata of a pod marked for deletion with a grace period of `seconds` asked at
    `requested` (an RFC 3339 time), or None when the mark stays as it is (already marked
    with a grace period no longer than this one)."""
    marked = meta.get("deletionTimestamp")
    before = meta.get("deletionGracePeriodSeconds", seconds)
    if marked and seconds >= before:
        return None
    if version < GRACE_DEADLINE_FORMAT:
        stamp = marked or requested
    elif marked:     # when the first delete was asked, plus the shorter period (Kubernetes' BeforeDelete)
        asked = _shifted(marked, -min(int(before), LONGEST_SHIFT))     # as far as the first mark went
        stamp = (_shifted(asked, seconds) if asked else None) or _shifted(requested, seconds)
    else:
        stamp = _shifted(requested, seconds) or requested
    return dict(meta, deletionTimestamp=stamp, deletionGracePeriodSeconds=seconds)
