"""Field selectors kubectl sends (model/selectors.py): describe's events query
(involvedObject.*), reason/type/source on events, metadata.name and
metadata.namespace on every kind."""
import pytest

from shepherd_ha.model.resources import RESOURCES
from shepherd_ha.model.selectors import SelectorError, parse_field_selector

EVENT = {"metadata": {"name": "web-1.17", "namespace": "default"},
         "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web-1", "uid": "u-1",
                            "apiVersion": "v1", "resourceVersion": "12", "fieldPath": "spec.containers{app}"},
         "reason": "BackOff", "type": "Warning", "source": {"component": "shepherd-agent", "host": "n1"},
         "reportingComponent": "shepherd-agent"}


def test_the_selector_kubectl_describe_sends_for_a_pods_events():
    sel = parse_field_selector("involvedObject.name=web-1,involvedObject.namespace=default,"
                               "involvedObject.kind=Pod,involvedObject.uid=u-1", "events")
    assert sel.matches(EVENT)
    other_uid = dict(EVENT, involvedObject=dict(EVENT["involvedObject"], uid="u-2"))
    assert not sel.matches(other_uid)       # a pod of the same name, deleted and created again


@pytest.mark.parametrize("text, hit", [
    ("involvedObject.apiVersion=v1", True), ("involvedObject.fieldPath=spec.containers{app}", True),
    ("involvedObject.resourceVersion=12", True), ("reason=BackOff", True), ("type!=Warning", False),
    ("source=shepherd-agent", True), ("source=scheduler", False), ("reportingComponent=shepherd-agent", True),
    ("metadata.namespace=default,metadata.name=web-1.17", True), ("metadata.namespace=kube-system", False),
])
def test_event_fields(text, hit):
    assert parse_field_selector(text, "events").matches(EVENT) is hit


def test_metadata_name_and_namespace_on_every_kind():
    for plural, r in RESOURCES.items():
        obj = {"metadata": {"name": "x", "namespace": "ns1"} if r.namespaced else {"name": "x"}}
        assert parse_field_selector("metadata.name=x", plural).matches(obj)
        assert not parse_field_selector("metadata.name!=x", plural).matches(obj)
        ns = "ns1" if r.namespaced else ""
        assert parse_field_selector("metadata.namespace=%s" % ns, plural).matches(obj), plural


def test_an_unknown_event_field_names_the_supported_ones():
    with pytest.raises(SelectorError) as e:
        parse_field_selector("involvedObject.color=red", "events")
    assert "involvedObject.uid" in str(e.value) and "source" in str(e.value)
