"""Stored objects compressed one by one against a dictionary of their kind
(store/object_compression.py, store/compression_dictionaries.py)."""
import copy
import hashlib
import pickle

import orjson
import pytest

from shepherd_ha.store import object_compression
from shepherd_ha.store.compression_dictionaries import DICTIONARIES, FOR_ANY_KIND
from shepherd_ha.store.encoded_objects import EncodedBucket, decode, encode, json_of
from shepherd_ha.store.fsm import StoreFSM

from test_fsm import create, ns, update

# A released dictionary is part of the stored format: dumps and snapshots hold objects
# compressed against it. If this fails, put the dictionary back and add the new one
# under a new id.
RELEASED = {
    1: "44ba59df8ad311adc103924fd1fdeec5736a502c4f6fa8fb99f2d4e573823424",
    2: "22db7aa16cb399525116b6c7498d68a2b99a633386c9766b92af68ab2ea38ab3",
    3: "eb99bfec48f5b012e84c03f94de652770856bf3ccb033ab1e5ed02cafe644913",
    4: "81bd29b3f500d6d1fd5b8eb29a2c05ae990b18b67887e744e2293f3a1c1b4135",
    5: "07a2f4875e6102ea4e8a9e938b95ecd7143cb60b90653799a3a7a9764fbc6083",
    6: "3d2e30c18bf7411fd47ad3a426e061771804f03d386b72be6475e147cfc26f8a",
    7: "cfc087fbb83520b1ea9438b3c1d578e9bd7da4f6751b181634c9f7d4179f4df3",
    8: "aca79e3fe260f0d051acce2212d39aa705a74f45c9bb7bb3d0c4cd38e4f1f51f",
    9: "dbfac5250df83d8fb1062fa6cc39760dcc03182efd45bd4d8c274ee172d319a7",
}


