"""Label and field selectors: parsing (Kubernetes grammar), matching, canonical text."""
from dataclasses import dataclass

from .names import label_key_error, label_value_error, show


class SelectorError(ValueError):
    pass


# Label requirement operators (the spellings used in canonical text).
EQUALS, NOT_EQUALS, IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "=", "!=", "in", "notin", "", "!"
_OP_ORDER = {EXISTS: 0, DOES_NOT_EXIST: 1, EQUALS: 2, NOT_EQUALS: 3, IN: 4, NOT_IN: 5}
_SPEC_OPS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple = ()

    def matches(self, labels):
        present = self.key in labels
        if self.operator == EXISTS:
            return present
        if self.operator == DOES_NOT_EXIST:
            return not present
        hit = present and labels[self.key] in self.values
        # As in Kubernetes, != and notin also match objects without the label.
        return hit if self.operator in (EQUALS, IN) else not hit

    def __str__(self):
        if self.operator == EXISTS:
            return self.key
        if self.operator == DOES_NOT_EXIST:
            return "!" + self.key
        if self.operator in (EQUALS, NOT_EQUALS):
            return self.key + self.operator + self.values[0]
        return "%s %s (%s)" % (self.key, self.operator, ",".join(self.values))


@dataclass(frozen=True)
class LabelSelector:
    """AND of requirements, kept sorted and de-duplicated so equal selectors compare equal."""
    requirements: tuple = ()

    def __post_init__(self):
        reqs = []
        for r in self.requirements:
            if r.operator in (IN, NOT_IN):
                r = Requirement(r.key, r.operator, tuple(sorted(set(r.values))))
            if r not in reqs:
                reqs.append(r)
        reqs.sort(key=lambda r: (r.key, _OP_ORDER[r.operator], r.values))
        object.__setattr__(self, "requirements", tuple(reqs))

    @property
    def empty(self):
        return not self.requirements

    def matches(self, labels):
        if not isinstance(labels, dict):
            labels = {}
        return all(r.matches(labels) for r in self.requirements)

    def __str__(self):
        return ",".join(str(r) for r in self.requirements)

    @classmethod
    def from_spec(cls, spec):
        """From {"matchLabels": {...}, "matchExpressions": [...]}; None selects everything."""
        if spec is None:
            return cls()
        if not isinstance(spec, dict):
            raise SelectorError("selector must be an object with matchLabels and/or "
                                "matchExpressions, got %s" % show(spec))
        for key in spec:
            if key not in ("matchLabels", "matchExpressions"):
                raise SelectorError(
                    "selector has unknown field %s: use matchLabels or matchExpressions, "
                    "e.g. {matchLabels: {app: web}}" % show(key))
        reqs = list(selector_from_labels(spec.get("matchLabels"), "matchLabels").requirements)
        exprs = spec.get("matchExpressions")
        if exprs is None:
            exprs = []
        if not isinstance(exprs, list):
            raise SelectorError("matchExpressions must be a list, got %s" % show(exprs))
        for i, expr in enumerate(exprs):
            reqs.append(_expression(expr, "matchExpressions[%d]" % i))
        return cls(tuple(reqs))


def _expression(expr, where):
    if not isinstance(expr, dict):
        raise SelectorError("%s must be an object with key and operator, got %s"
                            % (where, show(expr)))
    key = expr.get("key")
    err = label_key_error(key)
    if err:
        raise SelectorError("%s.key: %s" % (where, err))
    op = _SPEC_OPS.get(expr.get("operator")) if isinstance(expr.get("operator"), str) else None
    if op is None:
        raise SelectorError("%s.operator: %s is not supported: use In, NotIn, Exists or "
                            "DoesNotExist" % (where, show(expr.get("operator"))))
    values = expr.get("values")
    if values is None:
        values = []
    if not isinstance(values, list):
        raise SelectorError("%s.values must be a list of strings, got %s" % (where, show(values)))
    if op in (IN, NOT_IN) and not values:
        raise SelectorError("%s.values must not be empty for operator %s"
                            % (where, expr["operator"]))
    if op in (EXISTS, DOES_NOT_EXIST) and values:
        raise SelectorError("%s.values must be empty for operator %s" % (where, expr["operator"]))
    for v in values:
        err = label_value_error(v)
        if err:
            raise SelectorError("%s.values: %s" % (where, err))
    return Requirement(key, op, tuple(values))


