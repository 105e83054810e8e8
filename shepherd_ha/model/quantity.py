"""CPU and memory quantities written the Kubernetes way (500m, 0.5, 128Mi, 1G, 1e3)."""
import re
from decimal import ROUND_CEILING, Decimal, localcontext

from .names import show


class QuantityError(ValueError):
    pass


_QUANTITY = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:[eE](?P<exp>[+-]?[0-9]+))?(?P<suffix>[A-Za-z]*)")

_BINARY = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50,
           "Ei": 1 << 60}
_DECIMAL = {"": 1, "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15,
            "E": 10 ** 18}
_MEMORY_SUFFIXES = dict(_DECIMAL, **_BINARY)
_CPU_SUFFIXES = {"": 1000, "m": 1}      # to millicores

# Stored values must fit the int64 the rest of the ecosystem assumes.
_MAX = (1 << 63) - 1

_CPU_HINT = "use cores such as 0.5 or 2, or millicores such as 500m"
_MEMORY_HINT = "use bytes or a suffix such as 128Mi, 1Gi, 500M"


def _parse(value, what, hint, suffixes, extra_hint=None):
    """Scale value by its suffix and round up to a whole unit, as Kubernetes does."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise QuantityError("%s is not a %s quantity: %s" % (show(value), what, hint))
    if isinstance(value, int):
        number, suffix = Decimal(value), ""
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError("%s is not a %s quantity: %s" % (show(value), what, hint))
        number, suffix = Decimal(repr(value)), ""
    else:
        m = _QUANTITY.fullmatch(value.strip())
        if not m or m.group("suffix") not in suffixes:
            more = extra_hint(m.group("suffix")) if m and extra_hint else None
            raise QuantityError("%s is not a %s quantity: %s" % (show(value), what, more or hint))
        exp = int(m.group("exp") or 0)
        # Bounding the exponent keeps the arithmetic small and exact.
        if exp > 30:
            raise QuantityError("%s is too large for a %s quantity" % (show(value), what))
        if exp < -30:
            raise QuantityError("%s has too many decimal places for a %s quantity"
                                % (show(value), what))
        number = Decimal(m.group("num")).scaleb(exp)
        if m.group("sign") == "-":
            number = -number
        suffix = m.group("suffix")
    if number < 0:
        raise QuantityError("%s is negative: a %s quantity must be 0 or more"
                            % (show(value), what))
    with localcontext() as ctx:
        ctx.prec = 80
        if number > _MAX:
            raise QuantityError("%s is too large for a %s quantity" % (show(value), what))
        scaled = (number * suffixes[suffix]).to_integral_value(rounding=ROUND_CEILING)
    if scaled > _MAX:
        raise QuantityError("%s is too large for a %s quantity" % (show(value), what))
    return int(scaled)


def _memory_suffix_hint(suffix):
    # 'm' is valid Kubernetes syntax (milli-bytes) but is always a typo for memory.
    if suffix == "m":
        return "'m' means thousandths of a byte; did you mean Mi (mebibytes) or M (megabytes)?"
    if suffix.upper() in ("K", "KB", "KI", "MB", "GB", "TB", "MIB", "GIB"):
        return "use k, M, G (powers of 1000) or Ki, Mi, Gi (powers of 1024), e.g. 128Mi"
    return None


def parse_cpu(value):
    """CPU quantity -> millicores (int). Strings or numbers of cores."""
    return _parse(value, "CPU", _CPU_HINT, _CPU_SUFFIXES)


def parse_memory(value):
    """Memory quantity -> bytes (int). Strings or numbers of bytes."""
    return _parse(value, "memory", _MEMORY_HINT, _MEMORY_SUFFIXES, _memory_suffix_hint)


def _check_count(n, what):
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise QuantityError("%s is not a %s amount: expected an integer of 0 or more"
                            % (show(n), what))


def usage_millicores(text):
    """A CPU usage quantity as metrics-server writes it (nanocores "3128545n", "250u", "5m" or
    whole cores) in millicores, rounded up as Kubernetes' MilliValue (what kubectl top
    prints); ValueError for anything else."""
    if not isinstance(text, str) or not text:
        raise ValueError("%s is not a CPU usage quantity" % show(text))
    scale = {"n": 10 ** 6, "u": 10 ** 3, "m": 1}.get(text[-1])
    digits = text[:-1] if scale else text
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError("%s is not a CPU usage quantity" % show(text))
    return -(-int(digits) // scale) if scale else int(digits) * 1000


def format_cpu(millicores):
    _check_count(millicores, "CPU")
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return "%dm" % millicores


def format_memory(nbytes):
    """Largest binary suffix that is exact; plain bytes otherwise (1000 -> '1000')."""
    _check_count(nbytes, "memory")
    for suffix, size in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
        if nbytes and nbytes % size == 0:
            return "%d%s" % (nbytes // size, suffix)
    return str(nbytes)