def fleet_pod(i):
    """A pod as a Deployment's pods are stored, running on a node (not the dictionary's)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"namespace": "shop", "labels": {"app": "cart", "pod-template-hash": "6f7c9d8b4"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                              "name": "cart-6f7c9d8b4", "uid": "3f1e9d2c-0a4b-4c6d-8e7f-1a2b3c4d5e6f",
                                              "controller": True, "blockOwnerDeletion": True}],
                         "name": "cart-6f7c9d8b4-%05d" % i, "uid": "9c%06d-7d1e-4f2a-9b3c-4d5e6f7a8b9c" % i,
                         "creationTimestamp": "2026-12-04T11:38:50Z", "generation": 2,
                         "resourceVersion": str(9000 + i)},
            "spec": {"containers": [{"name": "cart", "image": "shop/cart:2.3.1",
                                     "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                                     "imagePullPolicy": "IfNotPresent"}],
                     "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
                     "nodeName": "worker-%03d" % (i % 97)},
            "status": {"phase": "Running",
                       "conditions": [{"type": "PodScheduled", "status": "True",
                                       "lastTransitionTime": "2026-12-04T11:38:58Z"},
                                      {"type": "Ready", "status": "True", "lastProbeTime": None,
                                       "lastTransitionTime": "2026-12-04T11:38:59Z"}],
                       "podIP": "10.64.%d.%d" % (i % 97, i % 250 + 2), "hostIP": "10.200.0.%d" % (i % 97),
                       "startTime": "2026-12-04T11:38:58Z",
                       "containerStatuses": [{"name": "cart", "image": "shop/cart:2.3.1", "imageID": "", "ready": True,
                                              "restartCount": 0,
                                              "state": {"running": {"startedAt": "2026-12-04T11:38:59Z"}},
                                              "containerID": "docker://%064x" % i, "started": True}]}}


def test_released_dictionaries_never_change():
    assert set(RELEASED) <= set(DICTIONARIES), "a released dictionary was removed: older dumps need it"
    for ident, digest in RELEASED.items():
        assert hashlib.sha256(DICTIONARIES[ident][1]).hexdigest() == digest, \
            "dictionary %d changed: put it back, and add the new one under a new id" % ident
    kinds = [kind for kinds, _ in DICTIONARIES.values() for kind in kinds]
    assert len(kinds) == len(set(kinds)), "one dictionary per kind"
    assert DICTIONARIES[FOR_ANY_KIND][0] == ()


def test_a_pod_is_stored_several_times_smaller_and_reads_back_equal():
    obj = fleet_pod(7)
    data = encode(obj)
    plain = orjson.dumps(obj)
    assert object_compression.is_compressed(data) and data[1] == 2          # the Pod dictionary
    assert len(data) * 4 < len(plain), (len(data), len(plain))
    assert decode(data) == obj and json_of(data) == plain


@pytest.mark.parametrize("ident", sorted(DICTIONARIES))
def test_every_kind_round_trips_through_its_dictionary(ident):
    kinds, dictionary = DICTIONARIES[ident]
    sample = orjson.loads(dictionary)            # the typical object itself, changed a little
    sample["metadata"]["name"] = "other-%d" % ident
    sample["kind"] = kinds[0] if kinds else "ConfigMap"
    data = encode(sample)
    assert object_compression.is_compressed(data) and data[1] == ident
    assert decode(data) == sample


def test_a_kind_without_a_dictionary_uses_the_common_one_and_a_tiny_object_stays_json():
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default",
                                                                 "uid": "u-1", "resourceVersion": "3"},
              "data": {"k": "dmFsdWU="}}
    data = encode(secret)
    assert data[:2] == b"\x00" + bytes([FOR_ANY_KIND]) and decode(data) == secret
    tiny = {"kind": "X"}
    assert encode(tiny) == b'{"kind":"X"}'       # compressing would not make it smaller


def test_plain_json_of_an_older_version_still_reads():
    obj = fleet_pod(1)
    bucket = EncodedBucket({("shop", obj["metadata"]["name"]): orjson.dumps(obj)})
    assert bucket[("shop", obj["metadata"]["name"])] == obj


def test_an_integer_past_64_bits_survives_compression():
    obj = fleet_pod(2)
    obj["spec"]["activeDeadlineSeconds"] = 2 ** 70 + 1
    data = encode(obj)
    assert object_compression.is_compressed(data)
    assert decode(data)["spec"]["activeDeadlineSeconds"] == 2 ** 70 + 1


def test_an_unknown_dictionary_names_the_newer_version():
    data = encode(fleet_pod(3))
    newer = data[:1] + bytes([250]) + data[2:]
    with pytest.raises(ValueError, match="dictionary 250.*newer version"):
        decode(newer)


def test_damage_and_a_wrong_dictionary_are_errors_never_a_wrong_object():
    data = encode(fleet_pod(4))
    flipped = data[:40] + bytes([data[40] ^ 0x55]) + data[41:]
    wrong_dictionary = data[:1] + bytes([3]) + data[2:]          # the Node dictionary
    for bad in (flipped, wrong_dictionary, data[:-3], data + b"x"):
        with pytest.raises(ValueError, match="damaged|truncated"):
            decode(bad)


def test_the_store_compresses_what_it_keeps_and_its_digest_is_the_same_as_from_plain_json():
    fsm = StoreFSM()
    fsm.apply(create("namespaces", ns("shop")))
    for i in range(20):
        assert fsm.apply(create("pods", fleet_pod(i)))["ok"]
    assert fsm.apply(update("pods", dict(fleet_pod(3), status={"phase": "Failed"}), sub="status"))["ok"]
    stored = fsm.objects["pods"].raw_dict()
    assert all(object_compression.is_compressed(data) for data in stored.values())
    # The same objects as an older version kept them (plain JSON) give the same digest.
    state = fsm.__getstate__()
    older = dict(state, objects={r: {k: json_of(v) for k, v in b.items()} for r, b in state["objects"].items()})
    loaded = StoreFSM.__new__(StoreFSM)
    loaded.__setstate__(copy.deepcopy(older))
    assert loaded.digest() == fsm.digest()
    # And a dump of the compressed store loads to the same state.
    assert pickle.loads(pickle.dumps(fsm)).digest() == fsm.digest()


def test_a_kind_that_is_not_a_string_and_a_lone_mark_are_handled():
    odd = {"kind": ["Pod"], "metadata": {"name": "x" * 40, "namespace": "default", "uid": "u" * 36}}
    data = encode(odd)
    assert data[1] == FOR_ANY_KIND and decode(data) == odd
    for short in (b"\x00", b"\x00\x02"):
        with pytest.raises(ValueError, match="truncated"):
            decode(short)


def test_a_dump_holding_a_dictionary_this_version_lacks_is_refused_as_it_loads():
    fsm = StoreFSM()
    fsm.apply(create("namespaces", ns("shop")))
    fsm.apply(create("pods", fleet_pod(1)))
    state = fsm.__getstate__()
    pods = dict(state["objects"]["pods"])
    key = next(iter(pods))
    pods[key] = pods[key][:1] + bytes([250]) + pods[key][2:]
    loaded = StoreFSM.__new__(StoreFSM)
    with pytest.raises(ValueError, match="dictionary 250.*newer version"):
        loaded.__setstate__(dict(state, objects=dict(state["objects"], pods=pods)))


def test_plain_json_from_an_older_dump_is_compressed_as_it_loads():
    fsm = StoreFSM()
    fsm.apply(create("namespaces", ns("shop")))
    fsm.apply(create("pods", fleet_pod(1)))
    state = fsm.__getstate__()
    older = dict(state, objects={r: {k: json_of(v) for k, v in b.items()} for r, b in state["objects"].items()})
    loaded = StoreFSM.__new__(StoreFSM)
    loaded.__setstate__(older)
    stored = next(iter(loaded.objects["pods"].raw_values()))
    name = fleet_pod(1)["metadata"]["name"]
    assert object_compression.is_compressed(stored) and stored[1] == 2
    assert decode(stored) == fsm.get("pods", "shop", name)
    assert loaded.digest() == fsm.digest()


def _owner(name, uid):
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": name, "namespace": "shop", "uid": uid}, "spec": {}}


def _orphan_delete(name):
    from test_fsm import delete
    command = delete("replicasets", name, "shop")
    command["ops"][0]["propagationPolicy"] = "Orphan"
    return command


def test_an_orphan_delete_reads_only_the_objects_that_refer_to_the_owner(monkeypatch):
    fsm = StoreFSM()
    fsm.apply(create("namespaces", ns("shop")))
    for i in range(300):                               # the namespace's other pods
        assert fsm.apply(create("pods", fleet_pod(i)))["ok"]
    for name, uid in (("one", "uid-one"), ("two", "uid-two")):
        fsm.apply(create("replicasets", _owner(name, uid)))
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "controller": True}

    def dependent(i, name, uid):
        obj = fleet_pod(1000 + i)
        obj["metadata"]["ownerReferences"] = [dict(ref, name=name, uid=uid)]
        return obj
    for i in range(3):
        fsm.apply(create("pods", dependent(i, "one", "uid-one")))
    reads = []
    import shepherd_ha.store.encoded_objects as encoded_objects
    real = encoded_objects.decompress
    monkeypatch.setattr(encoded_objects, "decompress", lambda data: reads.append(1) or real(data))
    assert fsm.apply(_orphan_delete("one"))["ok"]
    assert len(reads) <= 5, "an Orphan delete read %d objects of a namespace of 303" % len(reads)
    assert all("ownerReferences" not in fsm.get("pods", "shop", dependent(i, "", "")["metadata"]["name"])["metadata"]
               for i in range(3))
    # Dependents made after the first look are known too, and one that lost its
    # reference is not read for it.
    fsm.apply(create("pods", dependent(10, "two", "uid-two")))
    fsm.apply(create("pods", dependent(11, "two", "uid-two")))
    released = dependent(11, "two", "uid-two")
    released["metadata"]["ownerReferences"] = []
    assert fsm.apply(update("pods", released))["ok"]
    del reads[:]
    result, changes = fsm.apply_with_changes(_orphan_delete("two"))
    assert result["ok"]
    assert [decode(c.object)["metadata"]["name"] for c in changes if c.resource == "pods"] \
        == [dependent(10, "", "")["metadata"]["name"]]
    assert len(reads) <= 5, "an Orphan delete read %d objects of a namespace of 305" % len(reads)
    assert "_mentions" not in fsm.__getstate__()           # derived, not dumped
