#!/usr/bin/env bash
# fetch.sh NAME URL OUT [SHA256]: downloads URL (http(s), or file:// for a local mirror) to OUT with retries and,
# when SHA256 is given, checks it. NAME is the build argument that set URL (CHAPEL_URL, ARKOUDA_URL), so the one
# line printed on failure says what to change. Exit 1 on any failure, OUT removed.
set -euo pipefail
name=${1:?usage: fetch.sh NAME URL OUT [SHA256]}
url=${2:?usage: fetch.sh NAME URL OUT [SHA256]}
out=${3:?usage: fetch.sh NAME URL OUT [SHA256]}
want=${4:-}
fix="set $name to a mirror or a file:// copy of the same archive (docker/README.md, 'When a download fails')"
rc=0
curl -fsSL --retry 3 --retry-delay 5 --connect-timeout 30 -o "$out" "$url" 2>/dev/null || rc=$?
if [ "$rc" -ne 0 ]; then
  rm -f "$out"
  echo "arkouda image build: $name=$url could not be downloaded (curl exit $rc); $fix" >&2
  exit 1
fi
if [ -n "$want" ]; then
  got=$(sha256sum "$out" | cut -d' ' -f1)
  if [ "$got" != "$want" ]; then
    rm -f "$out"
    echo "arkouda image build: $name=$url has sha256 $got, not the pinned $want; $fix" >&2
    exit 1
  fi
fi
