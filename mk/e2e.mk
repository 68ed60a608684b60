# End-to-end suite and demo on a real cluster: the project's local one-node Kubernetes (hack/cluster/,
# mk/cluster.mk) unless told otherwise.

E2E_PYTEST_ARGS ?=
# Workers of the suite's concurrent phase (tests/e2e/run.sh; hack/cluster/README.md has the measurements).
E2E_WORKERS ?= 3
export E2E_WORKERS
# e2e-run runs ct install beside the suite's concurrent phase; e2e-ct is ct install alone.
E2E_TARGETS += e2e-run
LINT_TARGETS += lint-e2e

.PHONY: e2e-run e2e-ct e2e-prepare e2e-suite ct-install lint-e2e demo

# The cluster and the images the suite needs: the node, then `make images`, then the images imported into
# the node's containerd (values/local.yaml never pulls).
e2e-prepare: venv images cluster-up cluster-load-images

# Nodes of the e2e cluster (hack/cluster/README.md): node 0 and two extra nodes, kube-router enforcing
# NetworkPolicies on each, so releases spread over nodes and tests/e2e/test_multinode.py, test_node_loss.py run
# (they skip on one node). E2E_MULTUS=1 adds Multus and the secondary network arkouda-net1
# (tests/e2e/test_secondary_network.py skips without it). E2E_NODES=1 E2E_MULTUS=0 is the old one-node suite.
E2E_NODES ?= 3
E2E_MULTUS ?= 1
# E2E_KUEUE=1 installs Kueue (hack/cluster/kueue.sh; tests/e2e/test_kueue.py skips without it).
E2E_KUEUE ?= 1
e2e-prepare: NODES = $(E2E_NODES)
e2e-prepare: export CLUSTER_MULTUS = $(E2E_MULTUS)
e2e-prepare: export CLUSTER_KUEUE = $(E2E_KUEUE)
e2e-prepare: export KUEUE_PYTHON = $(PY)

e2e-run: e2e-prepare venv
	@KUBECONFIG="$$($(MAKE) -s cluster-kubeconfig)" $(MAKE) e2e-suite E2E_WITH_CT=1

e2e-ct: e2e-prepare venv
	@KUBECONFIG="$$($(MAKE) -s cluster-kubeconfig)" $(MAKE) ct-install

# The two parts on whatever cluster KUBECONFIG names, with the images already loaded there (a kind cluster in
# .github/workflows/chart-ci.yaml; the local node through e2e-run / e2e-ct above). The suite runs in two phases
# (tests/e2e/run.sh): the modules concurrently on E2E_WORKERS workers (with E2E_WITH_CT=1 ct install beside them),
# then the modules marked disruptive (they stop nodes) alone.
e2e-suite: venv ## The end-to-end suite against the cluster KUBECONFIG names (images loaded; E2E_PYTEST_ARGS, E2E_WORKERS)
	@test -n "$${KUBECONFIG:-}" || { echo "e2e-suite: KUBECONFIG must name the cluster to test" >&2; exit 1; }
	@echo "e2e: KUBECONFIG=$$KUBECONFIG"
	@$(REPO_ROOT)/tests/e2e/run.sh $(PY) $(if $(filter 1,$(E2E_WITH_CT)),--with-ct) -- $(E2E_PYTEST_ARGS)

# chart-testing as Helm users run it: every charts/arkouda/ci/*-values.yaml installed (--wait), `helm test`ed and
# uninstalled, each in a namespace of its own (ct.yaml).
ct-install: venv ## ct install of every charts/arkouda/ci/*-values.yaml against the cluster KUBECONFIG names
	@test -n "$${KUBECONFIG:-}" || { echo "ct-install: KUBECONFIG must name the cluster to test" >&2; exit 1; }
	@t0=$$SECONDS; cd $(REPO_ROOT) && ct install $(CT_FLAGS) \
	  && echo "ct-install: every ci/*-values.yaml scenario passed in $$((SECONDS - t0))s"

lint-e2e: venv
	@cd $(REPO_ROOT) && $(VENV)/bin/ruff check --config tests/e2e/ruff.toml tests/e2e && \
	  $(VENV)/bin/mypy --strict --ignore-missing-imports tests/e2e && $(VENV)/bin/shellcheck tests/e2e/run.sh

demo: tools ## Run the main job: local node (or current context), images, MPI hybrid demo, helm test
	@$(REPO_ROOT)/hack/demo.sh
