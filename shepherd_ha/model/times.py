"""RFC 3339 times as the Kubernetes API writes them, formatted and parsed in one place for
the server, the agent and sheepctl: a Time to the second ('2026-11-29T17:00:00Z'), a
MicroTime to the microsecond (a Lease's renewTime, an Event's eventTime). Parsing takes
what clients send: up to nanoseconds (kept to the microsecond), 'Z' or an offset,
surrounding blanks; a time without an offset is UTC. It is Python's ISO 8601 reader, so
it also takes a little more than RFC 3339 (a date alone, a space for the 'T'). sheepctl's
ordering of log lines keeps nanoseconds and reads its timestamps itself
(ctl/commands/logs.py)."""
import datetime
import time

UTC = datetime.timezone.utc

_SECONDS_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_time(seconds=None):
    """Seconds since the epoch (default now) -> '2026-11-29T17:00:00Z'."""
    return time.strftime(_SECONDS_FORMAT, time.gmtime(time.time() if seconds is None else seconds))


def format_micro_time(seconds=None):
    """Seconds since the epoch (default now) -> '2026-11-29T17:00:00.123456Z'."""
    seconds = time.time() if seconds is None else seconds
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + ".%06dZ" % int((seconds % 1) * 1e6)


def format_datetime(moment, micro=False):
    """A datetime (naive means UTC) -> a Time, or with `micro` a MicroTime."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else _SECONDS_FORMAT)


def now_rfc3339(offset_seconds=0):
    """Now (plus `offset_seconds`, negative for the past) as a Time."""
    return format_time(time.time() + offset_seconds)


def parse_datetime(text):
    """An RFC 3339 time -> an aware datetime (fractions beyond microseconds dropped);
    ValueError naming the text when it is not one."""
    if not isinstance(text, str):
        raise ValueError("%r is not an RFC 3339 time such as 2026-11-29T17:00:00Z" % (text,))
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError("%r is not an RFC 3339 time such as 2026-11-29T17:00:00Z" % text) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def parse_time(text):
    """An RFC 3339 time -> an aware datetime, or None when absent or malformed."""
    try:
        return parse_datetime(text) if text else None
    except ValueError:
        return None


def parse_seconds(text):
    """An RFC 3339 time -> seconds since the epoch, or None when absent or malformed."""
    moment = parse_time(text)
    return None if moment is None else moment.timestamp()
