# Charts: the helm + helm-unittest toolchain and the chart checks.
#
# helm and helm-unittest are built from one Go module of ours (hack/tools: helm-unittest >= v1.0.2 carries a
# `replace` directive, which Go ignores in a dependency, so our module repeats it). The binaries come from one
# `go build`, so the unittest plugin renders with the exact helm library of the helm CLI; psscheck
# (hack/tools/cmd/psscheck) checks rendered pods with Kubernetes' own Pod Security admission library. The build lands in a
# cache dir keyed by both versions and the hash of hack/tools (go.mod, go.sum, cmd/), skipped when present.
# Helm's own state (plugins, repositories, cache) lives under $(CACHE_DIR) too, never in ~/.config.

CHART_DIR := $(REPO_ROOT)/charts/arkouda
CHART_SUBCHARTS := $(CHART_DIR)/charts/arkouda-locale $(CHART_DIR)/charts/arkouda-server
CHART_VALUES := $(sort $(wildcard $(REPO_ROOT)/values/*.yaml))
HELM_TOOLS_MOD := $(REPO_ROOT)/hack/tools
HELM_TOOLS_HASH := $(shell cat $(HELM_TOOLS_MOD)/go.mod $(HELM_TOOLS_MOD)/go.sum $(sort $(wildcard $(HELM_TOOLS_MOD)/cmd/*/*.go)) 2>/dev/null | sha256sum | cut -c1-12)
HELM_TOOLS_DIR := $(CACHE_DIR)/helm-$(HELM_VERSION)-unittest-$(HELM_UNITTEST_VERSION)-ct-$(CT_VERSION)-$(HELM_TOOLS_HASH)
# ct's yamllint rules and Chart.yaml schema, copied from the module it was built from (ct lint needs both files).
CT_ETC := $(HELM_TOOLS_DIR)/ct-etc
CT_FLAGS = --config $(REPO_ROOT)/ct.yaml
CT_LINT_FLAGS = $(CT_FLAGS) --lint-conf $(CT_ETC)/lintconf.yaml --chart-yaml-schema $(CT_ETC)/chart_schema.yaml
HELM_HOME := $(CACHE_DIR)/helm-home
export HELM_CONFIG_HOME := $(HELM_HOME)/config
export HELM_CACHE_HOME := $(HELM_HOME)/cache
export HELM_DATA_HOME := $(HELM_HOME)/data
export HELM_PLUGINS := $(HELM_TOOLS_DIR)/plugins

TOOLS_TARGETS += tools-helm tools-actionlint
LINT_TARGETS += lint-charts lint-workflows
TEST_TARGETS += test-charts

.PHONY: tools-helm lint-charts test-charts update-chart-snapshots chart-docs chart-schemas chart-deps package
CHART_VERSION = $(shell sed -n 's/^version: *//p' $(CHART_DIR)/Chart.yaml)
PACKAGE_DIR := $(REPO_ROOT)/_out/charts

package: tools-helm chart-deps ## Package the chart into _out/charts/arkouda-<version>.tgz (what a chart repository or OCI registry serves)
	@mkdir -p $(PACKAGE_DIR) && helm package $(CHART_DIR) -d $(PACKAGE_DIR) >/dev/null
	@echo "package: $(PACKAGE_DIR)/arkouda-$(CHART_VERSION).tgz (push: helm push $(PACKAGE_DIR)/arkouda-$(CHART_VERSION).tgz oci://<registry>/<repo>)"


tools-helm: $(HELM_TOOLS_DIR)/.done ## Build pinned helm, helm-unittest (plugin), chart-testing (ct) and psscheck into the tools cache
	@ln -sfn $(HELM_TOOLS_DIR)/helm $(BIN)/helm
	@ln -sfn $(HELM_TOOLS_DIR)/ct $(BIN)/ct
	@ln -sfn $(HELM_TOOLS_DIR)/helm-unittest $(BIN)/helm-unittest
	@ln -sfn $(HELM_TOOLS_DIR)/psscheck $(BIN)/psscheck
	@echo "tools-helm: $$(helm version --short), helm unittest $$(helm plugin list | awk '$$1 == "unittest" {print $$2}')"

