#!/bin/bash
# Every VM: its peers in /etc/hosts and the project in a venv, installed offline
# from the wheels the host built (/opt/shepherd-dist/wheels, an rsync synced folder).
# Args: NAME HOSTS   HOSTS is "ip name,ip name,..."
set -euo pipefail
NAME=${1:?usage: common.sh NAME HOSTS}
HOSTS=${2:?usage: common.sh NAME HOSTS}
DIST=/opt/shepherd-dist
VENV=/opt/shepherd

echo "[$NAME] /etc/hosts"
sed -i '/# shepherd-cluster$/d' /etc/hosts
IFS=, read -r -a lines <<<"$HOSTS"
for line in "${lines[@]}"; do echo "$line # shepherd-cluster" >>/etc/hosts; done

ls "$DIST"/wheels/shepherd_ha-*.whl >/dev/null 2>&1 \
  || { echo "error: no shepherd_ha wheel in $DIST/wheels; run vagrant/scripts/prepare-artifacts.sh on the host, then vagrant provision" >&2; exit 1; }
if [ ! -x "$VENV/bin/pip" ]; then
  echo "[$NAME] creating the venv $VENV"
  python3 -m venv "$VENV"
fi
echo "[$NAME] installing shepherd-ha from wheels (offline)"
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$DIST/wheels" shepherd-ha
# The wheel of the project changes at every build with the same version: reinstall it.
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-index --no-deps --force-reinstall "$DIST"/wheels/shepherd_ha-*.whl
for cmd in shepherd-ha shepherd-agent sheepctl; do ln -sf "$VENV/bin/$cmd" "/usr/local/bin/$cmd"; done
echo "[$NAME] $("$VENV/bin/python" -c 'import importlib.metadata as m; print("shepherd-ha", m.version("shepherd-ha"))') installed"
