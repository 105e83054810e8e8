"""The replicated state machine: every replica applies the same commands in the
same order and must end in the same state.

Pure by rule: no I/O, no clock, no randomness, no threads. Everything
non-deterministic (uid, timestamps, defaults) is computed by the caller before
the command is submitted. Outcomes (conflict, not found, fenced) are returned as
values, identical on every replica; `apply` never raises, because an exception
here would stall PySyncObj's apply loop on every replica forever.

Stored objects are never mutated in place (copy on write), so readers may hold
references to them outside the store lock.

Commands and ops (plain dicts, pickled into the Raft log) are built by
store/commands.py, which documents them; `apply` checks a command's shape there
first and refuses a malformed one with that message (a value, like every outcome).
Parts of it live beside it as mixins or pure rules: pod CIDRs (pod_cidrs.py), the
namespace lifecycle (namespace_lifecycle.py), what may happen to finalizers of an
object being deleted (finalizer_rules.py), a pod's grace period (grace_periods.py).
"""
import collections
import copy
import hashlib
import json

from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.service_network import DEFAULT_SERVICE_CIDR, parse_service_cidr

from .commands import LIFECYCLE_FORMAT, shape_error
from .encoded_objects import EncodedBucket, EncodedObjects, as_objects, encode
from .finalizer_rules import finalizer_verdict
from .grace_periods import grace_seconds, terminating_metadata
from .idempotency import DEFAULT_DEDUP_LIMIT, KEY_REUSED, SERVER_KEY_LIMIT, Idempotency  # noqa: F401 - names kept here too
from .namespace_lifecycle import NamespaceLifecycle, namespace_update
from .object_reads import ObjectReads
from .owner_mentions import OwnerMentions
from .pod_cidrs import PodCIDRs
from .server_metadata import as_mapping, with_server_metadata
from .service_allocation import AllocationError, allocate


ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

FOREGROUND_FINALIZER = "foregroundDeletion"


class Change(collections.namedtuple("Change", "revision type resource object previous")):
    """One applied mutation, fed to the replica's watch log."""


class _Failure(Exception):
    """A business outcome that aborts the current atomic write."""

    def __init__(self, code, reason, message, index=None, details=None):
        super().__init__(message)
        self.code, self.reason, self.message, self.index = code, reason, message, index
        self.details = details


def _failure(code, reason, message, index=None, details=None):
    failure = {"ok": False, "code": code, "reason": reason, "message": message, "index": index}
    if details:
        failure["details"] = details
    return failure


def _key(namespace, name):
    return (namespace or "", name)


def describe_object(resource, namespace, name):
    """How messages name an object: 'pods "web" in namespace team' (dry runs say it alike)."""
    where = " in namespace %s" % namespace if namespace else ""
    return '%s "%s"%s' % (resource, name, where)


