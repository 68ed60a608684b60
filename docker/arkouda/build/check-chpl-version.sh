#!/usr/bin/env bash
# check-chpl-version.sh MIN MAX [FILE]: reads `chpl --version` output (FILE or stdin) and checks that its
# "chpl version X.Y.Z" lies in MIN..MAX (major.minor, inclusive): the Chapel releases the pinned Arkouda builds
# with (CHAPEL_MIN/CHAPEL_MAX in hack/versions.env). Prints "chpl X.Y.Z" when it does; otherwise one line, exit 1.
set -euo pipefail
min=${1:?usage: check-chpl-version.sh MIN MAX [FILE]}
max=${2:?usage: check-chpl-version.sh MIN MAX [FILE]}
text=$(cat "${3:-/dev/stdin}")
version=$(sed -n 's/^chpl version \([0-9][0-9]*\.[0-9][0-9]*\(\.[0-9][0-9]*\)\{0,1\}\).*/\1/p' <<<"$text" | head -n 1)
if [ -z "$version" ]; then
  echo "arkouda image build: no 'chpl version X.Y.Z' line in the chpl --version output: $(head -n 1 <<<"$text")" >&2
  exit 1
fi
# major.minor as one comparable number: 2.8 -> 2008
key() { local major=${1%%.*} rest=${1#*.}; echo $((major * 1000 + ${rest%%.*})); }
if [ "$(key "$version")" -lt "$(key "$min")" ] || [ "$(key "$version")" -gt "$(key "$max")" ]; then
  echo "arkouda image build: Chapel $version is outside $min..$max, the releases the pinned Arkouda builds with; set CHAPEL_VERSION in hack/versions.env (or widen CHAPEL_MIN/CHAPEL_MAX after checking Arkouda's CI)" >&2
  exit 1
fi
echo "chpl $version"
