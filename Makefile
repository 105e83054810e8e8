# Shepherd HA: the two commands a fresh machine needs are `make up` and `make test`.
PYTHON ?= python3
CLUSTER_DIR ?= .local-cluster
SHEEPCTL = sheepctl --config $(CLUSTER_DIR)/config

.PHONY: install up down status test unit integration bench clean

install:  ## install Shepherd HA and its test tools into this Python
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -e '.[test]'

up: install  ## start a local 3-replica cluster with 2 node agents and apply the example workload
	bash scripts/setup-docker.sh
	shepherd-ha local up --dir $(CLUSTER_DIR)
	$(SHEEPCTL) apply -f examples/
	bash scripts/reach-example.sh $(CLUSTER_DIR)/config
	$(SHEEPCTL) get pods -o wide
	$(SHEEPCTL) cluster status
	@echo
	@echo "Try:  export SHEPHERD_CONFIG=$(CURDIR)/$(CLUSTER_DIR)/config; sheepctl get deployments,services"
	@echo "Stop: make down"

down:  ## stop the local cluster cleanly (data kept in $(CLUSTER_DIR))
	shepherd-ha local down --dir $(CLUSTER_DIR)

status:
	shepherd-ha local status --dir $(CLUSTER_DIR)

test: install  ## the whole test suite, as CI runs it
	bash scripts/run-tests.sh

unit: install
	$(PYTHON) -m pytest tests/unit -q

integration: install
	$(PYTHON) -m pytest tests/integration -q

bench: install  ## benchmarks; figures go to docs/benchmarks.md by hand
	$(PYTHON) bench/bench_writes.py
	$(PYTHON) bench/bench_failover.py
	$(PYTHON) bench/bench_memory.py

clean:  ## stop the cluster, remove its agents' containers and its data
	-shepherd-ha local down --dir $(CLUSTER_DIR) --purge-containers
	-shepherd-agent network cleanup   # the agents' pod networks, routes and iptables chains (docs/networking.md)
	rm -rf $(CLUSTER_DIR) .pytest_cache build *.egg-info

# --- Vagrant cluster (vagrant/README.md): VMs on libvirt, failure drills ---------
.PHONY: vagrant-box vagrant-up drills vagrant-down vagrant-check

vagrant-box:  ## build the local Debian box offline (debootstrap); idempotent
	bash vagrant/box/build-box.sh

vagrant-up:  ## box + offline artifacts + CP control-plane and WORKERS worker VMs, provisioned and Ready
	bash vagrant/scripts/up.sh

drills:  ## the failure drills against the VMs (DRILL=kill-leader|partition|worker-loss|full-restart|roll|restore|service-traffic|failures|operations|all)
	bash vagrant/scripts/drills.sh --drill $(or $(DRILL),all)

vagrant-down:  ## destroy the VMs (the box stays)
	bash vagrant/scripts/down.sh

vagrant-check:  ## shellcheck the VM scripts and vagrant validate the Vagrantfile
	bash scripts/check-vagrant.sh

# --- Failure drills on network namespaces (vagrant/drills/README.md; root) -----------
.PHONY: drills-netns
drills-netns: install  ## the failure drills on a cluster of network namespaces on this machine (DRILL=...|all)
	$(PYTHON) vagrant/drills/run_drills.py --target netns --drill $(or $(DRILL),all)

# --- Chaos suite (docs/chaos.md; root for the network cut) ----------------------------
.PHONY: chaos
chaos: install  ## chaos run by hand: KILLS leader kills (100) on REPLICAS replicas (3), report in REPORT (chaos-report.md)
	$(PYTHON) -m tests.chaos.run --leader-kills $(or $(KILLS),100) --replicas $(or $(REPLICAS),3) --report $(or $(REPORT),chaos-report.md)
