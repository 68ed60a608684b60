#!/usr/bin/env bash
# Installs the Debian packages listed in hack/apt-packages.txt that are missing. Idempotent: when every
# package is present it prints one line and touches nothing. Needs root (CI and developers run as root).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/apt-packages.txt" | grep -v '^$')
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#wanted[@]} Debian packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing Debian packages (${missing[*]}); run 'make deps' as root" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: installed ${#missing[@]} packages"
