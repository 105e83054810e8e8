"""Reading manifests: YAML or JSON files, multi-document, `kind: List`,
directories (*.yaml, *.yml, *.json, sorted) and `-` for stdin.

Errors name the file and line: `manifests/web.yaml: line 3: mapping values
are not allowed here`.  Everything is read and checked before anything is sent.
"""
import json
import os
import sys
from dataclasses import dataclass

import yaml

from shepherd_ha.model.resources import RESOURCES, resource_for_kind

EXTENSIONS = (".yaml", ".yml", ".json")


class ManifestError(Exception):
    """One or more manifests are unreadable; str() has one line per problem."""

    def __init__(self, problems):
        if isinstance(problems, str):
            problems = [problems]
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass
class Manifest:
    source: str       # file name as given (or "<stdin>")
    line: int         # line where the object starts (1-based)
    obj: dict
    resource: object  # shepherd_ha.model.resources.Resource

    @property
    def where(self):
        return "%s: line %d" % (self.source, self.line)

    @property
    def name(self):
        return (self.obj.get("metadata") or {}).get("name")

    @property
    def namespace(self):
        return (self.obj.get("metadata") or {}).get("namespace")


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as strings (they are sent as JSON)."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _yaml_problem(exc):
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    text = problem
    if context and context not in problem:
        text = "%s %s" % (problem, context) if problem.startswith("found") else "%s (%s)" % (problem, context)
    if mark is not None:
        return "line %d: %s" % (mark.line + 1, text)
    return text


def parse_yaml(text, source):
    """-> list of (line, document) ; ManifestError on a syntax error."""
    docs = []
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            line = node.start_mark.line + 1
            data = loader.construct_document(node)
            item_lines = []
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if getattr(key, "value", None) == "items" and isinstance(value, yaml.SequenceNode):
                        item_lines = [n.start_mark.line + 1 for n in value.value]
            docs.append((line, data, item_lines))
    except yaml.YAMLError as exc:
        raise ManifestError("%s: %s" % (source, _yaml_problem(exc))) from None
    finally:
        loader.dispose()
    return docs


def parse_json(text, source):
    try:
        data = json.loads(text)
    except ValueError as exc:
        lineno = getattr(exc, "lineno", None)
        msg = getattr(exc, "msg", None) or str(exc)
        if lineno:
            raise ManifestError("%s: line %d: %s" % (source, lineno, msg)) from None
        raise ManifestError("%s: %s" % (source, msg)) from None
    if isinstance(data, list):
        return [(1, d, []) for d in data]
    return [(1, data, [])]


def parse_text(text, source, is_json=None):
    """Objects of one file's text -> list of Manifest (checked)."""
    if is_json is None:
        is_json = source.lower().endswith(".json") or text.lstrip().startswith(("{", "["))
    docs = parse_json(text, source) if is_json else parse_yaml(text, source)
    out, problems = [], []
    for index, (line, doc, item_lines) in enumerate(docs):
        if doc is None:
            continue
        where = "%s: line %d" % (source, line)
        if not isinstance(doc, dict):
            problems.append("%s: expected an object (a mapping with apiVersion, kind, metadata), got %s"
                            % (where, _type_name(doc)))
            continue
        kind = doc.get("kind")
        if isinstance(kind, str) and (kind == "List" or kind.endswith("List")) and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                problems.append("%s: `items` of a %s must be a list" % (where, kind))
                continue
            for i, item in enumerate(items):
                iline = item_lines[i] if i < len(item_lines) else line
                _check(item, source, iline, out, problems)
            continue
        _check(doc, source, line, out, problems)
    if problems:
        raise ManifestError(problems)
    return out


def _type_name(value):
    return {list: "a list", str: "a string", int: "a number", float: "a number",
            bool: "a boolean"}.get(type(value), type(value).__name__)


def _check(doc, source, line, out, problems):
    where = "%s: line %d" % (source, line)
    if not isinstance(doc, dict):
        problems.append("%s: expected an object, got %s" % (where, _type_name(doc)))
        return
    kind = doc.get("kind")
    if not kind or not isinstance(kind, str):
        problems.append("%s: missing `kind`" % where)
        return
    r = resource_for_kind(kind)
    if r is None:
        problems.append("%s: unknown kind %r (known kinds: %s)"
                        % (where, kind, ", ".join(sorted(x.kind for x in RESOURCES.values()))))
        return
    api_version = doc.get("apiVersion")
    if api_version is None:
        doc["apiVersion"] = r.api_version
    elif api_version != r.api_version:
        problems.append("%s: %s is served as apiVersion %s, not %r" % (where, kind, r.api_version,
                                                                       api_version))
        return
    meta = doc.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") or not isinstance(meta.get("name"), str):
        problems.append("%s: %s has no metadata.name" % (where, kind))
        return
    if "namespace" in meta and not r.namespaced:
        meta.pop("namespace")
    out.append(Manifest(source, line, doc, r))


def _files_in(directory, recursive):
    found = []
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for f in sorted(files):
            if f.lower().endswith(EXTENSIONS) and not f.startswith("."):
                found.append(os.path.join(root, f))
        if not recursive:
            break
    return found


def load(paths, recursive=False, stdin=None):
    """Read every path (file, directory or "-") -> list of Manifest.
    Raises ManifestError listing every problem found."""
    manifests, problems = [], []
    for path in paths:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin
            sources = [("<stdin>", stream.read())]
        elif os.path.isdir(path):
            files = _files_in(path, recursive)
            if not files:
                problems.append("%s: no manifests (*.yaml, *.yml, *.json) in this directory" % path)
                continue
            sources = [(f, None) for f in files]
        else:
            sources = [(path, None)]
        for source, text in sources:
            if text is None:
                try:
                    with open(source, encoding="utf-8") as f:
                        text = f.read()
                except FileNotFoundError:
                    problems.append("%s: no such file or directory" % source)
                    continue
                except UnicodeDecodeError:
                    problems.append("%s: not a UTF-8 text file" % source)
                    continue
                except OSError as exc:
                    problems.append("%s: %s" % (source, exc.strerror or exc))
                    continue
            try:
                manifests.extend(parse_text(text, source))
            except ManifestError as exc:
                problems.extend(exc.problems)
    if problems:
        raise ManifestError(problems)
    if not manifests:
        raise ManifestError("no objects found in %s" % ", ".join(paths))
    return manifests
