"""Server-side printing: objects as meta.k8s.io Tables when the Accept header asks
(`application/json;as=Table;v=v1;g=meta.k8s.io`, or v1beta1), for get, list and
watch. Columns per kind come from model/printer_columns.py. Each row carries its
object as PartialObjectMetadata (`includeObject=Metadata`, the default: kubectl
reads the namespace and labels from it), the whole object (`Object`) or nothing
(`None`).
"""
from datetime import datetime, timezone

from flask import request

from shepherd_ha.model.printer_columns import cells, columns_for

from .bodies import dumps_list
from .errors import ApiError
from .media import accepts

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
INCLUDE_OBJECT = ("Metadata", "Object", "None")
_JSON_TYPES = ("application/json", "application/*", "*/*")


def table_version(accept_header):
    """"v1" or "v1beta1" when the client prefers a Table, else None (it takes the
    object itself: plain JSON comes first, or no Table form is named at all)."""
    for media in accepts(accept_header):
        if media.type not in _JSON_TYPES:
            continue          # protobuf, yaml: we answer JSON, so look further down the list
        p = media.params
        if p.get("as") == "Table" and p.get("g") == TABLE_GROUP and p.get("v") in TABLE_VERSIONS:
            return p["v"]
        if "as" not in p:
            return None
    return None


class TableRequest:
    """How the current request wants its Table: version and what each row carries."""

    def __init__(self, version, include):
        self.version, self.include = version, include

    @property
    def api_version(self):
        return "%s/%s" % (TABLE_GROUP, self.version)

    def row(self, info, obj, now):
        row = {"cells": cells(columns_for(info.plural), obj, now)}
        if self.include == "Metadata":
            row["object"] = {"kind": "PartialObjectMetadata", "apiVersion": self.api_version,
                             "metadata": obj.get("metadata") or {}}
        elif self.include == "Object":
            row["object"] = dict(obj, kind=info.kind, apiVersion=info.api_version)
        return row

    def table(self, info, objects, resource_version, with_columns=True, now=None):
        now = now or datetime.now(timezone.utc)
        definitions = [c.definition() for c in columns_for(info.plural)] if with_columns else []
        return {"kind": "Table", "apiVersion": self.api_version,
                "metadata": {"resourceVersion": str(resource_version)} if resource_version else {},
                "columnDefinitions": definitions, "rows": [self.row(info, o, now) for o in objects]}

    def list_chunks(self, info, objects, resource_version):
        """A list's Table as bytes chunks (api/bodies.dumps_list): rows are serialized
        in bounds, so the Raft tick gets the GIL between them."""
        head = self.table(info, [], resource_version)
        del head["rows"]
        now = datetime.now(timezone.utc)
        return dumps_list(head, [self.row(info, o, now) for o in objects], key="rows")

    def watch_event(self, info, event, with_columns):
        """A watch event whose object becomes a one-row Table (bookmarks and errors
        stay as they are)."""
        if event.get("type") in ("BOOKMARK", "ERROR"):
            return event
        obj = event["object"]
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        return {"type": event["type"], "object": self.table(info, [obj], rv, with_columns)}


def requested():
    """The TableRequest of the current request, or None when it wants objects."""
    version = table_version(request.headers.get("Accept"))
    if version is None:
        return None
    include = request.args.get("includeObject") or "Metadata"
    if include not in INCLUDE_OBJECT:
        raise ApiError(400, "includeObject %r is not one of %s" % (include, ", ".join(INCLUDE_OBJECT)))
    return TableRequest(version, include)
