#!/usr/bin/env bash
# runtime-packages.sh [--shipped DIR]... BINARY...: the Debian packages that provide the shared libraries the
# BINARYs load (ldd), one per line, sorted, for the runtime stage to install. Libraries under a --shipped DIR
# travel with the image (Arkouda's own Arrow/Parquet and libiconv under /opt/arkouda/dep) and are skipped.
# Debian 12 has a merged /usr, so ldd may name /lib/x86_64-linux-gnu/libX.so while the package lists
# /usr/lib/x86_64-linux-gnu/libX.so (or the other way round): both spellings and the resolved file are asked.
# A library ldd cannot find, or one no package owns and no --shipped DIR holds, stops with one line, exit 1.
set -euo pipefail
shipped=()
while [ "${1:-}" = --shipped ]; do
  shipped+=("${2:?--shipped DIR}")
  shift 2
done
[ "$#" -gt 0 ] || { echo "usage: runtime-packages.sh [--shipped DIR]... BINARY..." >&2; exit 2; }

# owner PATH: the package(s) dpkg records for PATH under any of its spellings, "pkg" per line; empty if none.
owner() {
  local path=$1 candidate out
  for candidate in "$path" "/usr$path" "${path#/usr}" "$(readlink -f "$path")"; do
    [ -n "$candidate" ] || continue
    # dpkg -S prints "pkg1, pkg2: /path" (or "pkg:arch: /path"); "diversion by" lines are not owners
    if out=$(dpkg-query -S "$candidate" 2>/dev/null | grep -v '^diversion by'); then
      sed 's/: .*//; s/, /\n/g' <<<"$out" | cut -d: -f1
      return 0
    fi
  done
}

packages=()
for binary in "$@"; do
  [ -f "$binary" ] || { echo "arkouda image build: $binary does not exist (runtime-packages.sh)" >&2; exit 1; }
  listing=$(ldd "$binary") || { echo "arkouda image build: ldd cannot read $binary" >&2; exit 1; }
  if grep -q 'not found' <<<"$listing"; then
    echo "arkouda image build: $binary needs $(awk '/not found/ {print $1}' <<<"$listing" | paste -sd, -), which the build stage cannot find" >&2
    exit 1
  fi
  while read -r lib; do
    skip=""
    for dir in "${shipped[@]}"; do
      case $lib in "$dir"/*) skip=yes ;; esac
    done
    [ -z "$skip" ] || continue
    found=$(owner "$lib")
    if [ -z "$found" ]; then
      echo "arkouda image build: no Debian package owns $lib (needed by $binary) and it is not under a shipped directory (${shipped[*]:-none})" >&2
      exit 1
    fi
    mapfile -t -O "${#packages[@]}" packages <<<"$found"
  done < <(sed -n 's/.*=> \(\/[^ ]*\) (0x.*/\1/p' <<<"$listing")
done
printf '%s\n' "${packages[@]}" | sort -u
