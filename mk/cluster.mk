# The local one-node Kubernetes (hack/cluster/, design and versions in hack/cluster/README.md): binaries built
# from the Go module proxy into the tools cache, cached by version; the node's state under $(CLUSTER_DIR).
# cluster-tools is not part of `make tools` (a cold build takes long); cluster-up builds what is missing.

CLUSTER_DIR ?= $(CACHE_DIR)/cluster
export CLUSTER_DIR
# Nodes of the cluster: node 0 on the host, nodes 1..NODES-1 each in a network namespace (hack/cluster/node.sh).
NODES ?= 1
export NODES
CLUSTER_SH := $(REPO_ROOT)/hack/cluster

LINT_TARGETS += lint-cluster

.PHONY: cluster-tools cluster-tools-mod cluster-up cluster-down cluster-load-images cluster-kubeconfig \
	cluster-smoke lint-cluster cluster-node-add cluster-node-remove

cluster-tools: ## Build etcd, the Kubernetes components, kubectl and CoreDNS into the tools cache (cached by version)
	@$(CLUSTER_SH)/build.sh

cluster-tools-mod: ## Regenerate hack/cluster/tools/*/go.mod for the versions in hack/versions.env (then commit)
	@$(CLUSTER_SH)/gen-tools-mod.sh

cluster-up: deps cluster-tools venv ## Start (or re-check) the local cluster with NODES nodes (default 1); prints each phase's duration
	@KUEUE_PYTHON=$(PY) $(CLUSTER_SH)/up.sh

cluster-down: ## Stop the local cluster's processes and remove its mounts, network, iptables chains and state
	@$(CLUSTER_SH)/down.sh

cluster-node-add: ## Add (or re-check) extra node NODE=i (1..99) to the running cluster, images included
	@test -n "$(NODE)" || { echo "cluster-node-add: set NODE=<index 1..99>" >&2; exit 1; }
	@$(CLUSTER_SH)/node.sh add $(NODE)

cluster-node-remove: ## Remove extra node NODE=i with its pods, processes, netns, routes, cgroups and state
	@test -n "$(NODE)" || { echo "cluster-node-remove: set NODE=<index 1..99>" >&2; exit 1; }
	@$(CLUSTER_SH)/node.sh remove $(NODE)

cluster-load-images: ## Import every image archive in $(CACHE_DIR)/images into the node's containerd (k8s.io)
	@$(CLUSTER_SH)/load-images.sh

cluster-kubeconfig: ## Print the path of the local cluster's admin kubeconfig
	@echo "$(CLUSTER_DIR)/kubeconfig/admin.kubeconfig"

cluster-smoke: ## Re-run the cluster smoke test (restricted pod -> Service DNS name -> pod)
	@$(CLUSTER_SH)/smoke.sh

lint-cluster: venv ## Lint the cluster scripts (shellcheck; ruff and mypy --strict of their Python)
	@$(VENV)/bin/shellcheck -x -P $(CLUSTER_SH) $(CLUSTER_SH)/*.sh && echo "lint-cluster: shellcheck clean"
	@$(VENV)/bin/ruff check $(CLUSTER_SH)/*.py && $(VENV)/bin/ruff format --check $(CLUSTER_SH)/*.py && \
	  $(VENV)/bin/mypy --strict $(CLUSTER_SH)/*.py
