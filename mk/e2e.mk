# End-to-end suite and demo on a real cluster: the project's local one-node Kubernetes (hack/cluster/,
# mk/cluster.mk) unless told otherwise.

E2E_PYTEST_ARGS ?=
E2E_TARGETS += e2e-run e2e-ct
LINT_TARGETS += lint-e2e

.PHONY: e2e-run e2e-ct e2e-prepare lint-e2e demo

# The cluster and the images the suite needs: the node, then `make images`, then the images imported into
# the node's containerd (values/local.yaml never pulls).
e2e-prepare: images cluster-up cluster-load-images

e2e-run: e2e-prepare venv
	@export KUBECONFIG="$$($(MAKE) -s cluster-kubeconfig)"; \
	  echo "e2e: KUBECONFIG=$$KUBECONFIG"; \
	  cd $(REPO_ROOT) && $(PY) -m pytest -c tests/e2e/pytest.ini tests/e2e -v -s -p no:cacheprovider --timeout=1800 \
	    -o log_cli=true -o log_cli_level=INFO $(E2E_PYTEST_ARGS)

# chart-testing as Helm users run it: every charts/arkouda/ci/*-values.yaml installed (--wait), `helm test`ed and
# uninstalled, each in a namespace of its own (ct.yaml; the same command runs on kind in a fork's CI).
e2e-ct: e2e-prepare venv
	@export KUBECONFIG="$$($(MAKE) -s cluster-kubeconfig)"; t0=$$SECONDS; \
	  cd $(REPO_ROOT) && ct install $(CT_FLAGS) && echo "e2e-ct: every ci/*-values.yaml scenario passed in $$((SECONDS - t0))s"

lint-e2e: venv
	@cd $(REPO_ROOT) && $(VENV)/bin/ruff check --config tests/e2e/ruff.toml tests/e2e && \
	  $(VENV)/bin/mypy --strict --ignore-missing-imports tests/e2e

demo: tools ## Run the main job: local node (or current context), images, MPI hybrid demo, helm test
	@$(REPO_ROOT)/hack/demo.sh
