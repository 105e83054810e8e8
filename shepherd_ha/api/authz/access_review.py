"""SelfSubjectAccessReview and SelfSubjectRulesReview (authorization.k8s.io/v1): the
caller (or whom they impersonate) asks what the server's own authorizer would answer.
`sheepctl auth can-i` and `kubectl auth can-i` send these."""
from flask import Response, request

from shepherd_ha.store.raft_node import Unavailable

from ..bodies import dumps, json_object_body
from ..errors import ApiError, unavailable
from .attributes import from_review
from .authorizer import GROUP_MASTERS, identity

GROUP_VERSION = "authorization.k8s.io/v1"
PREFIX = "/apis/" + GROUP_VERSION


def _answer(kind, spec, status):
    body = {"apiVersion": GROUP_VERSION, "kind": kind, "metadata": {}, "spec": spec, "status": status}
    return Response(dumps(body), status=201, mimetype="application/json")


def _spec(kind):
    body = json_object_body()
    if body.get("kind", kind) != kind:
        raise ApiError(400, "kind %r does not match the URL, which is for %s" % (body.get("kind"), kind))
    spec = body.get("spec")
    if not isinstance(spec, dict):
        raise ApiError(422, "%s spec must be an object" % kind, "Invalid")
    return spec


def register(app, authorizer):
    """authorizer None: the API has no authentication, so everyone may do everything."""

    def caller():
        if authorizer is None:
            return None, ()
        env = request.environ
        if "shepherd.user" in env and not env.get("shepherd.restricted"):
            return env["shepherd.user"], env["shepherd.groups"]      # set (after impersonation) by authorizer.install
        return identity(authorizer)

    @app.post(PREFIX + "/selfsubjectaccessreviews")
    def self_subject_access_review():
        spec = _spec("SelfSubjectAccessReview")
        attrs = from_review(spec)
        if attrs is None or not attrs.verb or (not attrs.is_resource and not attrs.path):
            raise ApiError(422, "spec needs resourceAttributes (verb, resource, and namespace, name, group, "
                           "subresource as needed) or nonResourceAttributes (verb, path)", "Invalid")
        user, groups = caller()
        if authorizer is None:
            return _answer("SelfSubjectAccessReview", spec,
                           {"allowed": True, "reason": "this API has no authentication: everyone may do anything"})
        try:
            allowed, reason = authorizer.authorize(user, groups, attrs,
                                                   lambda: {"metadata": {"name": attrs.name}})
        except Unavailable as exc:
            raise unavailable(exc)
        status = {"allowed": allowed}
        if reason:
            status["reason"] = reason
        return _answer("SelfSubjectAccessReview", spec, status)

    @app.post(PREFIX + "/selfsubjectrulesreviews")
    def self_subject_rules_review():
        spec = _spec("SelfSubjectRulesReview")
        namespace = spec.get("namespace") or ""
        if not isinstance(namespace, str):
            raise ApiError(422, "spec.namespace must be a string", "Invalid")
        user, groups = caller()
        if authorizer is None or GROUP_MASTERS in groups:
            status = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                      "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
            return _answer("SelfSubjectRulesReview", spec, status)
        resource, paths = authorizer.rules(user, groups, namespace)
        status = {"resourceRules": resource, "nonResourceRules": paths, "incomplete": False}
        if "system:nodes" in groups:
            status.update(incomplete=True, evaluationError="a node's rights depend on the pods bound to it "
                          "(NodeRestriction): ask a SelfSubjectAccessReview per request")
        return _answer("SelfSubjectRulesReview", spec, status)