class StoreFSM(PodCIDRs, NamespaceLifecycle, ObjectReads, Idempotency):
    # Set by a service_network command; a class attribute, so a snapshot taken before
    # the command existed still reads the default.
    service_cidr = DEFAULT_SERVICE_CIDR

    def __init__(self, dedup_limit=DEFAULT_DEDUP_LIMIT, server_key_limit=SERVER_KEY_LIMIT):
        # Each object as its compressed JSON (store/encoded_objects.py); reads decode a copy.
        self.objects = EncodedObjects({plural: EncodedBucket() for plural in RESOURCES})
        self.revision = 0
        self.epoch = [0, ""]          # highest controller claim: [raft term, replica id]
        self.fenced_rejections = 0    # controller writes refused for a stale epoch
        self.malformed_commands = 0
        self._init_idempotency(dedup_limit, server_key_limit)       # store/idempotency.py
        self.members = {}             # replica id -> {"id", "raft", "api"} (store/membership.py)
        self._mentions = OwnerMentions()   # who names which owner uid (store/owner_mentions.py)

    # ---- reads (callers hold the replica's store lock; get, list, count: ObjectReads) ----

    def digest(self):
        """Hash of the whole state: equal on replicas that applied the same log."""
        h = hashlib.sha256()
        h.update(str(self.revision).encode())
        for plural in sorted(self.objects):
            for key in sorted(self.objects[plural]):
                h.update(json.dumps(self.objects[plural][key], sort_keys=True).encode())
        if self.network is not None:
            h.update(json.dumps(self.network, sort_keys=True).encode())
        if getattr(self, "members", None):
            h.update(json.dumps(self.members, sort_keys=True).encode())
        return h.hexdigest()

    # ---- apply ----

    def apply(self, command):
        """Apply one command and return its result (a dict)."""
        return self.apply_with_changes(command)[0]

    def apply_with_changes(self, command):
        """Apply one command; return (result, [Change, ...]). Never raises."""
        changes = []
        try:
            error = shape_error(command)
            if error is None:
                return getattr(self, "_apply_" + command["type"])(command, changes), changes
        except Exception as exc:  # a bug or a command the shape check let through: refuse it, keep going
            del changes[:]
            error = "%s: %s" % (type(exc).__name__, exc)
        self.malformed_commands += 1
        return _failure(400, "BadRequest", "malformed command refused by the store: %s" % error), changes

    def _apply_barrier(self, command, changes):
        return {"ok": True, "revision": self.revision}

    def _apply_members(self, command, changes):
        # Not an object: no revision, no watch event. A dump from before the table has none.
        members = dict(getattr(self, "members", None) or {})
        for ident in command["remove"]:
            members.pop(ident, None)
        for entry in command["set"]:
            members = {k: v for k, v in members.items() if v["raft"] != entry["raft"]}
            members[entry["id"]] = {"id": entry["id"], "raft": entry["raft"], "api": entry.get("api")}
        self.members = members
        return {"ok": True, "revision": self.revision, "members": sorted(members)}

    def _apply_claim(self, command, changes):
        term, replica = int(command["term"]), str(command["replica"])
        if [term, replica] == self.epoch:
            return {"ok": True, "epoch": list(self.epoch)}
        if term <= self.epoch[0]:
            return _failure(409, "Fenced", "claim for term %d is older than epoch term %d"
                            % (term, self.epoch[0]))
        self.epoch = [term, replica]
        return {"ok": True, "epoch": list(self.epoch)}

    def _apply_service_network(self, command, changes):
        """The leader's --service-cidr (fenced like a controller write). Services keep
        the addresses they have; new ones come from the new range."""
        epoch = command.get("epoch")
        if epoch is not None and list(epoch) != self.epoch:
            self.fenced_rejections += 1
            return _failure(409, "Fenced", "service network from controller epoch %s refused: current epoch is %s"
                            % (list(epoch), self.epoch))
        cidr = str(parse_service_cidr(command["cidr"]))
        changed, self.service_cidr = cidr != self.service_cidr, cidr
        return {"ok": True, "cidr": cidr, "changed": changed}

    def _apply_group(self, command, changes):
        if not isinstance(command["commands"], list):
            raise ValueError("a group needs a list of commands")
        results = []
        for sub in command["commands"]:
            result, sub_changes = self.apply_with_changes(sub)
            changes.extend(sub_changes)
            results.append(result)
        return {"ok": True, "results": results}

    def _apply_write(self, command, changes):
        key, digest = command.get("key"), command.get("digest")
        remembered = None if key is None else self.remembered(key)
        if remembered is not None:
            if digest is not None and self._remembered_digest(remembered) not in (None, digest):
                return _failure(422, "Invalid", KEY_REUSED)
            return self._replay(remembered)
        epoch = command.get("epoch")
        if epoch is not None and list(epoch) != self.epoch:
            self.fenced_rejections += 1
            result = _failure(409, "Fenced", "write from controller epoch %s refused: current epoch is %s"
                              % (list(epoch), self.epoch))
        else:
            result = self._write_atomically(command["ops"], changes, command.get("version", 1))
        if key is not None:
            self._remember(key, result, digest)
        return result

    def _write_atomically(self, ops, changes, version=1):
        if not isinstance(ops, list) or not ops:
            raise ValueError("a write needs a non-empty list of ops")
        staged = {}           # (resource, key) -> new object or None (deleted)
        planned = []
        results = []
        try:
            for index, op in enumerate(ops):
                handler = getattr(self, "_op_" + str(op.get("op")), None)
                if handler is None:
                    raise ValueError("unknown op %r" % (op.get("op"),))
                results.append(handler(op, staged, planned, index, version))
            if self._frees_a_block(planned):
                self._stage_waiting_nodes(staged, planned)
        except _Failure as f:
            return _failure(f.code, f.reason, f.message, f.index, f.details)
        self._commit(planned, changes)
        return {"ok": True, "results": results, "revision": self.revision}

    def _commit(self, planned, changes):
        """Nothing has been touched yet: commit the plan in order. Each object is stored as
        its compressed JSON, and its change carries those bytes (the change stream sends them
        as they are); a DELETED change carries the object as deleted, encoded."""
        # Encoded before anything changes: an object that is not JSON refuses the whole write.
        encoded = [encode(change.object or change.previous) for change in planned]
        try:
            self._commit_encoded(planned, encoded, changes)
        except BaseException:
            self._mentions = None       # it may have seen half of this: rebuilt when next needed
            raise

    def _commit_encoded(self, planned, encoded, changes):
        for change, data in zip(planned, encoded):
            # setdefault: a snapshot written before a kind existed has no bucket for it.
            bucket = self.objects.setdefault(change.resource, {})
            meta = (change.object or change.previous)["metadata"]
            key = _key(meta.get("namespace"), meta["name"])
            self.revision = change.revision
            self._track_pod_cidr(change)
            # What the bucket holds is the version this change replaces or deletes (the
            # plan commits in order), already encoded.
            replaced = bucket.raw(key)
            if change.type == DELETED:
                bucket.raw_dict().pop(key, None)
                changes.append(change._replace(previous=data))
                self._note_mentions(change.resource, key, change.previous, replaced, None, None)
            else:
                bucket.raw_dict()[key] = data
                changes.append(change._replace(object=data,
                                               previous=replaced if change.previous is not None else None))
                self._note_mentions(change.resource, key, change.previous, replaced, change.object, data)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_shared", None)        # an interner, in dumps of versions that had one
        state.pop("_mentions", None)      # derived: rebuilt as the dump loads
        state["objects"] = self.objects.raw_state()
        return state

    def dump_state(self):
        """What __getstate__ gives, in containers of its own: applies that follow do not
        change it, so a thread may pickle it while the store moves on (pysyncobj_overrides/
        dump_writer.py). Stored objects are immutable bytes and an idempotency entry is
        never changed once remembered: their containers are copied, not they."""
        state = self.__getstate__()
        for name, value in state.items():
            if name == "objects":
                state[name] = {resource: dict(raw) for resource, raw in value.items()}
            elif name in ("dedup", "server_dedup"):
                state[name] = collections.OrderedDict(value)
            else:
                state[name] = copy.deepcopy(value)      # a few small values
        return state

    def __setstate__(self, state):
        state.pop("_shared", None)
        self.__dict__.update(state)
        # A dump of a version that kept dicts is encoded as it loads.
        self.objects = as_objects(state.get("objects", {}))
        self._mentions = OwnerMentions.of_stored(self.objects)
        self._loaded()      # store/idempotency.py: this version's bounds and tables

    # ---- ops: plan a change against the store plus what this write staged ----

    def _current(self, staged, resource, namespace, name):
        skey = (resource, _key(namespace, name))
        if skey in staged:
            return staged[skey]
        return self.get(resource, namespace, name)

    def _next_revision(self, planned):
        return self.revision + len(planned) + 1

    def _stage(self, staged, planned, change):
        obj = change.object or change.previous
        meta = obj["metadata"]
        staged[(change.resource, _key(meta.get("namespace"), meta["name"]))] = change.object
        planned.append(change)

    @staticmethod
    def _check_precondition(op, current, index, resource, namespace, name):
        pre = op.get("precondition") or {}
        want_rv = pre.get("resourceVersion")
        have_rv = current["metadata"].get("resourceVersion")
        if want_rv not in (None, "") and str(want_rv) != have_rv:
            raise _Failure(409, "Conflict", "%s was modified (resourceVersion %s, you sent %s); "
                           "read it again and re-apply your change"
                           % (describe_object(resource, namespace, name), have_rv, want_rv), index)
        want_uid = pre.get("uid")
        if want_uid not in (None, "") and want_uid != current["metadata"].get("uid"):
            raise _Failure(409, "Conflict", "%s has uid %s, not %s: it was deleted and re-created"
                           % (describe_object(resource, namespace, name), current["metadata"].get("uid"),
                              want_uid), index)

    def _op_create(self, op, staged, planned, index, version):
        resource = op["resource"]
        info = RESOURCES[resource]
        # The command was unpickled from the log for this apply: shallow copies suffice.
        obj = dict(op["object"])
        meta = obj["metadata"] = dict(obj["metadata"])
        name, namespace = meta["name"], meta.get("namespace") if info.namespaced else None
        if info.namespaced:
            if not namespace:
                raise ValueError("namespaced create without metadata.namespace")
            ns = self._current(staged, "namespaces", None, namespace)
            if ns is None:
                raise _Failure(404, "NotFound", 'namespace "%s" not found: create it first '
                               '(sheepctl create namespace %s)' % (namespace, namespace), index)
            self._checked(self._content_refusal(ns, resource, name, version), index)
        else:
            meta.pop("namespace", None)
        if self._current(staged, resource, namespace, name) is not None:
            raise _Failure(409, "AlreadyExists", "%s already exists: pick another name, or "
                           "update it (sheepctl apply)" % describe_object(resource, namespace, name), index)
        if resource == "nodes":
            obj = self._checked(self._pod_cidr_for_create(obj, staged), index)
        if resource == "services":
            obj = self._allocate_service(obj, None, staged, index)
        revision = self._next_revision(planned)
        obj["metadata"]["resourceVersion"] = str(revision)
        obj["metadata"]["generation"] = 1
        self._stage(staged, planned, Change(revision, ADDED, resource, obj, None))
        return {"code": 201, "resource": resource, "object": obj}

    def _existing(self, op, staged, index):
        """(resource, namespace, name, current object) of an update or delete, after
        checking that the object exists and its preconditions hold."""
        resource, namespace, name = op["resource"], op.get("namespace"), op["name"]
        namespace = namespace if RESOURCES[resource].namespaced else None
        current = self._current(staged, resource, namespace, name)
        if current is None:
            raise _Failure(404, "NotFound", "%s not found" % describe_object(resource, namespace, name), index)
        self._check_precondition(op, current, index, resource, namespace, name)
        return resource, namespace, name, current

    def _op_update(self, op, staged, planned, index, version):
        resource, namespace, name, current = self._existing(op, staged, index)
        info = RESOURCES[resource]
        incoming = op["object"]
        if op.get("subresource") == "status":
            obj = dict(current)
            obj["status"] = incoming.get("status")
        elif op.get("subresource") == "binding":
            obj = self._checked(_bound(current, incoming, namespace, name), index)
        elif op.get("subresource") == "finalize":
            obj = dict(current, spec=dict(as_mapping(current.get("spec")),
                                          finalizers=list(incoming["spec"]["finalizers"])))
        elif resource == "namespaces" and version >= LIFECYCLE_FORMAT:
            # Kubernetes' namespace update strategy: spec.finalizers only through finalize,
            # the status (phase, what a deletion waits for) only through the store's own writes.
            obj = namespace_update(incoming, current, name)
        else:
            obj = with_server_metadata(incoming, current, name, namespace)
            if info.has_status:
                if "status" in current:
                    obj["status"] = current["status"]
                else:
                    obj.pop("status", None)
        if resource == "nodes" and op.get("subresource") != "status":
            obj = self._checked(self._pod_cidr_for_update(obj, current, staged), index)
        if resource == "services" and op.get("subresource") != "status":
            obj = self._allocate_service(obj, current, staged, index)
        if _same_content(obj, current):
            return {"code": 200, "resource": resource, "object": current, "unchanged": True}
        refusal, completes = finalizer_verdict(resource, describe_object(resource, namespace, name), current, obj,
                                                version)
        if refusal:
            raise _Failure(422, "Invalid", refusal, index)
        if completes:
            # The last finalizer is gone: the deletion completes now (a namespace's with
            # whatever is still in it, so no object outlives its namespace).
            if resource == "namespaces":
                self._delete_namespace_contents(name, staged, planned)
            return {"code": 200, "resource": resource,
                    "object": self._plan_delete(resource, current, staged, planned), "deleted": True}
        obj["metadata"] = dict(obj["metadata"])
        if _spec_changed(obj, current):
            obj["metadata"]["generation"] = current["metadata"].get("generation", 1) + 1
        revision = self._next_revision(planned)
        obj["metadata"]["resourceVersion"] = str(revision)
        self._stage(staged, planned, Change(revision, MODIFIED, resource, obj, current))
        return {"code": 200, "resource": resource, "object": obj}

    @staticmethod
    def _checked(outcome, index):
        """An outcome, or a (code, reason, message[, details]) refusal raised as a failure
        of op `index`."""
        if isinstance(outcome, tuple):
            raise _Failure(outcome[0], outcome[1], outcome[2], index, outcome[3] if len(outcome) > 3 else None)
        return outcome

    def _stage_node_update(self, current, new, staged, planned):
        """A Node change the store makes itself (a pod CIDR given), as a MODIFIED change."""
        revision = self._next_revision(planned)
        new["metadata"] = dict(current["metadata"], resourceVersion=str(revision),
                               generation=current["metadata"].get("generation", 1) + 1)
        self._stage(staged, planned, Change(revision, MODIFIED, "nodes", new, current))

    def _allocate_service(self, obj, current, staged, index):
        """The Service with its cluster IP and node ports (store/service_allocation.py)."""
        meta = obj["metadata"]
        me = _key(meta.get("namespace"), meta["name"])
        others = {k: v for k, v in self.objects.get("services", {}).items() if k != me}
        for (resource, key), staged_obj in staged.items():
            if resource == "services" and key != me:
                if staged_obj is None:
                    others.pop(key, None)
                else:
                    others[key] = staged_obj
        try:
            return allocate(obj, current, others.values(), parse_service_cidr(self.service_cidr))
        except AllocationError as exc:
            raise _Failure(422, "Invalid", 'Service "%s" is invalid: %s: %s' % (meta["name"], exc.field, exc.message),
                           index)

    def _op_delete(self, op, staged, planned, index, version):
        resource, namespace, name, current = self._existing(op, staged, index)
        graceful = op.get("graceful")
        if graceful and resource == "pods" and (current.get("spec") or {}).get("nodeName"):
            seconds = grace_seconds(graceful, current)
            if seconds > 0:
                return self._mark_terminating(current, graceful["deletionTimestamp"], seconds, version,
                                              staged, planned)
        if resource == "namespaces":
            if op.get("terminate"):
                return self._checked(self._terminate_namespace(current, op, staged, planned), index)
            self._delete_namespace_contents(name, staged, planned)      # logged by version 1 or 2
        elif op.get("propagationPolicy") == "Orphan":
            self._orphan_dependents(current, staged, planned)
        finalizers = list(current["metadata"].get("finalizers") or [])
        if op.get("propagationPolicy") == "Foreground" and resource != "namespaces" \
                and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        if finalizers:
            return self._mark_finalizing(resource, current, finalizers, op, staged, planned)
        return {"code": 200, "resource": resource,
                "object": self._plan_delete(resource, current, staged, planned)}

    def _mark_finalizing(self, resource, current, finalizers, op, staged, planned):
        """An object with finalizers is only marked deleted (deletionTimestamp); it goes
        when an update removes its last finalizer (the garbage collector removes
        foregroundDeletion once the dependents are gone)."""
        meta = current["metadata"]
        if meta.get("deletionTimestamp") and list(meta.get("finalizers") or []) == finalizers:
            return {"code": 200, "resource": resource, "object": current, "unchanged": True}
        # The time comes with the command (the FSM reads no clock); commands logged before
        # deletes carried one fall back to the creation time, the same on every replica.
        stamp = (meta.get("deletionTimestamp") or op.get("deletionTimestamp")
                 or (op.get("graceful") or {}).get("deletionTimestamp") or meta.get("creationTimestamp"))
        revision = self._next_revision(planned)
        obj = dict(current, metadata=dict(meta, resourceVersion=str(revision), deletionTimestamp=stamp,
                                          finalizers=finalizers))
        self._stage(staged, planned, Change(revision, MODIFIED, resource, obj, current))
        return {"code": 200, "resource": resource, "object": obj, "finalizing": True}

    def _stage_modified(self, resource, current, obj, staged, planned):
        """`obj`, the store's own change of `current`, staged at the next revision."""
        revision = self._next_revision(planned)
        obj = dict(obj, metadata=dict(obj["metadata"], resourceVersion=str(revision)))
        self._stage(staged, planned, Change(revision, MODIFIED, resource, obj, current))
        return obj

    def _plan_delete(self, resource, current, staged, planned):
        revision = self._next_revision(planned)
        gone = dict(current)
        gone["metadata"] = dict(current["metadata"], resourceVersion=str(revision))
        self._stage(staged, planned, Change(revision, DELETED, resource, None, gone))
        return gone

    def _mark_terminating(self, current, timestamp, seconds, version, staged, planned):
        """Graceful deletion of a pod on a node: mark it (store/grace_periods.py) and leave
        it to the node's agent, which stops its containers and then deletes the pod for
        good. A second graceful delete may only shorten the grace period."""
        new_meta = terminating_metadata(current["metadata"], timestamp, seconds, version)
        if new_meta is None:
            return {"code": 200, "resource": "pods", "object": current, "unchanged": True}
        revision = self._next_revision(planned)
        obj = dict(current, metadata=dict(new_meta, resourceVersion=str(revision)))
        self._stage(staged, planned, Change(revision, MODIFIED, "pods", obj, current))
        return {"code": 200, "resource": "pods", "object": obj, "terminating": True}

    def _orphan_dependents(self, owner, staged, planned):
        """Delete with propagationPolicy Orphan: dependents lose their reference to the
        owner in the same atomic write, so garbage collection never sees them as orphaned
        by a deleted owner. Dependents live in the owner's namespace."""
        uid = owner["metadata"].get("uid")
        namespace = owner["metadata"].get("namespace") or ""
        # Only an object whose ownerReferences hold the uid can refer to the owner: a
        # namespace of 30,000 pods is not decoded to find a few (a version staged by this
        # write is read whole).
        if self._mentions is None:
            self._mentions = OwnerMentions.of_stored(self.objects)
        mentioned = self._mentions.naming(uid) if isinstance(uid, str) else None
        for plural, info in RESOURCES.items():
            if not info.namespaced:
                continue
            bucket = self.objects.get(plural, {})
            for (ns, name) in list(bucket):
                if ns != namespace:
                    continue
                if mentioned is not None and (plural, (ns, name)) not in mentioned \
                        and (plural, (ns, name)) not in staged:
                    continue
                current = self._current(staged, plural, ns, name)
                refs = (current or {}).get("metadata", {}).get("ownerReferences") or []
                kept = [r for r in refs if not (isinstance(r, dict) and r.get("uid") == uid)]
                if current is None or len(kept) == len(refs):
                    continue
                revision = self._next_revision(planned)
                meta = dict(current["metadata"], resourceVersion=str(revision))
                if kept:
                    meta["ownerReferences"] = kept
                else:
                    meta.pop("ownerReferences", None)
                self._stage(staged, planned, Change(revision, MODIFIED, plural, dict(current, metadata=meta), current))

    def reindex(self):
        """Objects were put into the buckets directly (cli/restore.py): the index of
        ownerReferences is rebuilt when next needed."""
        self._mentions = None

    def _note_mentions(self, *change):
        if self._mentions is not None:
            self._mentions.note(*change)


