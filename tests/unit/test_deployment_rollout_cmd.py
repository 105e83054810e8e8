"""sheepctl rollout status/history/undo against the real API app over the in-memory store
(tests/unit/real_api.py; the controller's side is played by the test, writing status and
revisions into the store)."""
import threading
import time

import pytest

from ctl.commands.rollout import rollout_state

UID = "uid-web"


pytestmark = pytest.mark.usefixtures("ctl_isolated")      # conftest.py


def once_watching(server, steps):
    """Run steps in a thread once sheepctl's watch request arrives (every change after it is seen)."""
    watching = threading.Event()
    server.hooks.append(lambda info: info["query"].get("watch") and watching.set())

    def run():
        if watching.wait(20):
            steps()
    t = threading.Thread(target=run)
    t.start()
    return t


def template(image):
    return {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "main", "image": image, "imagePullPolicy": "IfNotPresent"}]}}


def deployment(image="nginx:1.26", revision="2", generation=2, observed=2, replicas=3, updated=3, total=3,
               available=3, progressing="NewPodsAvailable", cause=None):
    annotations = {"deployment.kubernetes.io/revision": revision}
    if cause:
        annotations["kubernetes.io/change-cause"] = cause
    return {"metadata": {"name": "web", "uid": UID, "generation": generation, "annotations": annotations},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": template(image)},
            "status": {"observedGeneration": observed, "replicas": total, "updatedReplicas": updated,
                       "availableReplicas": available,
                       "conditions": [{"type": "Progressing", "status": "False" if progressing ==
                                       "ProgressDeadlineExceeded" else "True", "reason": progressing,
                                       "message": "revision 2 has 1 of 3 pods updated"}]}}


def revision(number, image, cause=None, owner=UID):
    """A ReplicaSet of the deployment, as the controller keeps one per revision."""
    annotations = {"deployment.kubernetes.io/revision": str(number)}
    if cause:
        annotations["kubernetes.io/change-cause"] = cause
    meta = {"name": "web-%d" % number, "labels": {"app": "web", "pod-template-hash": "h%d" % number},
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": owner,
                                 "controller": True}]}
    rs_template = template(image)
    rs_template["metadata"]["labels"]["pod-template-hash"] = "h%d" % number
    return {"metadata": meta, "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                                       "template": rs_template}}


def seed(store, **kw):
    store.put("deployments", deployment(**kw))
    store.put("replicasets", revision(1, "nginx:1.25", "first"))
    store.put("replicasets", revision(2, "nginx:1.26", "bump to 1.26"))
    store.put("replicasets", revision(9, "evil:1", "not ours", owner="someone-else"))


# ---- status ----

def test_rollout_state_lines():
    assert rollout_state(deployment(generation=3, observed=2))[0] == \
        "Waiting for deployment spec update to be observed..."
    assert rollout_state(deployment(updated=1, total=4, available=3)) == (
        'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...', False, False)
    assert rollout_state(deployment(updated=3, total=4, available=3))[0] == \
        'Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...'
    assert rollout_state(deployment(updated=3, total=3, available=2))[0] == \
        'Waiting for deployment "web" rollout to finish: 2 of 3 updated replicas are available...'
    assert rollout_state(deployment()) == ('deployment "web" successfully rolled out', True, False)
    line, done, failed = rollout_state(deployment(progressing="ProgressDeadlineExceeded", updated=1))
    assert failed and not done and "exceeded its progress deadline" in line


def test_status_follows_the_rollout_live(ctl, store, server):
    store.put("deployments", deployment(updated=1, total=4, available=3, progressing="PodsUpdating"))

    def progress():
        for kw in (dict(updated=2, total=4, available=3), dict(updated=3, total=4, available=3),
                   dict(updated=3, total=3, available=2), dict()):
            time.sleep(0.15)
            store.put("deployments", deployment(**kw))
    t = once_watching(server, progress)
    rc, out, err = ctl("rollout", "status", "deployment/web", "--timeout", "20")
    t.join(5)
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...',
        'Waiting for deployment "web" rollout to finish: 2 out of 3 new replicas have been updated...',
        'Waiting for deployment "web" rollout to finish: 1 old replicas are pending termination...',
        'Waiting for deployment "web" rollout to finish: 2 of 3 updated replicas are available...',
        'deployment "web" successfully rolled out']


