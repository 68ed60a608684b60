# Arkouda on Kubernetes — the one front door. `make help` lists the targets.
#
# Layout: this file holds the shared settings and the aggregate targets; each area adds its own targets in
# mk/<area>.mk and registers them in TOOLS_TARGETS / LINT_TARGETS / TEST_TARGETS / IMAGES_TARGETS / ... .
# Tools are installed into $(BIN) (outside the repo, cached by version) and $(BIN) is first on PATH for
# every recipe.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

REPO_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
include $(REPO_ROOT)/hack/versions.env
export $(shell sed -n 's/^\([A-Z_][A-Z0-9_]*\)=.*/\1/p' $(REPO_ROOT)/hack/versions.env)

CACHE_DIR ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/arkouda-k8s
BIN := $(CACHE_DIR)/bin
RESULTS_DIR ?= $(REPO_ROOT)/results
export CACHE_DIR BIN RESULTS_DIR REPO_ROOT
export PATH := $(BIN):$(PATH)

TOOLS_TARGETS :=
LINT_TARGETS :=
TEST_TARGETS :=
IMAGES_TARGETS :=
E2E_TARGETS :=
BENCH_TARGETS :=

-include $(REPO_ROOT)/mk/python.mk
-include $(REPO_ROOT)/mk/bootstrap.mk
-include $(REPO_ROOT)/mk/charts.mk
-include $(REPO_ROOT)/mk/images.mk
-include $(REPO_ROOT)/mk/cluster.mk
-include $(REPO_ROOT)/mk/e2e.mk
-include $(REPO_ROOT)/mk/bench.mk
-include $(REPO_ROOT)/mk/slurm.mk

.PHONY: help deps tools lint test images e2e bench demo

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## Install the Debian packages the project needs (root; idempotent)
	@$(REPO_ROOT)/hack/install-deps.sh

tools: deps $(TOOLS_TARGETS) ## Install pinned tools into the cache dir (Python venv, helm, helm-unittest)

lint: tools $(LINT_TARGETS) ## Lint everything: Python (ruff, mypy --strict), charts, values files, Dockerfiles

test: tools $(TEST_TARGETS) ## Set up and run every test that needs no cluster (pytest, helm-unittest, images)

images: deps $(IMAGES_TARGETS) ## Build the images daemonless with buildah

e2e: tools $(E2E_TARGETS) ## Bring up the local Kubernetes node if needed and run the end-to-end suite

bench: tools $(BENCH_TARGETS) ## Run the benchmarks and print one table (results under $(RESULTS_DIR))
