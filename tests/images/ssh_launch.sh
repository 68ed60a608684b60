#!/bin/sh
# Run inside the arkouda image as uid 1000 (tests/images/test_arkouda_image.py): the bootstrap's unprivileged
# sshd on port 2222 with freshly made keys, then arkouda_server -nl 2 (GASNet's real amudprun, ssh spawner) over
# real OpenSSH in three settings:
#   pinned      the bootstrap's own GASNET_SSH_CMD script and ssh wrapper, config pins the right host key
#               -> both locales start over ssh, pass the GASNet barrier, the server answers, shutdown -> 0
#   wrong-pin   config pins ANOTHER key, plain ssh as GASNET_SSH_CMD: amudprun's own
#               -o 'StrictHostKeyChecking no' comes first and wins -> the launch still succeeds
#   wrapper     same wrong pin through the bootstrap's wrapper (StrictHostKeyChecking=yes first) -> refused
# Prints "=== <case> rc=<status>" after each launch and the launch's output before it.
set -eu
d=/tmp/secret
mkdir -p "$d" /tmp/state/bin
ssh-keygen -q -t ed25519 -N '' -C '' -f "$d/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -C '' -f "$d/ssh_host_ed25519_key"
ssh-keygen -q -t ed25519 -N '' -C '' -f /tmp/other_host_key
cp "$d/id_ed25519.pub" "$d/authorized_keys"
echo "* $(cat "$d/ssh_host_ed25519_key.pub")" >"$d/known_hosts"
echo "* $(cat /tmp/other_host_key.pub)" >/tmp/wrong_known_hosts
chmod 0440 "$d"/*
install -m 0600 "$d/id_ed25519" /tmp/client_key
arkouda-bootstrap locale --secret-dir "$d" --state-dir /run/arkouda --port 2222 >/tmp/sshd.log 2>&1 &
for _ in $(seq 100); do arkouda-bootstrap probe --port 2222 2>/dev/null && break; sleep 0.1; done

config() {  # $1 = known_hosts file
  printf 'Host *\n  Port 2222\n  User arkouda\n  IdentityFile /tmp/client_key\n  UserKnownHostsFile %s\n  GlobalKnownHostsFile /dev/null\n  StrictHostKeyChecking yes\n  BatchMode yes\n' "$1"
}
config "$d/known_hosts" >/tmp/pinned.conf
config /tmp/wrong_known_hosts >/tmp/wrong.conf
# The bootstrap's own files: the ssh wrapper (ssh.render_wrapper) and amudprun's GASNET_SSH_CMD script
# (launch.render_gasnet_ssh), rendered by the installed bootstrap.
py=$(dirname "$(readlink -f "$(command -v arkouda-bootstrap)")")/python
"$py" - <<'PY'
from pathlib import Path
from arkouda_bootstrap.server import launch
from arkouda_bootstrap.ssh import client as ssh
for name, conf in (("pinned", "/tmp/pinned.conf"), ("wrong", "/tmp/wrong.conf")):
    wrapper = Path(f"/tmp/state/bin/ssh-{name}")
    wrapper.write_text(ssh.render_wrapper(ssh="/usr/bin/ssh", config=Path(conf)))
    wrapper.chmod(0o755)
    Path(f"/tmp/state/gasnet-ssh-{name}").write_text(launch.render_gasnet_ssh(wrapper))
PY

launch() {  # $1 = case, $2 = ssh config, $3 = GASNET_SSH_CMD; the stand-in server answers, then shuts down
  rc=0
  GASNET_SSH_SERVERS="127.0.0.1 127.0.0.1" GASNET_SPAWNFN=S GASNET_SSH_CMD="$3" GASNET_SSH_OPTIONS="-F $2" \
    GASNET_MASTERIP=127.0.0.1 GASNET_SSH_REMOTE_PATH=/home/arkouda \
    timeout 120 /opt/arkouda/bin/arkouda_server -nl 2 --ServerPort=5555 >"/tmp/$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || break
    if grep -q 'ARKOUDA-STANDIN-GASNET-LOCALES' "/tmp/$1.log" \
       && python3 -m arkouda_standin.client --host 127.0.0.1 --port 5555 --expect-locales 2 --timeout 5 \
            --shutdown >>"/tmp/$1.client" 2>&1; then
      break
    fi
    sleep 0.2
  done
  wait "$pid" || rc=$?
  cat "/tmp/$1.log"
  [ ! -f "/tmp/$1.client" ] || sed 's/^/client: /' "/tmp/$1.client"
  echo "=== $1 rc=$rc"
}
export PYTHONPATH=/opt/arkouda/lib
launch pinned /tmp/pinned.conf "/bin/sh /tmp/state/gasnet-ssh-pinned"
launch wrong-pin /tmp/wrong.conf ssh
launch wrapper /tmp/wrong.conf "/bin/sh /tmp/state/gasnet-ssh-wrong"
