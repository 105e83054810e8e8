"""The options of a write that are not its body: fieldManager, fieldValidation,
force, and the Warning headers the answer carries (RFC 7234 code 299, as Kubernetes
sends them and kubectl prints them)."""
import re

from flask import g, request

from shepherd_ha.model.known_fields import prune_unknown

from .errors import ApiError

_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")

VALIDATION_MODES = ("Strict", "Warn", "Ignore")
MAX_MANAGER = 128


def invalid_option(kind, field, message):
    """Kubernetes answers bad query options as an Invalid CreateOptions/PatchOptions."""
    return ApiError(422, "%s.meta.k8s.io is invalid: %s: %s" % (kind, field, message), "Invalid",
                    details={"group": "meta.k8s.io", "kind": kind,
                             "causes": [{"reason": "FieldValueInvalid", "field": field, "message": message}]})


def field_validation():
    """Strict, Warn (the default, as in Kubernetes) or Ignore."""
    mode = request.args.get("fieldValidation") or "Warn"
    if mode not in VALIDATION_MODES:
        raise invalid_option(_options_kind(), "fieldValidation",
                             "Unsupported value: %r: supported values: \"Ignore\", \"Strict\", \"Warn\"" % mode)
    return mode


def field_manager(required=False):
    """The fieldManager parameter; without one, the User-Agent's product name (as
    Kubernetes does: "kubectl/v1.32.0 (linux/amd64)" -> "kubectl")."""
    manager = request.args.get("fieldManager")
    if manager is None or manager == "":
        if required:
            raise invalid_option("PatchOptions", "fieldManager", "Required value: is required for apply patch")
        manager = (request.headers.get("User-Agent") or "").split("/")[0].strip() or "unknown"
        return manager[:MAX_MANAGER]
    if len(manager) > MAX_MANAGER or not manager.isprintable():
        raise invalid_option(_options_kind(), "fieldManager",
                             "must be at most %d printable characters" % MAX_MANAGER)
    return manager


def force():
    value = request.args.get("force")
    if value in (None, ""):
        return False
    if value not in ("true", "false"):
        raise invalid_option("PatchOptions", "force", "must be true or false, got %r" % value)
    if value == "true" and request.mimetype != "application/apply-patch+yaml":
        raise invalid_option("PatchOptions", "force", "may not be specified for non-apply patch")
    return value == "true"


def _options_kind():
    return {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}.get(request.method,
                                                                                         "DeleteOptions")


def warn(text):
    g.setdefault("write_warnings", []).append(text)


def warning_value(text):
    """A Warning header's value, 299 - "text": quoted, and printable ASCII, since a header is
    sent as Latin-1 and a field name from a body may hold any character (\\uXXXX escapes
    then), a line break among them (which would split the header: \\x0a)."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    text = _CONTROL_CHARACTER.sub(lambda found: "\\x%02x" % ord(found.group()), text)
    return '299 - "%s"' % text.encode("ascii", "backslashreplace").decode("ascii")


def add_warnings(response):
    """Put the request's warnings on its answer: Warning: 299 - "text"."""
    for text in dict.fromkeys(g.get("write_warnings", ())):     # once each, though a retried write warns again
        response.headers.add("Warning", warning_value(text))
    return response


def known_fields_only(plural, obj, baseline=None, mode=None):
    """`obj` without fields its kind does not have. Strict refuses them and keys the
    body has twice (400, as Kubernetes' strict decoding does), Warn drops them with a
    warning, Ignore drops them silently. Fields already in `baseline` (the stored object, for a patch)
    are dropped without complaint: the client did not send them."""
    mode = mode or field_validation()
    pruned, unknown = prune_unknown(plural, obj)
    if baseline is not None:
        before = set(prune_unknown(plural, baseline)[1])
        unknown = [f for f in unknown if f not in before]
    twice = list(dict.fromkeys(g.get("duplicate_fields", ())))
    problems = [(f, 'unknown field "%s"' % f) for f in unknown] + \
        [(f, 'json: duplicate field "%s"' % f) for f in twice]
    if problems and mode == "Strict":
        raise ApiError(400, "strict decoding error: %s" % ", ".join(m for _, m in problems),
                       details={"causes": [{"reason": "FieldValueInvalid", "field": f, "message": m}
                                           for f, m in problems]})
    if mode == "Warn":
        for _, message in problems:
            warn(message)
    return pruned
