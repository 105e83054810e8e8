"""Create, read, update, patch and delete of stored objects, and their subresources.

Everything a request needs is checked here before anything is submitted, so bad
input is a 4xx and never a half-written object. What must be checked against the
committed state (exists, resourceVersion, namespace) the FSM checks atomically.
"""
import copy
import random
import string
import time

from flask import Response, g, request

from shepherd_ha.model.defaults import apply_defaults
from shepherd_ha.model import server_side_apply as ssa
from shepherd_ha.model.namespaces import IMMORTAL_NAMESPACES, immortal_message
from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.selectors import SelectorError, parse_field_selector, parse_label_selector
from shepherd_ha.model.validation import validate_object, validate_scale, validate_update
from shepherd_ha.store import commands
from shepherd_ha.store.entry_size import CommandTooLarge
from shepherd_ha.store.raft_node import Unavailable
from shepherd_ha.store.deletion import delete_op
from shepherd_ha.model.times import now_rfc3339
from shepherd_ha.store.stamping import stamp_new

from .bodies import dumps, dumps_list, flag, json_body, json_object_body
from .errors import ApiError, unavailable
from .write_options import add_warnings, field_manager, field_validation, force, known_fields_only
from . import admission, dry_run, eviction, idempotency, paging, params, patches, pod_logs, tables, watch

# A read-modify-write that lost a race re-reads and tries again for this long.
UPDATE_DEADLINE = 5.0
MAX_RECALLED_ATTEMPTS = 1000     # lost races one request can have tried (bounded by UPDATE_DEADLINE)


def json_response(body, code=200):
    response = Response(dumps(body), status=code, mimetype="application/json")
    for header, value in admission.warning_headers() if g else ():
        response.headers.add(header, value)
    return add_warnings(response)


class Target:
    """What a URL names: a resource, maybe a namespace, a name and a subresource."""

    def __init__(self, group_version, namespace, plural, name=None, sub=None):
        info = RESOURCES.get(plural)
        if info is None or info.api_version != group_version:
            known = ", ".join(sorted(p for p, r in RESOURCES.items() if r.api_version == group_version))
            raise ApiError(404, "the server has no resource %r in %s (known: %s)"
                           % (plural, group_version, known or "none"))
        if info.namespaced and namespace is None and name is not None:
            raise ApiError(404, "%s are namespaced: use %s" % (plural, info.object_path(name, "NAMESPACE")))
        if not info.namespaced and namespace is not None:
            raise ApiError(404, "%s are cluster-scoped: use %s" % (plural, info.collection_path()))
        if sub is not None and sub not in info.subresources:
            raise ApiError(404, "%s have no %r subresource (they have: %s)"
                           % (plural, sub, ", ".join(info.subresources) or "none"))
        if namespace is not None:
            _check_dns_label(namespace, "namespace")
        self.info, self.namespace, self.name, self.sub = info, namespace, name, sub

    @property
    def plural(self):
        return self.info.plural

    def describe(self):
        where = " in namespace %s" % self.namespace if self.namespace else ""
        return '%s "%s"%s' % (self.plural, self.name, where)


def _check_dns_label(value, what):
    ok = 0 < len(value) <= 63 and value.isascii() and all(c.islower() or c.isdigit() or c == "-" for c in value) \
        and value[0].isalnum() and value[-1].isalnum()
    if not ok:
        raise ApiError(400, "%s %r is not a valid name: use at most 63 lowercase letters, digits and '-', "
                       "starting and ending with a letter or digit" % (what, value))


