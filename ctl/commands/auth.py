"""sheepctl auth can-i VERB RESOURCE [NAME] [-n NS] [--as USER] [--as-group G] [--list]

Asked of the server (SelfSubjectAccessReview / SelfSubjectRulesReview), which answers
with the authorization it really applies; prints yes or no and exits 0 or 1, as
kubectl does. --as/--as-group send Impersonate-User/-Group (needs `impersonate`).
"""
from shepherd_ha.model.resources import RESOURCES, lookup

from ..context import UserError

REVIEWS = "/apis/authorization.k8s.io/v1/"
_GROUPS = {r.plural: (r.api_version.split("/")[0] if "/" in r.api_version else "") for r in RESOURCES.values()}


def register(sub, common):
    p = sub.add_parser("auth", help="ask the server what you may do")
    asub = p.add_subparsers(dest="auth_command", metavar="ACTION")
    c = asub.add_parser("can-i", parents=[common], help="may I VERB RESOURCE [NAME]? (yes/no, exit 0/1)")
    c.add_argument("verb", metavar="VERB", nargs="?")
    c.add_argument("resource", metavar="RESOURCE", nargs="?",
                   help="pods, pods/log, deployments.apps, deployments/scale, '*', or a path like /metrics")
    c.add_argument("name", metavar="NAME", nargs="?")
    c.add_argument("--as", dest="as_user", metavar="USER", help="ask for this user (impersonation)")
    c.add_argument("--as-group", dest="as_groups", action="append", default=[], metavar="GROUP",
                   help="... in this group (repeatable; needs --as)")
    c.add_argument("--list", action="store_true", help="list what you may do in the namespace")
    c.add_argument("--quiet", "-q", action="store_true", help="print nothing; the exit code answers")
    c.set_defaults(func=run)


def resource_attributes(verb, text, name, namespace):
    """The SelfSubjectAccessReview spec for `can-i VERB TEXT [NAME]`."""
    if text.startswith("/"):
        return {"nonResourceAttributes": {"verb": verb, "path": text}}
    resource, _, sub = text.partition("/")
    resource, _, group = resource.partition(".")
    if resource == "*":
        plural, namespaced, known_group = "*", True, group
    else:
        info = lookup(resource)
        plural = info.plural if info else resource        # the server may know kinds this sheepctl does not
        namespaced = info.namespaced if info else True
        known_group = group or _GROUPS.get(plural, "")
    attrs = {"verb": verb, "resource": plural, "group": known_group}
    if sub:
        attrs["subresource"] = sub
    if name:
        attrs["name"] = name
    if namespaced and namespace:
        attrs["namespace"] = namespace
    return {"resourceAttributes": attrs}


def _headers(args):
    if args.as_groups and not args.as_user:
        raise UserError("--as-group needs --as USER")
    if not args.as_user:
        return None
    headers = {"Impersonate-User": args.as_user}
    if args.as_groups:
        headers["Impersonate-Group"] = ",".join(args.as_groups)
    return headers


def run(args, ctx):
    namespace = "" if ctx.all_namespaces else ctx.namespace
    if args.list:
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": namespace}}
        status = ctx.client.request("POST", REVIEWS + "selfsubjectrulesreviews", body=body,
                                    headers=_headers(args))["status"]
        ctx.print("%-40s %-28s %-20s %s" % ("Resources", "Non-Resource URLs", "Resource Names", "Verbs"))
        for rule in status.get("resourceRules") or []:
            for res in rule.get("resources") or []:
                for group in rule.get("apiGroups") or [""]:
                    ctx.print("%-40s %-28s %-20s %s" % (res + ("." + group if group and group != "*" else ""),
                                                        "[]", rule.get("resourceNames") or "[]",
                                                        "[" + " ".join(rule.get("verbs") or []) + "]"))
        for rule in status.get("nonResourceRules") or []:
            ctx.print("%-40s %-28s %-20s %s" % ("", " ".join(rule.get("nonResourceURLs") or []), "[]",
                                                "[" + " ".join(rule.get("verbs") or []) + "]"))
        if status.get("incomplete"):
            ctx.error("note: this list is incomplete: %s" % status.get("evaluationError", ""))
        return 0
    if not args.verb or not args.resource:
        raise UserError("usage: sheepctl auth can-i VERB RESOURCE [NAME] [-n NS] [--as USER] (or --list)")
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": resource_attributes(args.verb, args.resource, args.name, namespace)}
    status = ctx.client.request("POST", REVIEWS + "selfsubjectaccessreviews", body=body,
                                headers=_headers(args))["status"]
    allowed = bool(status.get("allowed"))
    if not args.quiet:
        ctx.print("yes" if allowed else "no")
    return 0 if allowed else 1
