#!/bin/sh
# Run inside the arkouda image as uid 1000 (tests/images/test_arkouda_image.py): the bootstrap's unprivileged
# sshd on port 2222 with freshly made keys, then the stand-in launcher over real ssh in three settings:
#   pinned       ssh config pins the right host key                       -> launch succeeds
#   wrong-pin    config pins ANOTHER key, plain ssh as GASNET_SSH_CMD      -> the spawner's own
#                -o 'StrictHostKeyChecking no' comes first and wins       -> launch still succeeds
#   wrapper      same wrong pin, GASNET_SSH_CMD = wrapper that puts StrictHostKeyChecking yes first -> fails
# Prints "=== <case> rc=<status>" after each launch and the launcher's output before it.
set -eu
d=/tmp/secret
mkdir -p "$d"
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
printf '#!/bin/sh\nexec ssh -o StrictHostKeyChecking=yes "$@"\n' >/tmp/ssh-wrapper
chmod 0755 /tmp/ssh-wrapper

launch() {  # $1 = case, $2 = ssh config, $3 = ssh command
  rc=0
  GASNET_SSH_SERVERS="127.0.0.1 127.0.0.1" GASNET_SSH_CMD="$3" GASNET_SSH_OPTIONS="-F $2" \
    GASNET_MASTERIP=127.0.0.1 GASNET_SSH_REMOTE_PATH=/opt/arkouda/bin ARKOUDA_STANDIN_TIMEOUT=90 \
    /opt/arkouda/bin/arkouda_server -nl 2 --ServerPort=5555 >"/tmp/$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do
    if grep -q 'server listening' "/tmp/$1.log"; then
      PYTHONPATH=/opt/arkouda/lib python3 -m arkouda_standin.client 127.0.0.1 5555 shutdown >/dev/null
      break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  wait "$pid" || rc=$?
  cat "/tmp/$1.log"
  echo "=== $1 rc=$rc"
}
launch pinned /tmp/pinned.conf ssh
launch wrong-pin /tmp/wrong.conf ssh
launch wrapper /tmp/wrong.conf /tmp/ssh-wrapper