class ObjectApi:
    def __init__(self, replica, log_grants=None, outbound=None):
        self.replica = replica
        self.outbound = outbound            # how agents are reached (shepherd_ha/tls/outbound.py)
        self.log_grants = log_grants        # signs what this replica shows agents (pod logs)

    # ---- dispatch ----

    def collection(self, target):
        _check_write_options()
        if request.method == "GET":
            params.check_ignored_numbers()
            if flag("watch"):
                return watch.stream(self.replica, target)
            return self.list(target)
        if request.method == "POST":
            if target.info.namespaced and target.namespace is None:
                raise ApiError(405, "create %s in a namespace: POST %s"
                               % (target.plural, target.info.collection_path("NAMESPACE")))
            return self.create(target)
        raise ApiError(405, "%s is not supported on a collection: use GET or POST" % request.method)

    def item(self, target):
        _check_write_options()
        handlers = {None: {"GET": self.get, "PUT": self.replace, "PATCH": self.patch, "DELETE": self.delete},
                    "status": {"GET": self.get, "PUT": self.replace, "PATCH": self.patch},
                    "scale": {"GET": self.get_scale, "PUT": self.replace_scale, "PATCH": self.patch_scale},
                    "log": {"GET": lambda t: pod_logs.pod_log(self.replica, t, self.log_grants,
                                                                  self.outbound)},
                    "eviction": {"POST": lambda t: json_response(eviction.evict(self, t), 201)},
                    "finalize": {"PUT": self.finalize}}
        handler = handlers[target.sub].get(request.method)
        if handler is None:
            raise ApiError(405, "%s is not supported on %s" % (request.method, request.path))
        return handler(target)

    # ---- reads ----

    def _consistency(self):
        """Kubernetes semantics: no resourceVersion = linearizable, "0" = any local state,
        N = at least as new as N."""
        rv = params.resource_version()
        return rv is None or rv > self.replica.revision()

    def _read(self, target, consistent):
        try:
            obj, _ = self.replica.get(target.plural, target.namespace, target.name, consistent)
        except Unavailable as exc:
            raise unavailable(exc)
        if obj is None:
            raise ApiError(404, "%s not found" % target.describe(),
                           details={"name": target.name, "kind": target.plural})
        return obj

    def get(self, target):
        table = tables.requested()
        obj = self._read(target, self._consistency())
        if table is not None:
            return json_response(table.table(target.info, [obj], obj["metadata"].get("resourceVersion")))
        return json_response(obj)

    def list(self, target):
        table = tables.requested()
        label_sel, field_sel = selectors(target)
        wanted = paging.ListRequest(paging.list_scope(target.plural, target.namespace))
        items, revision = paging.snapshot(self.replica, target.plural, target.namespace, wanted,
                                          self._consistency(), (label_sel, field_sel))
        items = [o for o in items if label_sel.matches(o.get("metadata", {}).get("labels"))
                 and field_sel.matches(o)]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        items, list_meta = paging.page(items, wanted, revision)
        if table is not None:
            return Response(table.list_chunks(target.info, items, revision, list_meta), mimetype="application/json")
        # Serialized here, in chunks, while the request holds its flow-control seat.
        return Response(dumps_list({"apiVersion": target.info.api_version, "kind": target.info.list_kind,
                                    "metadata": dict({"resourceVersion": str(revision)}, **list_meta)}, items),
                        mimetype="application/json")

    # ---- writes ----

    def _submit(self, ops, attempt=0):
        # A read-modify-write that lost a race tries again under a derived key: the
        # first attempt's 409 is remembered under the request's key, and a client
        # retrying the whole request replays the same sequence of attempts.
        if dry_run.requested():          # answered as if done; nothing reaches the log
            return dry_run.simulate(self.replica, ops[0])
        key = idempotency.store_key(attempt)
        digest = idempotency.request_digest() if key is not None else None
        try:
            result = self.replica.write(ops, key=key, digest=digest)
        except Unavailable as exc:
            raise unavailable(exc)
        except CommandTooLarge as exc:      # refused before submitting: nothing was written
            raise ApiError(413, str(exc))
        if not result.get("ok"):
            raise ApiError(result["code"], result["message"], result.get("reason"), result.get("details"))
        return result["results"][0]

    def create(self, target, obj=None, managed=None):
        """POST of a new object, or (obj, managed) an apply that creates: managed(obj)
        gives the object its managedFields (by default, an Update by the request's manager)."""
        obj = self._checked_body(target, known_fields_only(target.plural, json_object_body() if obj is None else obj))
        meta = obj["metadata"]
        if not meta.get("name") and isinstance(meta.get("generateName"), str):
            meta["name"] = meta["generateName"] + "".join(
                random.choice(string.ascii_lowercase + string.digits) for _ in range(5))
        obj = stamp_new(self._defaulted_valid(target, obj))
        if target.plural == "namespaces":       # as Kubernetes: a new namespace's status is the server's
            obj["status"] = {"phase": "Active"}
        if managed is None:
            obj = ssa.record_update(target.plural, None, obj, field_manager(), target.info.api_version,
                                    now_rfc3339())
        else:
            obj = managed(obj)
        admission.admit(self.replica, target, obj)
        result = self._submit([commands.create(target.plural, obj)])
        return json_response(result["object"], result["code"])

    def replace(self, target):
        body = self._checked_body(target, json_object_body())
        name = body["metadata"].get("name")
        if name != target.name:
            raise ApiError(400, "metadata.name %r does not match the name in the URL %r" % (name, target.name))
        client_rv = body["metadata"].get("resourceVersion")
        mode = field_validation()
        return json_response(*self._read_modify_write(
            target, lambda current: known_fields_only(target.plural, body, mode=mode), client_rv))

    def patch(self, target):
        ptype = patches.patch_type()
        patch = patches.read_patch(ptype)
        force()             # checked before anything is read
        if ptype == patches.APPLY:
            return self._apply(target, patch)
        mode, change = field_validation(), patches.applier(ptype, target.plural, patch)

        def patched(current):
            new = change(current)
            meta = new.get("metadata") if isinstance(new, dict) else None
            if isinstance(meta, dict):
                # As Kubernetes' patch handler: a patch cannot rename or move the object.
                if meta.get("name") != target.name:
                    raise ApiError(400, "metadata.name %r does not match the name in the URL %r"
                                   % (meta.get("name"), target.name))
                if target.namespace and meta.get("namespace") not in (None, target.namespace):
                    raise ApiError(400, "metadata.namespace %r does not match the namespace in the URL %r"
                                   % (meta.get("namespace"), target.namespace))
            return known_fields_only(target.plural, new, baseline=current, mode=mode)
        return json_response(*self._read_modify_write(target, patched, patches.resource_version_of(ptype, patch)))

    def _apply(self, target, applied):
        """Server-side apply: merge the configuration, own its fields, 409 on conflicts;
        creates the object when absent."""
        manager, forced, mode = field_manager(required=True), force(), field_validation()
        if target.sub is not None:
            raise ApiError(400, "server-side apply of %s/%s is not supported: apply the %s itself, or send the "
                           "%s as a merge or strategic merge patch" % (target.plural, target.sub, target.info.kind,
                                                                       target.sub))
        applied = self._checked_body(target, known_fields_only(target.plural, applied, mode=mode))
        if applied["metadata"].get("name") not in (None, target.name):
            raise ApiError(400, "metadata.name %r does not match the name in the URL %r"
                           % (applied["metadata"].get("name"), target.name))
        applied["metadata"]["name"] = target.name
        change = patches.apply_change(target.plural, target.name, applied, manager, target.info.api_version,
                                      now_rfc3339(), forced)
        try:
            self._read(target, consistent=True)
        except ApiError as err:
            if err.code != 404:
                raise
            return self.create(target, applied, lambda obj: _managed_as(obj, change(None)))
        return json_response(*self._read_modify_write(target, change, None, managed=False))

    def _read_modify_write(self, target, change, client_rv, managed=True):
        """As _attempt_updates, but a retried request whose earlier try was applied gets
        that try's answer even when the object has changed or gone since (the checks made
        before submitting would otherwise refuse it, claiming it was not applied)."""
        try:
            return self._attempt_updates(target, change, client_rv, managed)
        except ApiError as err:
            if err.code not in (400, 404, 422):
                raise
            earlier = self._earlier_outcome()
            if earlier is None or not earlier.get("ok"):
                raise       # nothing applied before: this answer is the honest one
            result = earlier["results"][0]
            return result["object"], result["code"]

    def _earlier_outcome(self):
        """The outcome of this request's last applied try (its Idempotency-Key, then the
        keys derived for lost races), seen after a linearizable barrier; None if none."""
        key = idempotency.store_key()
        if key is None:
            return None
        try:
            self.replica.sync(True)
        except Unavailable as exc:
            raise unavailable(exc)
        found = None
        for attempt in range(MAX_RECALLED_ATTEMPTS):
            result = self.replica.recall(key if attempt == 0 else "%s#%d" % (key, attempt))
            if result is None:
                break
            found = result
        if found is not None:
            idempotency.check_same_request(found)
        return found

    def _attempt_updates(self, target, change, client_rv, managed=True):
        """Apply `change(current)` with the read resourceVersion as precondition; on a
        lost race re-read (linearizably) and retry, unless the client pinned a version.
        Returns (stored object, status code)."""
        deadline = time.monotonic() + UPDATE_DEADLINE
        attempt = 0          # lost races so far: names the idempotency key of each try
        consistent = False
        while True:
            # The local copy first (cheap); after a lost race, or when this replica has
            # not applied the object yet, a linearizable read.
            try:
                current = self._read(target, consistent=consistent)
            except ApiError as err:
                if err.code != 404 or consistent:
                    raise
                consistent = True
                current = self._read(target, consistent=True)
            new = change(current)
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise ApiError(422, "the result must be an object with metadata", "Invalid")
            new = dict(new, kind=target.info.kind, apiVersion=target.info.api_version)
            new["metadata"] = dict(new["metadata"], name=target.name)
            # The store's, as deletionTimestamp is (store/fsm.py keeps that one): a client that
            # wrote it could lengthen a pod's grace period, or make it unreadable for the
            # deletes and the agent that compare it.
            # (One a client stored before, not a whole number or on an object not being
            # deleted, goes: the store's deletes compare it.)
            grace = current["metadata"].get("deletionGracePeriodSeconds")
            if current["metadata"].get("deletionTimestamp") and type(grace) is int and grace >= 0:
                new["metadata"]["deletionGracePeriodSeconds"] = grace
            else:
                new["metadata"].pop("deletionGracePeriodSeconds", None)
            if target.namespace:
                new["metadata"]["namespace"] = target.namespace
            if target.sub == "status":
                if not isinstance(new.get("status"), (dict, type(None))):
                    raise invalid(target, [("status", "must be an object")])
                merged = copy.deepcopy(current)
                merged["status"] = new.get("status")
                new = merged
                causes = [c for c in validate_object(target.plural, new) if c[0].startswith("status")]
                causes = _new_causes(target, causes, current)
                if causes:
                    raise invalid(target, causes, new)
            else:
                new = self._defaulted_valid(target, new, current)
                causes = validate_update(target.plural, current, new)
                if causes:
                    raise invalid(target, causes)
                admission.admit(self.replica, target, new, current)
            # An Update by the request's manager (an apply has set its own); a string names
            # the subresource written through (scale). Not for /status: the store keeps a
            # status write's status only, so the entry could not be stored.
            if managed and target.sub != "status":
                new = ssa.record_update(target.plural, current, new, field_manager(), target.info.api_version,
                                        now_rfc3339(), target.sub if managed is True else managed)
            precondition = {"resourceVersion": str(client_rv) if client_rv else current["metadata"]["resourceVersion"]}
            try:
                result = self._submit([commands.update(target.plural, target.namespace, target.name, new,
                                                       precondition, target.sub)], attempt)
            except ApiError as err:
                if err.reason == "Conflict" and not client_rv and time.monotonic() < deadline:
                    attempt += 1
                    consistent = True
                    time.sleep(random.uniform(0, 0.01 * min(attempt, 10)))   # spread contending writers
                    continue
                raise
            return result["object"], result["code"]

    def delete(self, target):
        options = json_body(required=False) or {}
        if not isinstance(options, dict):
            raise ApiError(400, "delete options must be a JSON object")
        return json_response(self.delete_with(target, options), 200)

    def delete_with(self, target, options):
        """Delete with DeleteOptions (a DELETE's body, an Eviction's deleteOptions); the object as it was."""
        if target.plural == "namespaces" and target.name in IMMORTAL_NAMESPACES:
            raise ApiError(403, immortal_message(target.name), details={"name": target.name, "kind": "namespaces"})
        dry_run.from_options(options)
        pre = options.get("preconditions") or {}
        if not isinstance(pre, dict):
            raise ApiError(400, "preconditions must be an object with resourceVersion and/or uid")
        policy = options.get("propagationPolicy") or request.args.get("propagationPolicy") or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise ApiError(400, "propagationPolicy %r is not one of Background, Foreground, Orphan" % policy)
        grace = options.get("gracePeriodSeconds", request.args.get("gracePeriodSeconds"))
        if grace is not None:
            grace = params.parse_int("gracePeriodSeconds", grace, unit=" of seconds")
        op = delete_op(target.plural, target.namespace, target.name,
                       {k: pre[k] for k in ("resourceVersion", "uid") if pre.get(k)},
                       grace=grace, propagation_policy=policy)
        result = self._submit([op])
        # A pod on a node is only marked terminating: its agent stops it, then deletes it.
        return result["object"]

    # ---- namespaces/finalize ----

    def finalize(self, target):
        """PUT of a Namespace to /finalize: only its spec.finalizers are taken (Kubernetes'
        way to finish, or force, a Terminating namespace's deletion)."""
        body = self._checked_body(target, json_object_body())
        name = body["metadata"].get("name")
        if name not in (None, target.name):
            raise ApiError(400, "metadata.name %r does not match the name in the URL %r" % (name, target.name))
        spec = body.get("spec") if body.get("spec") is not None else {}
        if not isinstance(spec, dict):
            raise invalid(target, [("spec", "must be an object")])
        causes = [c for c in validate_object("namespaces", {"metadata": {"name": target.name}, "spec": spec})
                  if c[0].startswith("spec")]
        if causes:
            raise invalid(target, causes)
        rv = body["metadata"].get("resourceVersion")
        result = self._submit([commands.finalize(target.name, spec.get("finalizers") or [],
                                                 {"resourceVersion": str(rv)} if rv else None)])
        return json_response(result["object"], 200)

    # ---- scale subresource ----

    def _scale_of(self, obj):
        meta = obj["metadata"]
        return {"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                  "creationTimestamp") if k in meta},
                "spec": {"replicas": obj.get("spec", {}).get("replicas", 0)},
                "status": {"replicas": (obj.get("status") or {}).get("replicas", 0)}}

    def get_scale(self, target):
        return json_response(self._scale_of(self._read(target, self._consistency())))

    def replace_scale(self, target):
        return self._set_replicas(target, json_object_body())

    def patch_scale(self, target):
        ptype = patches.patch_type()
        if ptype == patches.APPLY:
            raise ApiError(415, "server-side apply of a Scale is not supported: apply the %s itself, or send "
                           "a merge patch" % target.info.kind)
        patch = patches.read_patch(ptype)
        current = self._scale_of(self._read(target, True))
        # Only a resourceVersion the patch itself names pins the write: the one read here
        # would turn every status update by a controller in between into a 409.
        return self._set_replicas(target, patches.applier(ptype, None, patch)(current),
                                  patches.resource_version_of(ptype, patch))

    def _set_replicas(self, target, scale, client_rv=False):
        causes = validate_scale(scale)
        if causes:
            raise invalid(target, causes)
        named = (scale.get("metadata") or {}).get("name") if isinstance(scale.get("metadata"), dict) else None
        if named not in (None, target.name):
            raise ApiError(400, "metadata.name %r does not match the name in the URL %r" % (named, target.name))
        replicas = scale["spec"]["replicas"]
        if client_rv is False:      # a PUT: the body's resourceVersion, if any
            client_rv = (scale.get("metadata") or {}).get("resourceVersion") \
                if isinstance(scale.get("metadata"), dict) else None
        main = Target(target.info.api_version, target.namespace, target.plural, target.name)

        def change(current):
            new = copy.deepcopy(current)
            new.setdefault("spec", {})["replicas"] = replicas
            return new
        obj, _ = self._read_modify_write(main, change, client_rv, managed="scale")
        return json_response(self._scale_of(obj), 200)

    # ---- checks ----

    def _checked_body(self, target, obj):
        info = target.info
        if obj.get("kind", info.kind) != info.kind:
            raise ApiError(400, "kind %r does not match the URL, which is for %s" % (obj.get("kind"), info.kind))
        if obj.get("apiVersion", info.api_version) != info.api_version:
            raise ApiError(400, "apiVersion %r does not match the URL: %s are %s"
                           % (obj.get("apiVersion"), target.plural, info.api_version))
        obj = dict({"apiVersion": info.api_version, "kind": info.kind}, **obj)
        obj.update(apiVersion=info.api_version, kind=info.kind)
        meta = obj.get("metadata")
        if meta is None:
            meta = {}
        if not isinstance(meta, dict):
            raise invalid(target, [("metadata", "must be an object")])
        meta = dict(meta)
        if info.namespaced:
            body_ns = meta.get("namespace")
            if body_ns not in (None, "", target.namespace):
                raise ApiError(400, "the namespace of the object (%s) does not match the namespace of the "
                               "URL (%s)" % (body_ns, target.namespace))
            meta["namespace"] = target.namespace
        elif meta.get("namespace"):
            raise ApiError(400, "%s are cluster-scoped: remove metadata.namespace" % target.plural)
        obj["metadata"] = meta
        return obj

    def _defaulted_valid(self, target, obj, current=None):
        causes = _new_causes(target, validate_object(target.plural, obj), current)
        if causes:
            raise invalid(target, causes, obj)
        # Defaults only fill in valid values (tests/unit/test_model_validation checks that
        # defaulted objects stay valid), so one validation pass is enough.
        return apply_defaults(target.plural, obj)


