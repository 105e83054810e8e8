"""Service and Endpoints objects for the DNS tests."""


def service(name, ns="default", cluster_ip="10.96.0.10", ports=None, **spec):
    body = {"clusterIP": cluster_ip, "ports": ports if ports is not None else
            [{"name": "http", "port": 80, "protocol": "TCP"}, {"name": "dns", "port": 53, "protocol": "UDP"}]}
    body.update(spec)
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": body}


def endpoints(name, ready, not_ready=(), ns="default", port=8080, port_name="http", hostnames=None):
    hostnames = hostnames or {}
    addresses = [dict({"ip": ip}, **({"hostname": hostnames[ip]} if ip in hostnames else {})) for ip in ready]
    subset = {"addresses": addresses, "ports": [{"name": port_name, "port": port, "protocol": "TCP"}]}
    if not_ready:
        subset["notReadyAddresses"] = [{"ip": ip} for ip in not_ready]
    return {"kind": "Endpoints", "metadata": {"name": name, "namespace": ns}, "subsets": [subset]}
