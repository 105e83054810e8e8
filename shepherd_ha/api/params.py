"""Numeric query parameters, bounded: a number too large for the server's types is a
400 naming the parameter and its range, never a 500 (int() of 4,301 digits raises)."""
from flask import request

from .errors import ApiError

INT64_MAX = 2 ** 63 - 1          # revisions (what a Kubernetes client holds)
INT32_MAX = 2 ** 31 - 1          # seconds and counts (68 years; a datetime stays in range)
MAX_SHOWN = 24                   # characters of a refused value quoted back


def shown(text):
    text = str(text)
    return repr(text) if len(text) <= MAX_SHOWN else "%r... (%d characters)" % (text[:MAX_SHOWN], len(text))


def parse_int(name, value, low=0, high=INT32_MAX, unit=""):
    """`value` (query text or a JSON number) as an int in [low, high], or ApiError 400."""
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= len(str(high)):
        number = int(value)       # str.isdigit() alone also accepts '²', which int() refuses
    else:
        number = None
    if number is None or not low <= number <= high:
        raise ApiError(400, "%s must be a whole number%s from %d to %d, got %s"
                       % (name, unit, low, high, shown(value)))
    return number


def query_int(name, low=0, high=INT32_MAX, default=None, unit=""):
    """The query parameter `name` as a bounded int; `default` when absent or empty."""
    value = request.args.get(name)
    if value in (None, ""):
        return default
    return parse_int(name, value, low, high, unit)


def resource_version():
    """The query's resourceVersion: None when absent or empty, else a revision number."""
    value = request.args.get("resourceVersion")
    if value in (None, ""):
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > len(str(INT64_MAX)) or int(value) > INT64_MAX:
        raise ApiError(400, "resourceVersion %s is not a revision number (a whole number from 0 to %d)"
                       % (shown(value), INT64_MAX))
    return int(value)


# Query parameters Kubernetes clients send that this server accepts and ignores (no
# paging: a list is always whole); still bounded so a client learns of a typo.
IGNORED_NUMBERS = ("limit", "limitBytes")


def check_ignored_numbers():
    for name in IGNORED_NUMBERS:
        query_int(name, 0, INT64_MAX)
