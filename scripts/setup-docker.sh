#!/usr/bin/env bash
# Make a real Docker engine and the local busybox image available, idempotently:
#   1. install Debian's docker.io and busybox-static when missing (needs root + apt);
#   2. start dockerd when no engine answers (machines here have no systemd);
#   3. build shepherd/busybox:1 from the static busybox binary (no registry is reachable).
# Exits non-zero with the reason when any step fails: tests that need Docker must fail, not skip.
set -euo pipefail
IMAGE=${SHEPHERD_TEST_IMAGE:-shepherd/busybox:1}
LOG=${DOCKERD_LOG:-/var/log/dockerd.log}

say() { echo "setup-docker: $*"; }

if ! command -v dockerd >/dev/null || ! command -v busybox >/dev/null || ! command -v docker >/dev/null; then
    say "installing docker.io and busybox-static (apt)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io busybox-static >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
    say "starting dockerd (log: $LOG)"
    setsid dockerd >"$LOG" 2>&1 < /dev/null &
    for _ in $(seq 1 60); do
        docker info >/dev/null 2>&1 && break
        sleep 0.5
    done
    docker info >/dev/null 2>&1 || { say "dockerd did not come up in 30 s; see $LOG"; tail -20 "$LOG" >&2; exit 1; }
fi
say "engine $(docker version --format '{{.Server.Version}}') answering"

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
    say "building $IMAGE from $(command -v busybox)"
    ctx=$(mktemp -d)
    trap 'rm -rf "$ctx"' EXIT
    cp "$(command -v busybox)" "$ctx/busybox"
    mkdir -p "$ctx/www"
    echo "hello from shepherd" > "$ctx/www/index.html"
    cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
COPY www /www
CMD ["/bin/sh"]
DOCKERFILE
    docker build -q -t "$IMAGE" "$ctx" >/dev/null
fi
docker run --rm "$IMAGE" sh -c 'echo ok' | grep -q ok || { say "cannot run a container from $IMAGE"; exit 1; }
say "$IMAGE ready"