def selector_from_labels(labels, where="labels"):
    """A selector requiring each key to equal its value (services, matchLabels)."""
    if labels is None:
        return LabelSelector()
    if not isinstance(labels, dict):
        raise SelectorError("%s must be an object of label key to value, got %s"
                            % (where, show(labels)))
    reqs = []
    for key, value in labels.items():
        err = label_key_error(key) or label_value_error(value)
        if err:
            raise SelectorError("%s: %s" % (where, err))
        reqs.append(Requirement(key, EQUALS, (value,)))
    return LabelSelector(tuple(reqs))


# --- text form --------------------------------------------------------------------

_PUNCT = "=!(),<>"
_END = ("end", "")


def _tokenize(text):
    """Tokens are (kind, text): kind 'id' for words, 'op' for punctuation."""
    tokens, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=!" and text.startswith("=", i + 1):
            tokens.append(("op", c + "="))
            i += 2
        elif c in _PUNCT:
            tokens.append(("op", c))
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in _PUNCT:
                j += 1
            tokens.append(("id", text[i:j]))
            i = j
    tokens.append(_END)
    return tokens


class _LabelParser:
    def __init__(self, text):
        self.text = text
        self.tokens = _tokenize(text)
        self.pos = 0

    def fail(self, reason):
        raise SelectorError("bad label selector %s: %s" % (show(self.text, 200), reason))

    def peek(self):
        return self.tokens[self.pos]

    def next(self):
        tok = self.tokens[self.pos]
        if tok is not _END:
            self.pos += 1
        return tok

    @staticmethod
    def found(tok):
        return "the end" if tok is _END else "'%s'" % tok[1]

    def parse(self):
        reqs = [self.requirement()]
        while True:
            tok = self.next()
            if tok is _END:
                return LabelSelector(tuple(reqs))
            if tok != ("op", ","):
                self.fail("expected ',' between requirements, found %s" % self.found(tok))
            reqs.append(self.requirement())

    def key(self, tok):
        if tok[0] != "id":
            self.fail("expected a label key, found %s" % self.found(tok))
        err = label_key_error(tok[1])
        if err:
            self.fail(err)
        return tok[1]

    def value(self, tok):
        err = label_value_error(tok[1])
        if err:
            self.fail(err)
        return tok[1]

    def requirement(self):
        tok = self.next()
        if tok == ("op", "!"):
            return Requirement(self.key(self.next()), DOES_NOT_EXIST)
        key = self.key(tok)
        nxt = self.peek()
        if nxt is _END or nxt == ("op", ","):
            return Requirement(key, EXISTS)
        self.next()
        if nxt in (("op", "="), ("op", "=="), ("op", "!=")):
            op = NOT_EQUALS if nxt[1] == "!=" else EQUALS
            after = self.peek()
            if after is _END or after == ("op", ","):
                return Requirement(key, op, ("",))      # 'k=' selects an empty value
            if after[0] != "id":
                self.fail("expected a value after '%s%s', found %s"
                          % (key, nxt[1], self.found(after)))
            return Requirement(key, op, (self.value(self.next()),))
        if nxt in (("id", IN), ("id", NOT_IN)):
            return Requirement(key, nxt[1], self.value_list(key, nxt[1]))
        if nxt in (("op", "<"), ("op", ">")):
            self.fail("operator '%s' is not supported: use =, ==, !=, in, notin, "
                      "'key' or '!key'" % nxt[1])
        self.fail("expected =, ==, !=, in or notin after '%s', found %s"
                  % (key, self.found(nxt)))

    def value_list(self, key, op):
        if self.next() != ("op", "("):
            self.fail("expected '(' after '%s %s'" % (key, op))
        values = []
        while True:
            tok = self.next()
            if tok is _END:
                self.fail("missing ')'")
            if tok == ("op", ")") and not values:
                self.fail("'%s %s ()' needs at least one value" % (key, op))
            if tok[0] != "id":
                self.fail("expected a value in '%s %s (...)', found %s"
                          % (key, op, self.found(tok)))
            values.append(self.value(tok))
            tok = self.next()
            if tok is _END:
                self.fail("missing ')'")
            if tok == ("op", ")"):
                return tuple(values)
            if tok != ("op", ","):
                self.fail("expected ',' or ')' in '%s %s (...)', found %s"
                          % (key, op, self.found(tok)))