# The pins live in hack/versions.env; hack/tools/go.mod must require exactly those versions.
$(HELM_TOOLS_DIR)/.done:
	@grep -qE '^\s*helm\.sh/helm/v3 $(HELM_VERSION)( |$$)' $(HELM_TOOLS_MOD)/go.mod || { \
	  echo "tools-helm: hack/tools/go.mod does not require helm.sh/helm/v3 $(HELM_VERSION) (HELM_VERSION in hack/versions.env); run: cd hack/tools && go get -tool helm.sh/helm/v3/cmd/helm@$(HELM_VERSION) && go mod tidy" >&2; exit 1; }
	@grep -qE '^\s*github\.com/helm-unittest/helm-unittest $(HELM_UNITTEST_VERSION)( |$$)' $(HELM_TOOLS_MOD)/go.mod || { \
	  echo "tools-helm: hack/tools/go.mod does not require github.com/helm-unittest/helm-unittest $(HELM_UNITTEST_VERSION) (HELM_UNITTEST_VERSION in hack/versions.env); run: cd hack/tools && go get -tool github.com/helm-unittest/helm-unittest/cmd/helm-unittest@$(HELM_UNITTEST_VERSION) && go mod tidy" >&2; exit 1; }
	@grep -qE '^\s*github\.com/helm/chart-testing/v3 $(CT_VERSION)( |$$)' $(HELM_TOOLS_MOD)/go.mod || { \
	  echo "tools-helm: hack/tools/go.mod does not require github.com/helm/chart-testing/v3 $(CT_VERSION) (CT_VERSION in hack/versions.env); run: cd hack/tools && go get -tool github.com/helm/chart-testing/v3/ct@$(CT_VERSION) && go mod tidy" >&2; exit 1; }
	@command -v go >/dev/null || { echo "tools-helm: no 'go' on PATH (Go >= 1.26 builds helm $(HELM_VERSION))" >&2; exit 1; }
	@echo "tools-helm: building helm $(HELM_VERSION) and helm-unittest $(HELM_UNITTEST_VERSION) into $(HELM_TOOLS_DIR) (several minutes on 2 cores)"
	@mkdir -p $(BIN) $(HELM_HOME) && rm -rf $(HELM_TOOLS_DIR).tmp && mkdir -p $(HELM_TOOLS_DIR).tmp
	@set -e; cd $(HELM_TOOLS_MOD); \
	  k8s=$$(go list -m -f '{{.Version}}' k8s.io/client-go); k8s=$${k8s#v}; kmaj=$$(( $${k8s%%.*} + 1 )); kmin=$$(echo $$k8s | cut -d. -f2); \
	  start=$$(date +%s); \
	  go build -mod=readonly -trimpath -o $(HELM_TOOLS_DIR).tmp/ -ldflags "-s -w \
	    -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) -X helm.sh/helm/v3/internal/version.gitTreeState=clean \
	    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$$kmaj -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$kmin \
	    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$$kmaj -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$kmin \
	    -X github.com/helm/chart-testing/v3/ct/cmd.Version=$(CT_VERSION)" \
	    helm.sh/helm/v3/cmd/helm github.com/helm-unittest/helm-unittest/cmd/helm-unittest \
	    github.com/helm/chart-testing/v3/ct ./cmd/psscheck; \
	  mkdir -p $(HELM_TOOLS_DIR).tmp/ct-etc; \
	  cp "$$(go list -m -f '{{.Dir}}' github.com/helm/chart-testing/v3)"/etc/lintconf.yaml \
	     "$$(go list -m -f '{{.Dir}}' github.com/helm/chart-testing/v3)"/etc/chart_schema.yaml $(HELM_TOOLS_DIR).tmp/ct-etc/; \
	  chmod 0644 $(HELM_TOOLS_DIR).tmp/ct-etc/*; \
	  echo "tools-helm: built in $$(( $$(date +%s) - start ))s (default Kubernetes version for templates: v$$kmaj.$$kmin)"
	@# helm-unittest as a helm plugin without its download hooks: our binary plus a plugin.yaml naming it.
	@mkdir -p $(HELM_TOOLS_DIR).tmp/plugins/unittest
	@ln -s ../../helm-unittest $(HELM_TOOLS_DIR).tmp/plugins/unittest/untt
	@printf '%s\n' 'name: "unittest"' 'version: "$(patsubst v%,%,$(HELM_UNITTEST_VERSION))"' \
	  'usage: "unittest for helm charts"' 'description: "helm-unittest built from hack/tools (mk/charts.mk)"' \
	  'ignoreFlags: false' 'command: "$$HELM_PLUGIN_DIR/untt"' > $(HELM_TOOLS_DIR).tmp/plugins/unittest/plugin.yaml
	@rm -rf $(HELM_TOOLS_DIR) && mv $(HELM_TOOLS_DIR).tmp $(HELM_TOOLS_DIR) && touch $@

CHART_UNITTEST_FLAGS ?=

# The arkouda-common library chart (charts/arkouda/charts/arkouda-common) serves the umbrella chart from there;
# each subchart names it as a file:// dependency, so `helm dependency update` copies it into the subchart's charts/
# (gitignored) for the subchart rendered alone: its helm-unittest suites, helm lint --with-subcharts, the package.
# Cheap and offline (file:// only), so it runs before every target that needs it and the copy is never stale.
chart-deps: ## Copy the arkouda-common library chart into each subchart (helm dependency update)
	@for c in $(CHART_SUBCHARTS); do helm dependency update --skip-refresh $$c >/dev/null || exit 1; done

# The helm test scripts run in the arkouda image (python3, and the stand-in's replay client there): the images'
# ruff settings, mypy --strict with the stand-in on the path; their tests are tests/images/test_helm_test_scripts.py.
CHART_PY := $(CHART_DIR)/files
# The generators of the chart's shared schema/values sections and of its README values reference.
CHART_TOOLS_PY := $(REPO_ROOT)/hack/tools/chart-schemas.py $(REPO_ROOT)/hack/tools/chart-docs.py

lint-charts: venv chart-deps ## helm lint --strict, helm template and Pod Security "restricted" (psscheck) for the defaults and every values/*.yaml
	@cd $(REPO_ROOT) && $(VENV)/bin/ruff check --config docker/ruff.toml $(CHART_PY) && \
	  $(VENV)/bin/ruff format --check --config docker/ruff.toml $(CHART_PY) && \
	  MYPYPATH=docker/arkouda/standin/lib $(VENV)/bin/mypy --strict --python-version 3.11 --no-incremental $(CHART_PY)
	@cd $(REPO_ROOT) && $(VENV)/bin/ruff check --config docker/ruff.toml $(CHART_TOOLS_PY) && \
	  $(VENV)/bin/ruff format --check --config docker/ruff.toml $(CHART_TOOLS_PY) && \
	  $(VENV)/bin/mypy --strict --python-version 3.11 --no-incremental $(CHART_TOOLS_PY)
	@$(VENV)/bin/shellcheck $(CHART_DIR)/charts/*/files/*.sh && echo "lint-charts: ok   shellcheck of the charts' files/*.sh"
	@$(REPO_ROOT)/hack/tools/lint-charts.sh $(CHART_DIR) $(CHART_VALUES)
	@# The package users install: it renders on its own, carries the helm test scripts, and no test suites.
	@$(MAKE) -s package >/dev/null && tgz=$(PACKAGE_DIR)/arkouda-$(CHART_VERSION).tgz \
	  && helm template lint $$tgz --namespace lint >/dev/null && listing=$$(tar -tzf $$tgz) \
	  && grep -qx 'arkouda/files/helm-test-arkouda.py' <<<"$$listing" \
	  && ! grep -qE '^arkouda/(charts/[^/]+/)?(tests|ci)/' <<<"$$listing" \
	  && echo "lint-charts: ok   helm package: $$tgz renders, has files/, no tests/ or ci/" \
	  || { echo "lint-charts: FAIL helm package (make package; tar -tzf $(PACKAGE_DIR)/arkouda-$(CHART_VERSION).tgz)" >&2; exit 1; }
	@mkdir -p $(REPO_ROOT)/_out && cd $(REPO_ROOT) && ct lint $(CT_LINT_FLAGS) >$(REPO_ROOT)/_out/ct-lint.log 2>&1 \
	  && echo "lint-charts: ok   ct lint (yamllint, Chart.yaml schema, helm lint with every ci/*-values.yaml)" \
	  || { cat $(REPO_ROOT)/_out/ct-lint.log >&2; echo "lint-charts: FAIL ct lint" >&2; exit 1; }
	@$(PY) $(REPO_ROOT)/hack/tools/chart-docs.py --check $(CHART_DIR) && echo "lint-charts: ok   README values reference up to date"

test-charts: chart-deps ## helm-unittest suites of the umbrella chart and both subcharts
	@helm unittest --color=false --strict --with-subchart=false $(CHART_UNITTEST_FLAGS) $(CHART_DIR) $(CHART_SUBCHARTS)

update-chart-snapshots: chart-deps ## Re-write the helm-unittest snapshots after an intended template change (review the diff)
	@helm unittest --color=false --strict --with-subchart=false --update-snapshot $(CHART_DIR) $(CHART_SUBCHARTS)

chart-docs: venv ## Regenerate the values reference at the end of charts/arkouda/README.md from the schemas
	@$(PY) $(REPO_ROOT)/hack/tools/chart-docs.py $(CHART_DIR)

chart-schemas: ## Copy the shared global values/schema (charts/arkouda/charts/arkouda-common/global/) into the three charts
	@python3 $(REPO_ROOT)/hack/tools/chart-schemas.py $(CHART_DIR)

# The workflow users run on GitHub (.github/workflows) cannot run here; actionlint checks it (with the venv's
# shellcheck on PATH it also checks every `run:` script).
ACTIONLINT_DIR := $(CACHE_DIR)/actionlint-$(ACTIONLINT_VERSION)

tools-actionlint: $(ACTIONLINT_DIR)/actionlint ## Build the pinned actionlint into the tools cache (go install from the Go module proxy)
	@ln -sfn $(ACTIONLINT_DIR)/actionlint $(BIN)/actionlint

$(ACTIONLINT_DIR)/actionlint:
	@command -v go >/dev/null || { echo "tools-actionlint: no 'go' on PATH" >&2; exit 1; }
	@mkdir -p $(BIN) && rm -rf $(ACTIONLINT_DIR).tmp && mkdir -p $(ACTIONLINT_DIR).tmp
	@GOBIN=$(ACTIONLINT_DIR).tmp go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	@rm -rf $(ACTIONLINT_DIR) && mv $(ACTIONLINT_DIR).tmp $(ACTIONLINT_DIR)

lint-workflows: venv tools-actionlint ## actionlint (and shellcheck of its run: scripts) on .github/workflows
	@cd $(REPO_ROOT) && actionlint -shellcheck $(VENV)/bin/shellcheck .github/workflows/*.yaml \
	  && echo "lint-workflows: actionlint clean ($$(ls .github/workflows/*.yaml | wc -l) workflow(s))"
