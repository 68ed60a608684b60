#!/usr/bin/env bash
# check-client.sh VENV: the Arkouda client installed in the virtual environment VENV imports (`import arkouda`,
# what every notebook does first). Otherwise one line with the import error, exit 1. No VENV directory (the
# stand-in image ships no client) is not an error.
set -euo pipefail
venv=${1:?usage: check-client.sh VENV}
[ -d "$venv" ] || exit 0
if [ ! -x "$venv/bin/python" ]; then
  echo "arkouda image: $venv has no bin/python; the Arkouda client was not installed" >&2
  exit 1
fi
# the client prints a banner on import; only its error matters here
if ! err=$("$venv/bin/python" -c 'import arkouda' 2>&1 >/dev/null); then
  echo "arkouda image: the Arkouda client in $venv does not import: $(tail -n 1 <<<"$err")" >&2
  exit 1
fi
