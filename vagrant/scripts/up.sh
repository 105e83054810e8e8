#!/bin/bash
# `make vagrant-up`: libvirtd, the box, the offline artifacts, the VMs (booted in
# parallel), their provisioning (in parallel, one log per VM), then wait until the
# cluster has a leader and every worker's Node is Ready; write the sheepctl config.
# Env: see vagrant/Vagrantfile (CP, WORKERS, VM_MEMORY, VM_DRIVER, VM_BOX ...),
#      READY_TIMEOUT (600 s).
set -euo pipefail
# shellcheck source=vagrant/scripts/common.sh
source "$(dirname "$0")/common.sh"
READY_TIMEOUT=${READY_TIMEOUT:-600}

need vagrant vagrant
if [ "$VAGRANT_DEFAULT_PROVIDER" = libvirt ]; then
  need virsh "libvirt-clients libvirt-daemon-system qemu-system-x86"
  [[ "$(vagrant plugin list 2>/dev/null)" == *vagrant-libvirt* ]] || die "the vagrant-libvirt plugin is missing; apt-get install -y vagrant-libvirt"
  bash "$VAGRANT_DIR/scripts/start-libvirt.sh"
  if [ "${VM_BOX:-shepherd/debian12}" = shepherd/debian12 ]; then
    t0=$(date +%s)
    bash "$VAGRANT_DIR/box/build-box.sh"
    record "box: $(( $(date +%s) - t0 )) s (0 when already built)"
  fi
fi

t0=$(date +%s)
bash "$VAGRANT_DIR/scripts/prepare-artifacts.sh"
record "artifacts: $(( $(date +%s) - t0 )) s"

cd "$VAGRANT_DIR"
# vagrant-libvirt creates the VMs in parallel; a VM that fails there (races on
# shared state are seen under load) is retried once, alone.
boot() {
  local log=$1 rc=0 pid
  vagrant up --no-provision >"$log" 2>&1 &
  pid=$!
  tail --pid="$pid" -n +1 -f "$log" 2>/dev/null \
    | grep --line-buffered -E '^==> [a-z0-9]+: (Creating domain|Starting domain|Machine booted|Rsyncing|Configuring and enabling)|rror' || true
  wait "$pid" || rc=$?
  return "$rc"
}
log "vagrant up --no-provision: booting $(vm_names | tr '\n' ' ')(software emulation: several minutes)"
t0=$(date +%s)
if ! boot "$STATE_DIR/up.log"; then
  log "vagrant up failed for some VM (see $STATE_DIR/up.log); retrying once"
  boot "$STATE_DIR/up-retry.log" || die "vagrant up failed twice; see $STATE_DIR/up.log and up-retry.log"
fi
record "boot (vagrant up --no-provision, $(vm_names | wc -l) VMs in parallel): $(( $(date +%s) - t0 )) s"

log "provisioning every VM in parallel (logs: $STATE_DIR/provision-NAME.log)"
t0=$(date +%s)
pids=()
for vm in $(vm_names); do
  (vagrant rsync "$vm" && vagrant provision "$vm") >"$STATE_DIR/provision-$vm.log" 2>&1 &
  pids+=("$!:$vm")
done
failed=""
for entry in "${pids[@]}"; do
  pid=${entry%%:*}; vm=${entry#*:}
  if wait "$pid"; then
    record "provisioned $vm: $(( $(date +%s) - t0 )) s after the start of provisioning"
  else
    failed="$failed $vm"; tail -15 "$STATE_DIR/provision-$vm.log" >&2
  fi
done
[ -z "$failed" ] || die "provisioning failed on:$failed (see $STATE_DIR/provision-VM.log)"
record "provisioning (all VMs in parallel): $(( $(date +%s) - t0 )) s"

python3 "$VAGRANT_DIR/cluster_layout.py" sheepctl-config "$SHEEPCTL_CONFIG_FILE"
python3 "$VAGRANT_DIR/cluster_layout.py" kubeconfig "$STATE_DIR/kubeconfig"
export SHEPHERD_CONFIG=$SHEEPCTL_CONFIG_FILE
log "waiting for a leader and Ready nodes (at most $READY_TIMEOUT s)"
t0=$(date +%s)
python3 "$VAGRANT_DIR/scripts/wait_ready.py" --timeout "$READY_TIMEOUT"
record "cluster ready after provisioning: $(( $(date +%s) - t0 )) s"
sheepctl cluster status || true
sheepctl get nodes -o wide || true
echo
echo "Try:  export SHEPHERD_CONFIG=$SHEEPCTL_CONFIG_FILE; sheepctl cluster status"
echo "Then: make drills      Stop: make vagrant-down"
