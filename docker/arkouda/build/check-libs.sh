#!/usr/bin/env bash
# check-libs.sh BINARY...: every BINARY exists and ldd finds every shared library it loads, in the image being
# built (the runtime stage runs it on the server's two binaries and amudprun). Otherwise one line naming each
# binary with what it cannot load, exit 1: a server that would die at start with "error while loading shared
# libraries" fails the build instead.
set -euo pipefail
[ "$#" -gt 0 ] || { echo "usage: check-libs.sh BINARY..." >&2; exit 2; }
problems=()
for binary in "$@"; do
  if [ ! -f "$binary" ]; then
    problems+=("$binary is missing")
    continue
  fi
  listing=$(ldd "$binary" 2>&1) || true
  missing=$(awk '/=> not found/ {print $1}' <<<"$listing" | paste -sd, -)
  [ -z "$missing" ] || problems+=("$binary cannot load $missing")
done
if [ "${#problems[@]}" -gt 0 ]; then
  joined=$(printf '%s; ' "${problems[@]}")
  echo "arkouda image: ${joined%; } (ldd: not found); install the package or copy the library into the image" >&2
  exit 1
fi
