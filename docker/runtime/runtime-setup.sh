#!/bin/sh
# The steps of docker/runtime/Dockerfile, the base both images start from (run as root during the build).
# Makes what docs/interfaces.md promises for both images, in two steps so that a change of the bootstrap
# alone rebuilds only the small last layer:
#
#   runtime-setup.sh system CONSTRAINTS
#     - user arkouda, uid/gid 1000, home /home/arkouda, password field '*' (no password but NOT locked: with
#       `UsePAM no` sshd rejects a locked account ('!') even for public-key logins), no sudo, no keys;
#     - a venv at /opt/arkouda-bootstrap with the bootstrap's dependencies (kubernetes, tenacity,
#       cryptography, prometheus-client, pyzmq, paramiko) from PyPI, pinned by the project's
#       requirements-dev.txt used as CONSTRAINTS;
#     - /run/arkouda (the bootstrap's state dir; an emptyDir in the chart) writable by uid 1000.
#   runtime-setup.sh bootstrap WHEEL_DIR CONSTRAINTS
#     - the bootstrap wheel (exactly one arkouda_bootstrap-*.whl in WHEEL_DIR) into that venv, its console
#       script linked into /usr/local/bin, and a last check that nothing grants root or holds a host key.
#
# SSH host keys: openssh-server's postinst generates some; the Dockerfile deletes them in the SAME layer as
# the apt-get install (a later `rm` would leave them readable in the lower layer). The bootstrap uses the
# release's host key from its Secret instead.
set -eu

pip_install() {
  /opt/arkouda-bootstrap/bin/pip install --no-cache-dir --disable-pip-version-check --quiet "$@"
}

case ${1:-} in
  system)
    constraints=$2
    groupadd --gid 1000 arkouda
    useradd --uid 1000 --gid 1000 --home-dir /home/arkouda --create-home --shell /bin/bash arkouda
    usermod --password '*' arkouda
    python3 -m venv /opt/arkouda-bootstrap
    pip_install --constraint "$constraints" kubernetes tenacity cryptography prometheus-client pyzmq paramiko
    install -d -o 1000 -g 1000 -m 0755 /run/arkouda
    rm -rf /root/.cache
    ;;
  bootstrap)
    wheel_dir=$2
    constraints=$3
    set -- "$wheel_dir"/arkouda_bootstrap-*.whl
    if [ ! -f "$1" ] || [ $# -ne 1 ]; then
      echo "runtime-setup: expected exactly one arkouda_bootstrap-*.whl in $wheel_dir (run 'make images')" >&2
      exit 1
    fi
    pip_install --constraint "$constraints" "$1"
    ln -sf /opt/arkouda-bootstrap/bin/arkouda-bootstrap /usr/local/bin/arkouda-bootstrap
    /usr/local/bin/arkouda-bootstrap --help >/dev/null
    if command -v sudo >/dev/null 2>&1; then
      echo "runtime-setup: sudo must not be in the image" >&2
      exit 1
    fi
    if ls /etc/ssh/ssh_host_* >/dev/null 2>&1; then
      echo "runtime-setup: SSH host keys found in /etc/ssh; delete them in the apt-get layer" >&2
      exit 1
    fi
    rm -rf /root/.cache /tmp/build
    ;;
  *)
    echo "usage: runtime-setup.sh system CONSTRAINTS | bootstrap WHEEL_DIR CONSTRAINTS" >&2
    exit 2
    ;;
esac
