"""Name and label syntax shared by selectors and validation (Kubernetes rules)."""
import re

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL_NAME = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")
# IANA service names: what a named port may be called (at least one letter, no '--').
_PORT_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")

DNS_LABEL_RULE = ("use at most 63 lowercase letters, digits and '-', "
                  "starting and ending with a letter or digit")
DNS_SUBDOMAIN_RULE = ("use at most 253 lowercase letters, digits, '-' and '.', "
                      "starting and ending with a letter or digit")
LABEL_KEY_RULE = ("use a name of at most 63 letters, digits, '-', '_' or '.', starting and "
                  "ending with a letter or digit, optionally after a DNS subdomain prefix "
                  "and '/' (e.g. app or example.com/tier)")
LABEL_VALUE_RULE = ("use at most 63 letters, digits, '-', '_' or '.', starting and ending "
                    "with a letter or digit, or leave it empty")
PORT_NAME_RULE = ("use at most 15 lowercase letters, digits and '-', with at least one "
                  "letter, starting and ending with a letter or digit, and no '--'")


def show(value, limit=64):
    """Quote what a person sent, cut short so a huge input cannot flood a message."""
    if isinstance(value, str):
        return "'%s'" % (value if len(value) <= limit else value[:limit] + "...")
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def is_dns1123_label(s):
    return isinstance(s, str) and len(s) <= 63 and _DNS_LABEL.fullmatch(s) is not None


def is_dns1123_subdomain(s):
    return isinstance(s, str) and len(s) <= 253 and _DNS_SUBDOMAIN.fullmatch(s) is not None


def is_label_key(key):
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):
        return False
    return len(name) <= 63 and _LABEL_NAME.fullmatch(name) is not None


def is_label_value(value):
    return isinstance(value, str) and (
        value == "" or (len(value) <= 63 and _LABEL_NAME.fullmatch(value) is not None))


def is_port_name(name):
    return (isinstance(name, str) and len(name) <= 15 and "--" not in name
            and any(c.isalpha() for c in name) and _PORT_NAME.fullmatch(name) is not None)


def label_key_error(key):
    """None if key is a valid label key, else a message saying the rule."""
    if is_label_key(key):
        return None
    return "%s is not a valid label key: %s" % (show(key), LABEL_KEY_RULE)


def label_value_error(value):
    if is_label_value(value):
        return None
    return "%s is not a valid label value: %s" % (show(value), LABEL_VALUE_RULE)
