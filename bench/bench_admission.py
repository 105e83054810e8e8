#!/usr/bin/env python3
"""What admission and encryption at rest cost per request, in-process (no cluster):

- the Pod Security check of a typical pod and of a 5-container hardened pod, at
  baseline and restricted (shepherd_ha/model/pod_security.py);
- sealing and opening a Secret of N bytes of data with AES-256-GCM
  (shepherd_ha/store/encryption_at_rest.py), against the JSON encoding of the same
  Secret that every write pays anyway.

  python bench/bench_admission.py --secret-bytes 100,10000,1000000
"""
import argparse
import base64
import json
import os
import time

from shepherd_ha.model import pod_security as PSS
from shepherd_ha.store.encryption_at_rest import SecretCipher


def per_call_us(fn, budget=0.5):
    """Mean microseconds per call of fn over about `budget` seconds."""
    calls, started = 0, time.perf_counter()
    while time.perf_counter() - started < budget or calls < 10:
        fn()
        calls += 1
    return (time.perf_counter() - started) / calls * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--secret-bytes", default="100,10000,1000000")
    args = parser.parse_args()
    plain = {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]}
    hardened = {"securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
                "volumes": [{"name": "v%d" % i, "emptyDir": {}} for i in range(5)],
                "containers": [{"name": "c%d" % i, "image": "busybox", "securityContext": {
                    "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}} for i in range(5)]}
    print("Pod Security check (microseconds per pod)")
    for label, spec in (("1-container pod", plain), ("5-container hardened pod", hardened)):
        print("  %-26s baseline %6.1f   restricted %6.1f" % (
            label, per_call_us(lambda: PSS.check("baseline", spec)), per_call_us(lambda: PSS.check("restricted", spec))))
    cipher = SecretCipher([("k1", os.urandom(32))])
    print("Secret at rest (microseconds per Secret)")
    for size in (int(s) for s in args.secret_bytes.split(",")):
        secret = {"kind": "Secret", "metadata": {"name": "db", "namespace": "default"},
                  "data": {"value": base64.b64encode(os.urandom(size)).decode()}}
        sealed = cipher.encrypt(secret)
        print("  %8d bytes: seal %8.1f   open %8.1f   (json.dumps of it %8.1f)" % (
            size, per_call_us(lambda: cipher.encrypt(secret)), per_call_us(lambda: cipher.decrypt(sealed)),
            per_call_us(lambda: json.dumps(secret))))


if __name__ == "__main__":
    main()
