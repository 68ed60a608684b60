#!/usr/bin/env bash
# check-tools.sh STAGE TOOL...: every TOOL is a command on PATH; otherwise one line naming the missing ones and the
# stage whose apt-get line should install them, exit 1. Run right after a stage's apt-get, so a missing tool stops
# the build in seconds instead of inside an hour-long make (e.g. wget, which Arkouda's install-arrow calls).
set -euo pipefail
stage=${1:?usage: check-tools.sh STAGE TOOL...}
shift
missing=()
for tool in "$@"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "arkouda image build: missing tool(s) ${missing[*]} in the $stage stage; add the package(s) providing them to its apt-get line" >&2
  exit 1
fi