def parse_label_selector(text):
    """Parse 'a=b,c!=d,e in (x,y),f notin (z),g,!h'; empty or None selects everything."""
    if text is None:
        return LabelSelector()
    if not isinstance(text, str):
        raise SelectorError("a label selector must be a string, got %s" % show(text))
    if not text.strip():
        return LabelSelector()
    return _LabelParser(text).parse()


# --- field selectors ----------------------------------------------------------------

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
# Kubernetes' selectable fields per kind (what kubectl describe, drain and get
# --field-selector send).
_EXTRA_FIELDS = {
    "pods": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
             "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "events": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
               "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
               "reason", "reportingComponent", "source", "type"),
    "nodes": ("spec.unschedulable",),
    "namespaces": ("status.phase",),
}
# A selector field that names another path of the object.
_FIELD_PATHS = {"source": "source.component"}


def supported_fields(resource_plural):
    return _COMMON_FIELDS + _EXTRA_FIELDS.get(resource_plural, ())


def field_value(obj, path):
    """The selector's view of a field: text, "" when missing, booleans as true/false."""
    value = obj
    for part in _FIELD_PATHS.get(path, path).split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    operator: str       # "=" or "!="
    value: str

    def matches(self, obj):
        return (field_value(obj, self.field) == self.value) == (self.operator == EQUALS)

    def __str__(self):
        return self.field + self.operator + self.value


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple = ()

    def __post_init__(self):
        reqs = sorted(set(self.requirements), key=lambda r: (r.field, r.operator, r.value))
        object.__setattr__(self, "requirements", tuple(reqs))

    @property
    def empty(self):
        return not self.requirements

    def matches(self, obj):
        return all(r.matches(obj) for r in self.requirements)

    def __str__(self):
        return ",".join(str(r) for r in self.requirements)


def parse_field_selector(text, resource_plural):
    """Parse 'metadata.name=web,status.phase!=Running' for one resource."""
    if text is None:
        return FieldSelector()
    if not isinstance(text, str):
        raise SelectorError("a field selector must be a string, got %s" % show(text))
    if not text.strip():
        return FieldSelector()
    supported = supported_fields(resource_plural)
    reqs = []
    for term in text.split(","):
        eq = term.find("=")
        if eq < 0 or not term[:eq].rstrip("!").strip():
            raise SelectorError("bad field selector %s: %s is not field=value, field==value "
                                "or field!=value" % (show(text, 200), show(term.strip())))
        if term[eq - 1] == "!":
            field, op, value = term[:eq - 1], NOT_EQUALS, term[eq + 1:]
        else:
            field, op, value = term[:eq], EQUALS, term[eq + 1:]
            if value.startswith("="):
                value = value[1:]
        field, value = field.strip(), value.strip()
        if field not in supported:
            raise SelectorError("field selector %s is not supported for %s; supported: %s"
                                % (show(field), resource_plural, ", ".join(supported)))
        reqs.append(FieldRequirement(field, op, value))
    return FieldSelector(tuple(reqs))
