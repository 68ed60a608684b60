# bootstrap/: the arkouda-bootstrap Python entrypoint of every image (issue 2) and its ssh tuning (issue 7).
# Lint and tests run from the shared venv with bootstrap/src on PYTHONPATH (mk/python.mk); the wheel that the
# images install is built with `python -m build` into $(REPO_ROOT)/_out/wheels/.

BOOTSTRAP_DIR := $(REPO_ROOT)/bootstrap
BOOTSTRAP_TESTS := $(REPO_ROOT)/tests/bootstrap
BOOTSTRAP_PYPROJECT := $(BOOTSTRAP_DIR)/pyproject.toml
WHEEL_DIR := $(REPO_ROOT)/_out/wheels
# per-test ceiling (pytest-timeout); the real-sshd tests take a few seconds each
BOOTSTRAP_TEST_TIMEOUT ?= 120

LINT_TARGETS += lint-bootstrap
TEST_TARGETS += test-bootstrap

.PHONY: lint-bootstrap test-bootstrap bootstrap-wheel

lint-bootstrap: venv ## Lint the bootstrap: ruff check, ruff format --check, mypy --strict (src and tests)
	@cd $(REPO_ROOT) && ruff check --config $(BOOTSTRAP_PYPROJECT) bootstrap/src tests/bootstrap
	@cd $(REPO_ROOT) && ruff format --check --config $(BOOTSTRAP_PYPROJECT) bootstrap/src tests/bootstrap
	@cd $(REPO_ROOT) && mypy --config-file $(BOOTSTRAP_PYPROJECT) --strict bootstrap/src tests/bootstrap

test-bootstrap: venv ## Run the bootstrap's pytest suite (unit, real OpenSSH sshd/ssh, real child processes)
	@cd $(REPO_ROOT) && python -m pytest -p no:cacheprovider --timeout=$(BOOTSTRAP_TEST_TIMEOUT) \
		-c $(BOOTSTRAP_TESTS)/pytest.ini $(BOOTSTRAP_TESTS)

bootstrap-wheel: venv ## Build the arkouda-bootstrap wheel into _out/wheels/ (installed by the images)
	@mkdir -p $(WHEEL_DIR)
	@cd $(BOOTSTRAP_DIR) && python -m build --wheel --outdir $(WHEEL_DIR) . >/dev/null
	@rm -rf $(BOOTSTRAP_DIR)/build $(BOOTSTRAP_DIR)/src/*.egg-info
	@ls $(WHEEL_DIR)/arkouda_bootstrap-*.whl
