# A real Slurm on this machine (hack/slurm/: munged, slurmctld, SLURM_NODES slurmd from Debian) for the Slurm path of
# the bootstrap, and its tests: tests/slurm (part of `make test`: about 25 s with Slurm's start and stop) and
# tests/e2e/test_slurm_registration.py (part of the e2e suite: needs the local Kubernetes cluster).
# Private state under $(SLURM_DIR); what job users must read (slurm.conf, munge socket, spool, job runtime)
# under $(SLURM_PUBLIC_DIR). See hack/slurm/lib.sh.

SLURM_DIR ?= $(CACHE_DIR)/slurm
SLURM_PUBLIC_DIR ?= /run/arkouda-k8s-slurm
SLURM_SH := $(REPO_ROOT)/hack/slurm
SLURM_TEST_TIMEOUT ?= 300
export SLURM_DIR SLURM_PUBLIC_DIR

TEST_TARGETS += test-slurm
LINT_TARGETS += lint-slurm

.PHONY: slurm-up slurm-down slurm-runtime test-slurm lint-slurm

slurm-up: deps ## Start (or re-check) the local Slurm: munged, slurmctld, SLURM_NODES (2) slurmd; ends with a smoke job
	@$(SLURM_SH)/up.sh

slurm-down: ## Cancel its jobs, stop munged/slurmctld/slurmd, remove $(SLURM_DIR) and $(SLURM_PUBLIC_DIR)
	@$(SLURM_SH)/down.sh

slurm-runtime: slurm-up images-arkouda ## The stand-in server + bootstrap for Slurm jobs, from the Arkouda image
	@$(SLURM_SH)/runtime.sh

# The tests start Slurm themselves (and stop it again unless it was already up), so they need only the image.
test-slurm: venv deps images-arkouda ## The documented sbatch script on a real Slurm: stand-in over real ssh, getconfig, scancel
	@cd $(REPO_ROOT) && $(PY) -m pytest -p no:cacheprovider --timeout=$(SLURM_TEST_TIMEOUT) \
		-c tests/slurm/pytest.ini tests/slurm

lint-slurm: venv ## Lint the Slurm scripts (shellcheck) and tests (ruff, mypy --strict)
	@$(VENV)/bin/shellcheck -x -P $(SLURM_SH) $(SLURM_SH)/*.sh $(REPO_ROOT)/docs/slurm/arkouda.sbatch
	@cd $(REPO_ROOT) && ruff check --config tests/slurm/ruff.toml tests/slurm
	@cd $(REPO_ROOT) && ruff format --check --config tests/slurm/ruff.toml tests/slurm
	@cd $(REPO_ROOT) && MYPYPATH=tests/slurm:tests/bootstrap mypy --config-file $(BOOTSTRAP_PYPROJECT) --strict tests/slurm
