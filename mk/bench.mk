# Benchmarks: `make bench` runs every part, each writing $(RESULTS_DIR)/parts/<part>.json,
# then `bench-report` merges them into $(RESULTS_DIR)/bench.csv + bench.json and prints one table.
# The harness is bench/src/arkouda_bench (see bench/README.md); it runs as root (it creates the unprivileged
# `arkbench` user whose sshd serves every loopback "host").

BENCH_REPEATS ?= 3
BENCH_FANOUT_HOSTS ?= 16,64,256
BENCH_SCALE_LOCALES ?= 8,64,256,1024
BENCH_PROFILE_N ?= 1024
BENCH_LAUNCH_LOCALES ?= 2,8,32,64
BENCH_LAUNCH_BEFORE ?= 32,64
BENCH_GATE_REPEATS ?= 5
BENCH_PY = PYTHONPATH=$(REPO_ROOT)/bench/src:$(PYTHONPATH) $(PY) -m arkouda_bench --results-dir $(RESULTS_DIR) --repo-root $(REPO_ROOT)

BENCH_TARGETS += bench-start bench-fanout bench-scale bench-cluster bench-launch bench-gate bench-checkpoint bench-nodeloss bench-queue bench-report
LINT_TARGETS += lint-bench
TEST_TARGETS += test-bench

.PHONY: bench-start bench-fanout bench-scale bench-cluster bench-launch bench-gate bench-checkpoint bench-nodeloss bench-queue bench-report lint-bench test-bench

bench-start: venv
	@rm -rf $(RESULTS_DIR)/parts
	@mkdir -p $(RESULTS_DIR)

bench-fanout: venv ## ssh fan-out rows: parallel ssh, OpenSSH default vs ours vs ours+pre-warm (BENCH_FANOUT_HOSTS, BENCH_REPEATS)
	@$(BENCH_PY) fanout --hosts $(BENCH_FANOUT_HOSTS) --repeats $(BENCH_REPEATS)

bench-scale: venv cluster-tools ## scale rows: the bootstrap's server against a real kube-apiserver at N locales (BENCH_SCALE_LOCALES)
	@$(BENCH_PY) scale --locales $(BENCH_SCALE_LOCALES) --repeats $(BENCH_REPEATS) --profile-n $(BENCH_PROFILE_N)

# The cluster rows need the local node with the images loaded (make e2e-prepare) and the host Himeno build. If getting
# there fails, the rows say `not run: <reason>` (with the log) instead of stopping the other rows.
bench-cluster: venv ## cluster rows on the local node: helm install phases, recovery, Himeno pod vs host
	@mkdir -p $(RESULTS_DIR)
	@echo "bench-cluster: make e2e-prepare mpi-demo-host (log: $(RESULTS_DIR)/cluster-prepare.log)"
	@if $(MAKE) e2e-prepare mpi-demo-host > $(RESULTS_DIR)/cluster-prepare.log 2>&1; then \
	  KUBECONFIG="$$($(MAKE) -s cluster-kubeconfig)" $(BENCH_PY) cluster --repeats $(BENCH_REPEATS); \
	else \
	  reason="$$(grep -v '^make' $(RESULTS_DIR)/cluster-prepare.log | tail -n 1)"; \
	  $(BENCH_PY) cluster --not-run "make e2e-prepare mpi-demo-host failed: $$reason (see $(RESULTS_DIR)/cluster-prepare.log)"; \
	fi

# $(call bench_on_cluster,PART,ARGS[,NOT_RUN_ARGS]): `make e2e-prepare` (its log in RESULTS_DIR), then the part against
# the local cluster; if getting there fails, the part records its rows as `not run: <the log's last line>`.
define bench_on_cluster
	@mkdir -p $(RESULTS_DIR)
	@echo "bench-$(1): make e2e-prepare (log: $(RESULTS_DIR)/$(1)-prepare.log)"
	@if $(MAKE) e2e-prepare > $(RESULTS_DIR)/$(1)-prepare.log 2>&1; then \
	  KUBECONFIG="$$($(MAKE) -s cluster-kubeconfig)" $(BENCH_PY) $(1) $(2); \
	else \
	  reason="$$(grep -v '^make' $(RESULTS_DIR)/$(1)-prepare.log | tail -n 1)"; \
	  $(BENCH_PY) $(1) $(3) --not-run "make e2e-prepare failed: $$reason (see $(RESULTS_DIR)/$(1)-prepare.log)"; \
	fi
endef

# The real launcher (GASNet-EX's amudprun) at BENCH_LAUNCH_LOCALES on one node and spread over the three, with the
# datagrams dropped per launch; BENCH_LAUNCH_BEFORE also with Linux's neighbour table thresholds. Same guard as above.
bench-launch: venv ## amudprun start → all locales past the GASNet barrier, drops, ssh CPU per host (BENCH_LAUNCH_LOCALES, BENCH_LAUNCH_BEFORE)
	$(call bench_on_cluster,launch,--locales $(BENCH_LAUNCH_LOCALES) $(if $(BENCH_LAUNCH_BEFORE),--before $(BENCH_LAUNCH_BEFORE)) --repeats $(BENCH_REPEATS),--locales $(BENCH_LAUNCH_LOCALES))

# The idle gate against a direct connection, on loopback (the product's Gate in a process of its own, pyzmq
# REQ/REP); BENCH_GATE_CLUSTER=1 adds the local node's rows (wake → first reply, idle → pods gone; needs
# KUBECONFIG and the images loaded, i.e. make e2e-prepare).
bench-gate: venv ## idle gate rows: round-trip overhead and 256 MiB throughput vs direct; BENCH_GATE_CLUSTER=1: wake/sleep on the node
	@$(BENCH_PY) gate --repeats $(BENCH_GATE_REPEATS) $(if $(BENCH_GATE_CLUSTER),--cluster)

# Lossless sleep on the local 3-node cluster (global.idle.checkpoint on its ReadWriteMany hostPath class): the gate's
# save and load of 64 and 512 MiB, and a wake with and without the load; same guard as bench-launch.
bench-checkpoint: venv ## checkpoint rows: save/load of 64 and 512 MiB through the gate, wake with and without the load
	$(call bench_on_cluster,checkpoint,--repeats $(BENCH_REPEATS))

# Node loss on the local 3-node cluster: a locale's node killed and restored, 3 times; same guard as bench-launch.
bench-nodeloss: venv ## node loss rows: a locale's node killed → LocaleLost, NodeLost, program relaunched, release Ready
	$(call bench_on_cluster,nodeloss,--repeats $(BENCH_REPEATS))

# Queueing through the local cluster's Kueue (hack/cluster/kueue.sh): quota freed → queued release Ready, beside the
# same install on an empty queue, same run; same guard as bench-launch.
bench-queue: venv ## Kueue rows: quota freed (helm uninstall of the first) → queued release Ready, vs the same install on an empty queue
	$(call bench_on_cluster,queue,--repeats $(BENCH_REPEATS))

bench-report: venv ## Merge the bench parts into $(RESULTS_DIR)/bench.{csv,json} and print the table
	@$(BENCH_PY) report

lint-bench: venv ## ruff + mypy --strict on bench/
	@cd $(REPO_ROOT)/bench && ruff check . && ruff format --check . && mypy --strict src tests

test-bench: venv ## Unit tests of the bench harness (no timing is asserted)
	@cd $(REPO_ROOT)/bench && PYTHONPATH=$(REPO_ROOT)/bench/src:$(PYTHONPATH) pytest -q -p no:cacheprovider tests
