"""The preset dictionaries stored objects are compressed against (store/object_compression.py).

Each is the compact JSON of one typical object of its kind, as this server stores it:
what deflate finds there (keys, defaults, the shapes of conditions, statuses and owner
references) an object of that kind costs a few bytes to say again.

These are part of the stored format: dumps, snapshots and the change stream hold objects
compressed against them, by id. A released dictionary never changes (a test pins each
one's hash); a better one is added under a new id and the old one kept, so every older
dump still reads.
"""
import json

_UID = "00000000-0000-4000-8000-000000000000"
_TIME = "2026-01-01T00:00:00Z"
_OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f7c9b6d", "uid": _UID,
          "controller": True, "blockOwnerDeletion": True}
_META = {"name": "web", "namespace": "default", "uid": _UID, "creationTimestamp": _TIME,
         "generation": 1, "resourceVersion": "1"}


def _condition(kind, **extra):
    return dict({"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": _TIME}, **extra)


_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"namespace": "default", "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"},
                 "annotations": {"kubectl.kubernetes.io/restartedAt": _TIME},
                 "ownerReferences": [_OWNER], "name": "web-5d8f7c9b6d-x7k2p", "generateName": "web-5d8f7c9b6d-",
                 "uid": _UID, "creationTimestamp": _TIME, "generation": 1, "resourceVersion": "1",
                 "deletionTimestamp": _TIME, "deletionGracePeriodSeconds": 30},
    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0", "command": ["sh", "-c"],
                             "args": ["sleep"], "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                             "env": [{"name": "POD_NAME", "value": ""}],
                             "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                           "limits": {"cpu": "500m", "memory": "256Mi"}},
                             "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8080},
                                                "initialDelaySeconds": 1, "periodSeconds": 10},
                             "imagePullPolicy": "IfNotPresent"}],
             "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
             "serviceAccountName": "default", "nodeSelector": {"kubernetes.io/os": "linux"},
             "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 300}],
             "nodeName": "node-0001"},
    "status": {"phase": "Running",
               "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": _TIME},
                              _condition("Initialized"), _condition("ContainersReady"), _condition("Ready")],
               "podIP": "10.64.1.2", "podIPs": [{"ip": "10.64.1.2"}], "hostIP": "10.200.0.1",
               "startTime": _TIME, "qosClass": "Burstable",
               "containerStatuses": [{"name": "app", "image": "registry.example/app:1.0",
                                      "imageID": "docker-pullable://registry.example/app@sha256:",
                                      "ready": True, "restartCount": 0,
                                      "state": {"running": {"startedAt": _TIME}},
                                      "lastState": {"terminated": {"exitCode": 0, "reason": "Completed",
                                                                   "startedAt": _TIME, "finishedAt": _TIME}},
                                      "containerID": "docker://", "started": True}]},
}

_NODE = {
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "node-0001",
                 "labels": {"kubernetes.io/hostname": "node-0001", "kubernetes.io/os": "linux",
                            "kubernetes.io/arch": "amd64", "shepherd.io/runtime": "docker",
                            "topology.kubernetes.io/zone": "zone-a"},
                 "uid": _UID, "creationTimestamp": _TIME, "resourceVersion": "1", "generation": 1},
    "spec": {"unschedulable": False, "podCIDR": "10.64.1.0/24", "podCIDRs": ["10.64.1.0/24"]},
    "status": {"capacity": {"cpu": "4", "memory": "16777216Ki", "pods": "110", "ephemeral-storage": "0"},
               "allocatable": {"cpu": "3900m", "memory": "16515072Ki", "pods": "110"},
               "addresses": [{"type": "InternalIP", "address": "10.200.0.1"},
                             {"type": "Hostname", "address": "node-0001"}],
               "nodeInfo": {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "6.1.0-amd64",
                            "osImage": "Debian GNU/Linux 12 (bookworm)", "containerRuntimeVersion": "docker://24.0.7",
                            "kubeletVersion": "shepherd-agent/0.1.0", "kubeProxyVersion": "",
                            "operatingSystem": "linux", "architecture": "amd64"},
               "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
               "conditions": [{"type": "Ready", "status": "True", "reason": "AgentReady",
                               "message": "shepherd-agent is posting ready status",
                               "lastHeartbeatTime": _TIME, "lastTransitionTime": _TIME}],
               "usage": {"cpuPercent": 12.5, "memoryUsedBytes": 4294967296, "memoryAvailableBytes": 12884901888,
                         "memoryPercent": 25.0, "diskUsedBytes": 10737418240, "diskTotalBytes": 107374182400,
                         "load1": 0.5, "load5": 0.5, "load15": 0.5, "timestamp": _TIME}},
}

_FIELDS = {"fieldsType": "FieldsV1",
           "fieldsV1": {"f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}, "f:renewTime": {}}}}
_LEASE = {
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "node-0001", "namespace": "kube-node-lease",
                 "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-0001", "uid": _UID}],
                 "managedFields": [dict({"manager": "shepherd-agent", "operation": "Update",
                                         "apiVersion": "coordination.k8s.io/v1", "time": _TIME}, **_FIELDS)],
                 "uid": _UID, "creationTimestamp": _TIME, "generation": 1, "resourceVersion": "1"},
    "spec": {"holderIdentity": "node-0001", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"},
}

