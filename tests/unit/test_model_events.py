"""model/events.py: one name and one shape for the events of every component."""
from agent.events import COMPONENT, pod_reference
from shepherd_ha.controllers.events import involved_reference
from shepherd_ha.model.events import event_name, new_event

POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "web-1", "namespace": "shop", "uid": "u-1", "resourceVersion": "7"}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "u-n1"}}
T0, T1 = "2026-12-05T10:00:00Z", "2026-12-05T10:00:05Z"


def test_the_same_words_about_the_same_object_are_one_event_whoever_records_them():
    by_controller = event_name(involved_reference(POD), "Scheduled", "assigned", "Normal")
    by_agent = event_name(pod_reference(POD), "Scheduled", "assigned", "Normal")
    assert by_controller == by_agent and by_controller.startswith("web-1.")


def test_what_the_event_says_and_about_which_container_make_different_events():
    ref = pod_reference(POD)
    names = {event_name(ref, "Started", "started", "Normal"),
             event_name(ref, "Started", "started", "Warning"),
             event_name(ref, "Started", "started again", "Normal"),
             event_name(ref, "Killing", "started", "Normal"),
             event_name(pod_reference(POD, "main"), "Started", "started", "Normal"),
             event_name(dict(ref, uid="u-2"), "Started", "started", "Normal"),
             event_name(dict(ref, kind="ReplicaSet"), "Started", "started", "Normal")}
    assert len(names) == 7


def test_a_controllers_event_about_a_node_lives_in_default():
    event = new_event(involved_reference(NODE), "NodeNotReady", "n1 stopped", "Normal", T0,
                      component="node-controller")
    assert event["metadata"]["namespace"] == "default"
    assert event["involvedObject"] == {"kind": "Node", "apiVersion": "v1", "name": "n1", "uid": "u-n1"}
    assert (event["count"], event["firstTimestamp"], event["lastTimestamp"]) == (1, T0, T0)
    assert event["source"] == {"component": "node-controller"} and "reportingInstance" not in event


def test_an_agents_event_names_its_node_and_keeps_its_count_and_times():
    event = new_event(pod_reference(POD, "main"), "BackOff", "restarting", "Warning", T0, T1, count=4,
                      component=COMPONENT, host="n1")
    assert event["metadata"] == {"name": event_name(pod_reference(POD, "main"), "BackOff", "restarting",
                                                    "Warning"), "namespace": "shop"}
    assert event["involvedObject"]["fieldPath"] == "spec.containers{main}"
    assert (event["count"], event["firstTimestamp"], event["lastTimestamp"]) == (4, T0, T1)
    assert event["source"] == {"component": COMPONENT, "host": "n1"}
    assert (event["reportingComponent"], event["reportingInstance"]) == (COMPONENT, "n1")
