#!/bin/bash
# Static checks of the Vagrant cluster files, for CI: shellcheck on every shell
# script under vagrant/ (box build, provisioning, host scripts) and on this file,
# then `vagrant validate` of vagrant/Vagrantfile where vagrant is installed.
# Fails (exit 1) when shellcheck is missing: the check must not pass by skipping.
# Env: REQUIRE_VAGRANT=1 also fails when vagrant is missing.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

command -v shellcheck >/dev/null || { echo "check-vagrant: shellcheck is missing; apt-get install -y shellcheck" >&2; exit 1; }
mapfile -t scripts < <(find vagrant -name '*.sh' -not -path '*/.build/*' -not -path '*/.artifacts/*' | sort)
[ "${#scripts[@]}" -gt 0 ] || { echo "check-vagrant: no scripts under vagrant/" >&2; exit 1; }
echo "check-vagrant: shellcheck ${#scripts[@]} scripts"
shellcheck -x -P SCRIPTDIR "${scripts[@]}" scripts/check-vagrant.sh

if command -v vagrant >/dev/null; then
  # A private dotfile dir: validation never touches (or waits for) a running cluster's state.
  VAGRANT_DOTFILE_PATH=$(mktemp -d)
  export VAGRANT_DOTFILE_PATH
  # The synced artifacts folder must exist for validate; a fresh clone has none yet.
  ARTIFACTS="$VAGRANT_DOTFILE_PATH/artifacts"
  mkdir -p "$ARTIFACTS"
  export ARTIFACTS
  trap 'rm -rf "$VAGRANT_DOTFILE_PATH"' EXIT
  echo "check-vagrant: vagrant validate (default and CP=5 WORKERS=0)"
  (cd vagrant && VAGRANT_CHECKPOINT_DISABLE=1 vagrant validate)
  (cd vagrant && CP=5 WORKERS=0 VAGRANT_CHECKPOINT_DISABLE=1 vagrant validate)
  if (cd vagrant && CP=0 VAGRANT_CHECKPOINT_DISABLE=1 vagrant validate >/dev/null 2>&1); then
    echo "check-vagrant: CP=0 was accepted; the Vagrantfile must reject it" >&2; exit 1
  fi
elif [ "${REQUIRE_VAGRANT:-0}" = 1 ]; then
  echo "check-vagrant: vagrant is missing (REQUIRE_VAGRANT=1); apt-get install -y vagrant" >&2; exit 1
else
  echo "check-vagrant: vagrant not installed; Vagrantfile not validated (REQUIRE_VAGRANT=1 makes this fail)"
fi
echo "check-vagrant: OK"