_EVENT = {
    "apiVersion": "v1", "kind": "Event",
    "metadata": {"name": "web-5d8f7c9b6d-x7k2p.17a2b3c4d5", "namespace": "default", "uid": _UID,
                 "creationTimestamp": _TIME, "resourceVersion": "1", "generation": 1},
    "involvedObject": {"kind": "Pod", "apiVersion": "v1", "name": "web-5d8f7c9b6d-x7k2p", "uid": _UID,
                       "namespace": "default", "resourceVersion": "1", "fieldPath": "spec.containers{app}"},
    "reason": "Scheduled", "message": "Successfully assigned default/web-5d8f7c9b6d-x7k2p to node-0001; "
                                      "Created pod: web-5d8f7c9b6d-x7k2p; Scaled up replica set web-5d8f7c9b6d to 3; "
                                      "Started container app; Pulled image",
    "type": "Normal", "count": 1, "firstTimestamp": _TIME, "lastTimestamp": _TIME,
    "source": {"component": "shepherd-controller-manager", "host": "node-0001"},
}

_TEMPLATE = {"metadata": {"labels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"}},
             "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
                                      "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                                      "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                                      "imagePullPolicy": "IfNotPresent"}],
                      "restartPolicy": "Always", "terminationGracePeriodSeconds": 30}}
_REPLICA_SET = {
    "apiVersion": "apps/v1", "kind": "ReplicaSet",
    "metadata": {"name": "web-5d8f7c9b6d", "namespace": "default",
                 "labels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"},
                 "annotations": {"deployment.kubernetes.io/revision": "1",
                                 "deployment.kubernetes.io/desired-replicas": "3",
                                 "deployment.kubernetes.io/max-replicas": "4"},
                 "ownerReferences": [dict(_OWNER, kind="Deployment", name="web")],
                 "uid": _UID, "creationTimestamp": _TIME, "generation": 1, "resourceVersion": "1"},
    "spec": {"replicas": 3, "minReadySeconds": 0,
             "selector": {"matchLabels": {"app": "web", "pod-template-hash": "5d8f7c9b6d"}}, "template": _TEMPLATE},
    "status": {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 3,
               "observedGeneration": 1},
}

_DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": dict(_META, annotations={"deployment.kubernetes.io/revision": "1"}, labels={"app": "web"}),
    "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": _TEMPLATE,
             "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600, "minReadySeconds": 0,
             "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}},
    "status": {"observedGeneration": 1, "replicas": 3, "updatedReplicas": 3, "readyReplicas": 3,
               "availableReplicas": 3, "unavailableReplicas": 0,
               "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                               "message": "Deployment has minimum availability.",
                               "lastUpdateTime": _TIME, "lastTransitionTime": _TIME},
                              {"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
                               "message": "ReplicaSet \"web-5d8f7c9b6d\" has successfully progressed.",
                               "lastUpdateTime": _TIME, "lastTransitionTime": _TIME}]},
}

_ENDPOINTS = {
    "apiVersion": "v1", "kind": "Endpoints", "metadata": dict(_META, labels={"app": "web"}),
    "subsets": [{"addresses": [{"ip": "10.64.1.2", "nodeName": "node-0001",
                                "targetRef": {"kind": "Pod", "name": "web-5d8f7c9b6d-x7k2p", "namespace": "default",
                                              "uid": _UID}}],
                 "notReadyAddresses": [], "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}],
}

_SERVICE = {
    "apiVersion": "v1", "kind": "Service", "metadata": dict(_META, labels={"app": "web"}),
    "spec": {"type": "ClusterIP", "selector": {"app": "web"}, "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
             "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
             "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}]},
    "status": {"loadBalancer": {}},
}

# Any other kind: what every object has.
_ANY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(_META, labels={"app": "web"},
                                                                  annotations={"kubernetes.io/description": ""},
                                                                  ownerReferences=[_OWNER]),
        "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "", "message": "",
                                               "lastTransitionTime": _TIME, "observedGeneration": 1}]}}


def _json(obj):
    # The standard library's compact form: the same bytes from every Python version.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


# id -> (kinds it is for, dictionary). Ids are forever: never reuse or edit one.
DICTIONARIES = {
    1: ((), _json(_ANY)),
    2: (("Pod",), _json(_POD)),
    3: (("Node",), _json(_NODE)),
    4: (("Lease",), _json(_LEASE)),
    5: (("Event",), _json(_EVENT)),
    6: (("ReplicaSet",), _json(_REPLICA_SET)),
    7: (("Deployment",), _json(_DEPLOYMENT)),
    8: (("Endpoints",), _json(_ENDPOINTS)),
    9: (("Service",), _json(_SERVICE)),
}
FOR_ANY_KIND = 1
