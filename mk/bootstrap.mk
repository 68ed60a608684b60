# bootstrap/: the arkouda-bootstrap Python entrypoint of every image.
# Lint and tests run from the shared venv with bootstrap/src on PYTHONPATH (mk/python.mk); the wheel that the
# images install is built with `python -m build` into $(REPO_ROOT)/_out/wheels/.

BOOTSTRAP_DIR := $(REPO_ROOT)/bootstrap
BOOTSTRAP_TESTS := $(REPO_ROOT)/tests/bootstrap
BOOTSTRAP_PYPROJECT := $(BOOTSTRAP_DIR)/pyproject.toml
WHEEL_DIR := $(REPO_ROOT)/_out/wheels
# per-test ceiling (pytest-timeout); the real-sshd tests take a few seconds each
BOOTSTRAP_TEST_TIMEOUT ?= 120

# The lowest kubernetes client pyproject.toml allows, in its own venv (cached by version) with the project's
# other pins: the tests that run the real client must pass on it too, or the floor is not true.
KUBERNETES_FLOOR := $(shell sed -n 's/^ *"kubernetes>=\([0-9.]*\)".*/\1/p' $(BOOTSTRAP_PYPROJECT))
FLOOR_VENV := $(CACHE_DIR)/venv-kubernetes-$(KUBERNETES_FLOOR)-$(PY_REQS_HASH)
FLOOR_PINS := cryptography tenacity prometheus-client paramiko pyzmq pytest pytest-timeout
BOOTSTRAP_CLIENT_TESTS := $(BOOTSTRAP_TESTS)/test_kube_api.py $(BOOTSTRAP_TESTS)/test_kube_models.py \
	$(BOOTSTRAP_TESTS)/test_registration.py

LINT_TARGETS += lint-bootstrap
TEST_TARGETS += test-bootstrap test-bootstrap-floor

.PHONY: lint-bootstrap test-bootstrap test-bootstrap-floor bootstrap-wheel bootstrap-docs

lint-bootstrap: venv ## Lint the bootstrap: ruff check, ruff format --check, mypy --strict (src and tests), README flag tables
	@cd $(REPO_ROOT) && ruff check --config $(BOOTSTRAP_PYPROJECT) bootstrap/src tests/bootstrap
	@cd $(REPO_ROOT) && ruff format --check --config $(BOOTSTRAP_PYPROJECT) bootstrap/src tests/bootstrap
	@cd $(REPO_ROOT) && mypy --config-file $(BOOTSTRAP_PYPROJECT) --strict bootstrap/src tests/bootstrap
	@cd $(REPO_ROOT) && python -m arkouda_bootstrap.cli.docs --check $(BOOTSTRAP_DIR)/README.md \
		&& echo "lint-bootstrap: ok   README flag tables up to date"

# The README's flag tables are generated from the option tables of the CLI (bootstrap/src/arkouda_bootstrap/cli/).
bootstrap-docs: venv ## Regenerate the flag tables of bootstrap/README.md from the CLI's option tables
	@cd $(REPO_ROOT) && python -m arkouda_bootstrap.cli.docs $(BOOTSTRAP_DIR)/README.md

test-bootstrap: venv ## Run the bootstrap's pytest suite (unit, real OpenSSH sshd/ssh, real child processes)
	@cd $(REPO_ROOT) && python -m pytest -p no:cacheprovider --timeout=$(BOOTSTRAP_TEST_TIMEOUT) \
		-c $(BOOTSTRAP_TESTS)/pytest.ini $(BOOTSTRAP_TESTS)

test-bootstrap-floor: $(FLOOR_VENV)/.done ## Run the bootstrap's client tests on the lowest kubernetes client pyproject.toml allows
	@cd $(REPO_ROOT) && $(FLOOR_VENV)/bin/python -m pytest -q -p no:cacheprovider --timeout=$(BOOTSTRAP_TEST_TIMEOUT) \
		-c $(BOOTSTRAP_TESTS)/pytest.ini $(BOOTSTRAP_CLIENT_TESTS)

$(FLOOR_VENV)/.done: $(PY_REQS) $(BOOTSTRAP_PYPROJECT)
	@test -n "$(KUBERNETES_FLOOR)" || { echo "test-bootstrap-floor: no \"kubernetes>=N\" in $(BOOTSTRAP_PYPROJECT)" >&2; exit 1; }
	@echo "venv: creating $(FLOOR_VENV) (kubernetes==$(KUBERNETES_FLOOR))"
	@rm -rf $(FLOOR_VENV) && python3 -m venv $(FLOOR_VENV)
	@grep -E '^($(shell echo $(FLOOR_PINS) | tr ' ' '|'))==' $(PY_REQS) > $(FLOOR_VENV)/requirements.txt
	@$(FLOOR_VENV)/bin/pip install -q --disable-pip-version-check "kubernetes==$(KUBERNETES_FLOOR)" -r $(FLOOR_VENV)/requirements.txt
	@touch $@

bootstrap-wheel: venv ## Build the arkouda-bootstrap wheel into _out/wheels/ (installed by the images)
	@mkdir -p $(WHEEL_DIR)
	@cd $(BOOTSTRAP_DIR) && python -m build --wheel --outdir $(WHEEL_DIR) . >/dev/null
	@rm -rf $(BOOTSTRAP_DIR)/build $(BOOTSTRAP_DIR)/src/*.egg-info
	@ls $(WHEEL_DIR)/arkouda_bootstrap-*.whl

# The licenses of the bootstrap's runtime dependencies and their whole closure (docs/licenses.md):
# hack/tools/licenses.py reads the metadata of what the venv has installed, fails on a GPL dependency and on a
# table that disagrees. Its tests (fake dist-info doubles in a temp dir) are tests/tools/, run by test-tools.
LICENSES_PY := $(REPO_ROOT)/hack/tools/licenses.py
TOOLS_TESTS := $(REPO_ROOT)/tests/tools
LINT_TARGETS += lint-licenses
TEST_TARGETS += test-tools

.PHONY: lint-licenses test-tools

lint-licenses: venv ## Licenses of the bootstrap's runtime closure: none GPL, docs/licenses.md agrees; ruff + mypy --strict of the check
	@cd $(REPO_ROOT) && ruff check --config docker/ruff.toml $(LICENSES_PY) \
	  && ruff format --check --config docker/ruff.toml $(LICENSES_PY)
	@cd $(REPO_ROOT) && ruff check --config $(TOOLS_TESTS)/ruff.toml $(TOOLS_TESTS) \
	  && ruff format --check --config $(TOOLS_TESTS)/ruff.toml $(TOOLS_TESTS)
	@cd $(REPO_ROOT) && MYPYPATH=hack/tools mypy --strict --python-version 3.11 --no-incremental $(LICENSES_PY) $(TOOLS_TESTS)
	@$(PY) $(LICENSES_PY)

test-tools: venv chart-deps ## Tests of the checks under hack/tools (the license check against fake dist-info doubles) and of the chart README's RBAC table against the rendered Roles
	@cd $(REPO_ROOT) && $(PY) -m pytest -q -p no:cacheprovider -c $(TOOLS_TESTS)/pytest.ini $(TOOLS_TESTS)
