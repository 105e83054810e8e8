"""Times as kubectl shows them: ages and HumanDuration (45s, 5m30s, 3d4h),
shared by the server's Tables (model/printer_columns.py) and sheepctl's printers."""
from datetime import datetime, timezone

from .times import parse_time


def human_duration(seconds):
    """kubectl's HumanDuration: 45s, 5m30s, 17m, 3h20m, 20h, 3d4h, 45d, 2y30d."""
    if seconds is None:
        return "<unknown>"
    seconds = int(seconds)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return "%ds" % seconds
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return "%dm" % minutes if s == 0 else "%dm%ds" % (minutes, s)
    if minutes < 60 * 3:
        return "%dm" % minutes
    hours = minutes // 60
    if hours < 8:
        m = minutes % 60
        return "%dh" % hours if m == 0 else "%dh%dm" % (hours, m)
    if hours < 48:
        return "%dh" % hours
    if hours < 24 * 8:
        h = hours % 24
        return "%dd" % (hours // 24) if h == 0 else "%dd%dh" % (hours // 24, h)
    if hours < 24 * 365 * 2:
        return "%dd" % (hours // 24)
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return "%dy" % (hours // 24 // 365) if dy == 0 else "%dy%dd" % (hours // 24 // 365, dy)
    return "%dy" % (hours // 24 // 365)


def age(timestamp, now=None):
    t = parse_time(timestamp)
    if t is None:
        return "<unknown>"
    now = now or datetime.now(timezone.utc)
    return human_duration((now - t).total_seconds())