def test_status_fails_when_the_progress_deadline_passes(ctl, store, server):
    store.put("deployments", deployment(updated=1, total=4, available=3, progressing="PodsUpdating"))

    def stall():
        time.sleep(0.2)
        store.put("deployments", deployment(updated=1, total=4, available=3, progressing="ProgressDeadlineExceeded"))
    t = once_watching(server, stall)
    rc, out, err = ctl("rollout", "status", "deploy", "web", "--timeout", "20")
    t.join(5)
    assert rc == 1
    assert out.splitlines() == [
        'Waiting for deployment "web" rollout to finish: 1 out of 3 new replicas have been updated...']
    assert err.startswith('error: deployment "web" exceeded its progress deadline: revision 2 has')


def test_status_timeout_and_no_watch(ctl, store):
    store.put("deployments", deployment(updated=1, total=4, available=3, progressing="PodsUpdating"))
    started = time.monotonic()
    rc, out, err = ctl("rollout", "status", "deployment/web", "--timeout", "0.5")
    assert rc == 1 and err.strip() == "error: timed out waiting for the condition"
    assert time.monotonic() - started < 10
    rc, out, err = ctl("rollout", "status", "deployment/web", "--watch=false")
    assert rc == 0 and "1 out of 3 new replicas" in out


def test_status_errors(ctl, store):
    rc, out, err = ctl("rollout", "status", "deployment/nope")
    assert rc == 1 and "NotFound" in err
    rc, out, err = ctl("rollout", "status", "pod/x")
    assert rc == 1 and "deployments only" in err
    rc, out, err = ctl("rollout", "status", "deployment/a", "deployment/b")
    assert rc == 1 and "exactly one deployment" in err


# ---- history ----

def test_history_lists_owned_revisions(ctl, store):
    seed(store)
    rc, out, err = ctl("rollout", "history", "deployment/web")
    assert (rc, err) == (0, "")
    assert [line.split(None, 1) for line in out.splitlines()] == [
        ["deployment.apps/web"], ["REVISION", "CHANGE-CAUSE"], ["1", "first"], ["2", "bump to 1.26"]]


def test_history_of_one_revision(ctl, store):
    seed(store)
    rc, out, err = ctl("rollout", "history", "deployment/web", "--revision", "1")
    assert rc == 0
    assert out.splitlines()[0] == "deployment.apps/web with revision #1"
    assert "image: nginx:1.25" in out and "Change cause: first" in out
    rc, out, err = ctl("rollout", "history", "deployment/web", "--revision", "9")
    assert rc == 1 and "unable to find the specified revision 9" in err


# ---- undo ----

def test_undo_to_previous_revision(ctl, store):
    seed(store, cause="bump to 1.26")
    rc, out, err = ctl("rollout", "undo", "deployment/web")
    assert (rc, err) == (0, "")
    assert out.strip() == "deployment.apps/web rolled back to revision 1"
    d = store.get_obj("deployments", "web")
    restored = template("nginx:1.25")
    restored["spec"].update(restartPolicy="Always", terminationGracePeriodSeconds=30)  # the server's defaults
    assert d["spec"]["template"] == restored
    assert d["metadata"]["annotations"]["kubernetes.io/change-cause"] == "first"
    assert d["spec"]["replicas"] == 3 and d["metadata"]["uid"] == UID


def test_undo_to_a_given_revision_and_errors(ctl, store):
    seed(store)
    rc, out, err = ctl("rollout", "undo", "deployment/web", "--to-revision", "2")
    assert rc == 0 and "skipped rollback (current template already matches revision 2)" in out
    rc, out, err = ctl("rollout", "undo", "deployment/web", "--to-revision", "9")
    assert rc == 1 and "unable to find specified revision 9 in history (revisions: 1, 2)" in err
    assert store.get_obj("deployments", "web")["spec"]["template"] == template("nginx:1.26")


def test_undo_without_history(ctl, store):
    store.put("deployments", deployment(revision="1"))
    rc, out, err = ctl("rollout", "undo", "deployment/web")
    assert rc == 1 and 'no rollout history found for deployment "web"' in err
    store.put("replicasets", revision(1, "nginx:1.26"))
    rc, out, err = ctl("rollout", "undo", "deployment/web")
    assert rc == 1 and "no revision to roll back to" in err


def test_undo_refuses_a_paused_deployment(ctl, store):
    seed(store)
    d = store.get_obj("deployments", "web")
    d["spec"]["paused"] = True
    store.put("deployments", d)
    rc, out, err = ctl("rollout", "undo", "deployment/web")
    assert rc == 1 and "is paused" in err
    assert store.get_obj("deployments", "web")["spec"]["template"] == template("nginx:1.26")
