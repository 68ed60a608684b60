#!/bin/sh
# Shared by the runtime stages of docker/arkouda/Dockerfile and docker/mpi/Dockerfile (run once, as root,
# during the build). Makes what docs/interfaces.md promises for both images:
#   - user arkouda, uid/gid 1000, home /home/arkouda, password field '*' (no password but NOT locked: with
#     `UsePAM no` sshd rejects a locked account ('!') even for public-key logins), no sudo, no keys;
#   - the bootstrap (arkouda-bootstrap) in a venv at /opt/arkouda-bootstrap, its console script on PATH;
#   - no SSH host keys baked in (openssh-server's postinst generates some: they would be shared by every
#     pod ever started from the image; the bootstrap uses the release's key from the Secret instead);
#   - /run/arkouda (the bootstrap's state dir; an emptyDir in the chart) writable by uid 1000.
# Usage: runtime-setup.sh WHEEL_DIR CONSTRAINTS_FILE
set -eu
wheel_dir=$1
constraints=$2

groupadd --gid 1000 arkouda
useradd --uid 1000 --gid 1000 --home-dir /home/arkouda --create-home --shell /bin/bash arkouda
usermod --password '*' arkouda

# The bootstrap and its dependencies (kubernetes, paramiko, tenacity, ...) from PyPI, pinned by the
# project's requirements-dev.txt used as a constraints file.
set -- "$wheel_dir"/arkouda_bootstrap-*.whl
if [ ! -f "$1" ] || [ $# -ne 1 ]; then
  echo "runtime-setup: expected exactly one arkouda_bootstrap-*.whl in $wheel_dir (run 'make images')" >&2
  exit 1
fi
python3 -m venv /opt/arkouda-bootstrap
/opt/arkouda-bootstrap/bin/pip install --no-cache-dir --disable-pip-version-check --quiet \
  --constraint "$constraints" "$1"
ln -s /opt/arkouda-bootstrap/bin/arkouda-bootstrap /usr/local/bin/arkouda-bootstrap
/usr/local/bin/arkouda-bootstrap --help >/dev/null

rm -f /etc/ssh/ssh_host_*
install -d -o 1000 -g 1000 -m 0755 /run/arkouda
# Nothing that grants root: no sudo/su setuid helpers beyond Debian's base (su is in login; sudo absent).
if command -v sudo >/dev/null 2>&1; then
  echo "runtime-setup: sudo must not be in the image" >&2
  exit 1
fi
rm -rf /root/.cache /tmp/* /var/lib/apt/lists/*
