"""The admin's bearer token of the cluster under test: the chaos cluster runs with
tokens, as `local up` does (each hollow agent on its own node token), so every
request of the harness carries it. Set once the cluster exists (cluster.py)."""
HEADERS = {}       # mutated in place: modules that imported it see the token


def set_token(token):
    HEADERS.clear()
    if token:
        HEADERS["Authorization"] = "Bearer " + token


def token():
    value = HEADERS.get("Authorization", "")
    return value[len("Bearer "):] if value else None
