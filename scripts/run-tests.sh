#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: unit tests, integration tests on
# real replica processes on 127.0.0.1, and end-to-end tests with real Docker containers.
# One pytest run, one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

# Agent tests run real containers: make the Docker engine and the local busybox image
# available first. Failing here fails the run: a test that needs Docker never skips.
bash scripts/setup-docker.sh
exec "$PYTHON" -m pytest tests -q -p no:cacheprovider "$@"
