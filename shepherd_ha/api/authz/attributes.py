"""What a request asks to do, in Kubernetes' authorization terms (its RequestInfo):
verb, API group, resource, subresource, namespace, name; or a non-resource path."""
import dataclasses

from ..bodies import TRUE_VALUES

_READ_VERBS = {"GET": "get", "HEAD": "get", "OPTIONS": "get"}
_ITEM_VERBS = {"PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}
_COLLECTION_VERBS = {"POST": "create", "DELETE": "deletecollection", "PUT": "update", "PATCH": "patch"}


@dataclasses.dataclass(frozen=True)
class Attributes:
    verb: str
    resource: str = ""          # "" for a non-resource request
    api_group: str = ""
    subresource: str = ""
    namespace: str = ""         # "" = cluster scope (or all namespaces, for a list)
    name: str = ""
    path: str = ""              # the non-resource path
    field_selector: str = None  # lists and watches: what the agent's selector says

    @property
    def is_resource(self):
        return bool(self.resource)

    @property
    def full_resource(self):
        return self.resource + ("/" + self.subresource if self.subresource else "")


def from_request(method, path, args):
    """Attributes of an HTTP request (method, path, query args)."""
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return Attributes(verb=method.lower(), path=path)
    if not rest:
        return Attributes(verb=method.lower(), path=path)     # discovery of a group version
    namespace = ""
    # namespaces/NAME/finalize is a namespace's subresource, not a collection in NAME
    if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and rest[2:] == ["finalize"]):
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], (rest[1] if len(rest) > 1 else ""), "/".join(rest[2:])
    if resource == "namespaces" and name and not namespace:
        namespace = name            # as Kubernetes: a namespace object is in its own namespace
    if name:
        verb = _READ_VERBS.get(method) or _ITEM_VERBS.get(method, method.lower())
    elif method in _READ_VERBS:
        watch = (args.get("watch") or "").lower() in TRUE_VALUES    # as the handler decides (bodies.flag)
        verb = "watch" if watch else "list"
    else:
        verb = _COLLECTION_VERBS.get(method, method.lower())
    return Attributes(verb=verb, resource=resource, api_group=group, subresource=sub, namespace=namespace,
                      name=name, path=path, field_selector=args.get("fieldSelector"))


def from_review(spec):
    """Attributes of a SubjectAccessReview spec (resourceAttributes or nonResourceAttributes)."""
    res = spec.get("resourceAttributes")
    if isinstance(res, dict):
        return Attributes(verb=str(res.get("verb") or ""), resource=str(res.get("resource") or ""),
                          api_group=str(res.get("group") or ""), subresource=str(res.get("subresource") or ""),
                          namespace=str(res.get("namespace") or ""), name=str(res.get("name") or ""))
    non = spec.get("nonResourceAttributes")
    if isinstance(non, dict):
        return Attributes(verb=str(non.get("verb") or ""), path=str(non.get("path") or ""))
    return None


def forbidden_message(user, attrs, reason=None):
    """Kubernetes' wording: pods "x" is forbidden: User "alice" cannot get resource "pods" in API
    group "" in the namespace "default"."""
    if not attrs.is_resource:
        text = 'forbidden: User "%s" cannot %s path "%s"' % (user, attrs.verb, attrs.path)
    else:
        qualified = attrs.resource + ("." + attrs.api_group if attrs.api_group else "")
        what = '%s "%s"' % (qualified, attrs.name) if attrs.name else qualified
        where = 'in the namespace "%s"' % attrs.namespace if attrs.namespace else "at the cluster scope"
        text = '%s is forbidden: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
            what, user, attrs.verb, attrs.full_resource, attrs.api_group, where)
    return text + (": " + reason if reason else "")
