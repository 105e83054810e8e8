"""Shape and range checks shared by the validators.

Every check records a Cause instead of raising, and returns the value only when it
has the expected shape, so callers can go deeper without re-checking types.
"""
from collections import namedtuple

from .names import label_key_error, label_value_error, show

Cause = namedtuple("Cause", "field message")
INT64_MAX = 2 ** 63 - 1      # what Kubernetes clients (Go) can hold


def is_int(value):
    # JSON true/false arrive as Python bools, which are ints; they are not counts.
    return isinstance(value, int) and not isinstance(value, bool)


def join(prefix, key):
    return "%s.%s" % (prefix, key) if prefix else str(key)


class Causes(list):
    def add(self, field, message):
        self.append(Cause(field, message))

    def _absent(self, field, value, required):
        if value is None:
            if required:
                self.add(field, "is required")
            return True
        return False

    def dict(self, field, value, required=False):
        if self._absent(field, value, required):
            return None
        if not isinstance(value, dict):
            self.add(field, "must be an object, got %s" % show(value))
            return None
        return value

    def list(self, field, value, required=False, non_empty=False):
        if self._absent(field, value, required):
            return None
        if not isinstance(value, list):
            self.add(field, "must be a list, got %s" % show(value))
            return None
        if non_empty and not value:
            self.add(field, "must not be empty")
        return value

    def string(self, field, value, required=False, non_empty=False):
        if self._absent(field, value, required):
            return None
        if not isinstance(value, str):
            self.add(field, "must be a string, got %s" % show(value))
            return None
        if non_empty and not value.strip():
            self.add(field, "must not be empty")
            return None
        return value

    def boolean(self, field, value, required=False):
        if self._absent(field, value, required):
            return None
        if not isinstance(value, bool):
            self.add(field, "must be true or false, got %s" % show(value))
            return None
        return value

    def integer(self, field, value, low=None, high=None, required=False):
        if self._absent(field, value, required):
            return None
        if high is None:
            high_ok = not is_int(value) or value <= INT64_MAX
            if not high_ok:
                self.add(field, "must be at most %d (a 64-bit integer), got a %d-digit number"
                         % (INT64_MAX, len(str(value))))
                return None
        if is_int(value) and (low is None or value >= low) and (high is None or value <= high):
            return value
        if high is not None:
            rule = "an integer from %d to %d" % (low, high)
        elif low == 0:
            rule = "an integer of 0 or more"
        elif low == 1:
            rule = "a positive integer"
        else:
            rule = "an integer"
        self.add(field, "must be %s, got %s" % (rule, show(value)))
        return None

    def enum(self, field, value, choices, required=False):
        if self._absent(field, value, required):
            return None
        if not isinstance(value, str) or value not in choices:
            self.add(field, "%s is not supported: use %s" % (show(value), _either(choices)))
            return None
        return value

    def string_list(self, field, value, required=False, non_empty=False):
        items = self.list(field, value, required, non_empty)
        if items is None:
            return None
        ok = True
        for i, item in enumerate(items):
            if not isinstance(item, str):
                self.add("%s[%d]" % (field, i), "must be a string, got %s" % show(item))
                ok = False
        return items if ok else None

    def labels(self, field, value, values_are_labels=True):
        """A map of label keys to strings (label values unless values_are_labels is False)."""
        mapping = self.dict(field, value)
        if mapping is None:
            return None
        ok = True
        for key, item in mapping.items():
            err = label_key_error(key)
            if not err and not isinstance(item, str):
                err = "the value of %s must be a string, got %s" % (show(key), show(item))
            if not err and values_are_labels:
                err = label_value_error(item)
            if err:
                self.add(field, err)
                ok = False
        return mapping if ok else None


def _either(choices):
    choices = list(choices)
    if len(choices) == 1:
        return choices[0]
    return "%s or %s" % (", ".join(choices[:-1]), choices[-1])
