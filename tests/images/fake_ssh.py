#!/usr/bin/env python3
"""TEST DOUBLE for ssh: ``fake_ssh.py [options] HOST COMMAND…`` runs COMMAND with /bin/sh on this machine.

It prints an OpenSSH-like ``-V`` banner (so the stand-in adds the spawner's own ``-o`` options as AMUDP does
for OpenSSH), records every invocation (options, host) as a JSON line in $FAKE_SSH_LOG, and fails like ssh
(status 255) for hosts listed in $FAKE_SSH_UNREACHABLE.
"""

import json
import os
import sys

args = sys.argv[1:]
if args == ["-V"]:
    print("OpenSSH_9.2p1 (fake_ssh.py test double)", file=sys.stderr)
    sys.exit(0)
opts: list[str] = []
i = 0
while i < len(args) and args[i].startswith("-"):
    if args[i] in ("-o", "-F", "-p", "-i", "-l") and i + 1 < len(args):
        opts += args[i : i + 2]
        i += 2
    else:
        opts.append(args[i])
        i += 1
host, command = args[i], " ".join(args[i + 1 :])
if os.environ.get("FAKE_SSH_LOG"):
    with open(os.environ["FAKE_SSH_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"options": opts, "host": host, "command": command}) + "\n")
if host in os.environ.get("FAKE_SSH_UNREACHABLE", "").split():
    print(f"ssh: connect to host {host} port 22: Connection refused", file=sys.stderr)
    sys.exit(255)
os.execv("/bin/sh", ["/bin/sh", "-c", command])  # noqa: S606 - a fake ssh runs the command
