#!/usr/bin/env bash
# The whole test suite, as `make test` and CI run it: unit tests, then integration
# tests on real replica processes on 127.0.0.1. One pytest run, one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
exec "$PYTHON" -m pytest tests -q -p no:cacheprovider "$@"