def _new_causes(target, causes, current):
    """`causes` less those the stored object `current` has already (a rule newer than what
    it stores): an update that leaves such a value as it is goes through, as Kubernetes
    ratchets validation, instead of freezing the object (an agent's every status post).
    Not for the name: a name the rules refuse is one no update may keep (the built-in
    ClusterRoles, served but never stored, are read-only through it)."""
    if not causes or current is None:
        return causes
    known = {c for c in validate_object(target.plural, current) if c.field != "metadata.name"}
    return [c for c in causes if c not in known]


def _managed_as(obj, applied):
    """`obj` (the defaulted object an apply creates) with the managedFields of `applied`."""
    obj["metadata"]["managedFields"] = applied["metadata"]["managedFields"]
    return obj


def _check_write_options():
    """Refuse bad dryRun/fieldValidation/fieldManager values before any work (422, as Kubernetes)."""
    if request.method in ("POST", "PUT", "PATCH", "DELETE"):
        dry_run.requested()
        if request.method != "DELETE":
            field_validation()
            field_manager(required=False)


def invalid(target, causes, obj=None):
    causes = [{"field": c[0], "message": c[1]} for c in causes]
    name = target.name or (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else target.name
    message = "%s %r is invalid: %s" % (target.info.kind, name,
                                        "; ".join("%s: %s" % (c["field"], c["message"]) for c in causes))
    return ApiError(422, message, "Invalid", details={"kind": target.plural, "name": target.name,
                                                      "causes": causes})


def selectors(target):
    try:
        return (parse_label_selector(request.args.get("labelSelector")),
                parse_field_selector(request.args.get("fieldSelector"), target.plural))
    except SelectorError as exc:
        raise ApiError(400, str(exc))
