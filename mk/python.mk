# The project's Python environment: one venv in the tools cache, keyed by the hash of requirements-dev.txt,
# so a change of pins makes a new venv and an unchanged one is reused across clones. The bootstrap is not
# installed into it (several clones share the venv); recipes put bootstrap/src on PYTHONPATH instead.

PY_REQS := $(REPO_ROOT)/requirements-dev.txt
PY_REQS_HASH := $(shell sha256sum $(PY_REQS) | cut -c1-12)
VENV := $(CACHE_DIR)/venv-$(PY_REQS_HASH)
PY := $(VENV)/bin/python
export VENV
export PYTHONPATH := $(REPO_ROOT)/bootstrap/src$(if $(PYTHONPATH),:$(PYTHONPATH))
export PATH := $(VENV)/bin:$(PATH)

TOOLS_TARGETS += venv

.PHONY: venv
venv: $(VENV)/.done ## Create the pinned Python venv in the tools cache

$(VENV)/.done: $(PY_REQS)
	@echo "venv: creating $(VENV)"
	@python3 -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check -r $(PY_REQS)
	@touch $@