def _same_content(a, b):
    """Equal apart from resourceVersion: such an update changes nothing."""
    if a.keys() != b.keys():
        return False
    for k in a:
        if k == "metadata":
            ma = {x: y for x, y in a[k].items() if x != "resourceVersion"}
            mb = {x: y for x, y in b[k].items() if x != "resourceVersion"}
            if ma != mb:
                return False
        elif a[k] != b[k]:
            return False
    return True


def _bound(current, binding, namespace, name):
    """The pod `current` assigned to binding's node with binding's status, or a refusal
    (as Kubernetes' pods/binding: an assigned or terminating pod is not bound again)."""
    meta, spec = current["metadata"], current.get("spec")
    if not isinstance(spec, (dict, type(None))):
        return 422, "Invalid", "pod %s/%s cannot be bound: its spec is not a mapping" % (namespace, name)
    assigned = (spec or {}).get("nodeName")
    if assigned:
        return 409, "Conflict", "pod %s/%s is already assigned to node %s" % (namespace, name, assigned)
    if meta.get("deletionTimestamp"):
        return 409, "Conflict", "pod %s/%s is being deleted, cannot be assigned to a node" % (namespace, name)
    obj = dict(current)
    obj["spec"] = dict(spec or {}, nodeName=binding["spec"]["nodeName"])
    if binding.get("status") is not None:
        obj["status"] = binding["status"]
    return obj


def _spec_changed(new, old):
    """Generation follows the desired state: everything but metadata and status."""
    keys = (set(new) | set(old)) - {"metadata", "status", "apiVersion", "kind"}
    return any(new.get(k) != old.get(k) for k in keys)
