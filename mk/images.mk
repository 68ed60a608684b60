# Images: the Arkouda image (runtime stage with the stand-in server here) and the OpenMPI + OpenMP hybrid
# image, built daemonless with buildah on a Debian base made locally with debootstrap (no registry needed).
# The work is done by docker/images.sh; see docker/README.md. Everything is cached: a second `make images`
# with nothing changed rebuilds nothing.

IMAGE_BASE ?= $(IMAGE_PREFIX)/debian-base:$(DEBIAN_SUITE)
IMAGE_ARKOUDA := $(IMAGE_PREFIX)/arkouda:$(IMAGE_TAG)
IMAGE_MPI := $(IMAGE_PREFIX)/mpi:$(IMAGE_TAG)
IMAGE_ARCHIVE_DIR := $(CACHE_DIR)/images
# Which stage provides the Arkouda server binaries: standin (here) or arkouda (needs network, see README).
ARKOUDA_SERVER_STAGE ?= standin
MPI_DEMO_HOST_DIR := $(CACHE_DIR)/mpi-demo
IMAGES_SH := $(REPO_ROOT)/docker/images.sh
export IMAGE_BASE ARKOUDA_SERVER_STAGE

IMAGES_TARGETS += images-build images-archive
LINT_TARGETS += lint-images
TEST_TARGETS += test-images

.PHONY: images-base images-wheel images-gasnet images-runtime images-build images-arkouda images-arkouda-full \
        images-mpi images-archive \
        mpi-demo-host \
        test-images lint-images

images-base: ## Build the local Debian base image with debootstrap (cached by script hash)
	@$(IMAGES_SH) base

images-wheel: ## Build the bootstrap wheel the images install (cached by bootstrap/ source hash)
	@$(IMAGES_SH) wheel

images-gasnet: images-base ## Build GASNet-EX's udp conduit + amudprun image (cached by its inputs hash; GASNET_ARCHIVE=path|URL)
	@$(IMAGES_SH) gasnet

# Both images start from it; as a prerequisite it is built once even when make runs the two in parallel.
images-runtime: images-base images-wheel ## Build the runtime base both images start from (user arkouda, sshd, tini, the bootstrap)
	@$(IMAGES_SH) runtime

images-arkouda: images-runtime ## Build $(IMAGE_PREFIX)/arkouda:$(IMAGE_TAG) (stand-in server here)
	@$(IMAGES_SH) build arkouda

# The real Arkouda server instead of the stand-in, under the same image name: Chapel, Arkouda and Arrow are
# downloaded and compiled (network access; time and memory in docker/README.md). Pins
# from hack/versions.env (override e.g. CHAPEL_URL=<mirror>); ARKOUDA_MAKE_JOBS (default 4) sets make -j;
# ARKOUDA_CONFIG_FILE=<file in Arkouda's source> builds a trimmed module list, a faster smoke build only.
images-arkouda-full: images-runtime ## Build $(IMAGE_PREFIX)/arkouda:$(IMAGE_TAG) with the REAL Arkouda server + its archive (network; hours)
	@ARKOUDA_SERVER_STAGE=arkouda $(IMAGES_SH) build arkouda
	@$(IMAGES_SH) archive arkouda

images-mpi: images-runtime ## Build $(IMAGE_PREFIX)/mpi:$(IMAGE_TAG)
	@$(IMAGES_SH) build mpi

images-build: ## Build the base, arkouda and mpi images (cached; prints each phase's duration)
	@t0=$$SECONDS; \
	$(MAKE) images-arkouda images-mpi; \
	echo "images: all images built in $$((SECONDS - t0))s"

images-archive: images-build ## Write docker-archives of both images to $(CACHE_DIR)/images/ for ctr import
	@$(IMAGES_SH) archive arkouda
	@$(IMAGES_SH) archive mpi

mpi-demo-host: ## Build hybrid-hello and himeno on the host into $(CACHE_DIR)/mpi-demo/bin
	@command -v mpicc >/dev/null || { echo "mpi-demo-host: mpicc not found; run 'make deps'" >&2; exit 1; }
	@mkdir -p $(MPI_DEMO_HOST_DIR)/bin
	@$(MAKE) -C $(REPO_ROOT)/docker/mpi/src BUILD=$(MPI_DEMO_HOST_DIR)/bin all
	@echo "mpi-demo-host: $(MPI_DEMO_HOST_DIR)/bin/{hybrid-hello,himeno}"

test-images: venv images-build mpi-demo-host ## Test the images (runc: mpi hello as uid 1000; arkouda: no keys/sudo)
	@$(PY) -m pytest -q -p no:cacheprovider --timeout=600 $(REPO_ROOT)/tests/images

IMAGES_PY := docker/arkouda/standin/lib docker/arkouda/standin/bin/arkouda_standin_server tests/images

lint-images: venv ## Lint the Dockerfiles (hadolint), image scripts (shellcheck), stand-in + tests (ruff, mypy)
	@$(VENV)/bin/hadolint --config $(REPO_ROOT)/docker/hadolint.yaml \
	  $(REPO_ROOT)/docker/runtime/Dockerfile $(REPO_ROOT)/docker/arkouda/Dockerfile $(REPO_ROOT)/docker/mpi/Dockerfile
	@$(VENV)/bin/shellcheck $(REPO_ROOT)/docker/images.sh $(REPO_ROOT)/docker/base/build-base.sh \
	  $(REPO_ROOT)/docker/runtime/runtime-setup.sh $(REPO_ROOT)/tests/images/ssh_launch.sh \
	  $(REPO_ROOT)/docker/arkouda/build/*.sh
	@cd $(REPO_ROOT) && $(VENV)/bin/ruff check --config docker/ruff.toml $(IMAGES_PY)
	@cd $(REPO_ROOT) && $(VENV)/bin/ruff format --check --config docker/ruff.toml $(IMAGES_PY)
	@cd $(REPO_ROOT) && MYPYPATH=docker/arkouda/standin/lib:tests/images $(VENV)/bin/mypy --strict \
	  --python-version 3.11 --no-incremental docker/arkouda/standin/lib tests/images
	@echo "lint-images: Dockerfiles, image scripts, stand-in and image tests clean"
