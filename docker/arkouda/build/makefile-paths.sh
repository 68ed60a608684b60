#!/usr/bin/env bash
# makefile-paths.sh FILE DIR...: appends Arkouda's add-path line for each DIR to FILE (Arkouda's Makefile.paths;
# make/prologue/paths.mk turns each into -I/-L/-rpath), keeping every line already there: Arkouda's own
# install-arrow and install-iconv append theirs to the same file (make/deps/*.mk). A DIR already listed is not
# added twice; a DIR that does not exist stops with one line (its dependency was not installed), exit 1.
set -euo pipefail
file=${1:?usage: makefile-paths.sh FILE DIR...}
shift
touch "$file"
# a last line without its newline would be joined to the first line appended
if [ -s "$file" ] && [ -n "$(tail -c 1 "$file")" ]; then echo >>"$file"; fi
for dir in "$@"; do
  if [ ! -d "$dir" ]; then
    echo "arkouda image build: $dir does not exist, so it cannot go into $file (was its dependency installed?)" >&2
    exit 1
  fi
  line="\$(eval \$(call add-path,$dir))"
  grep -qxF "$line" "$file" || printf '%s\n' "$line" >>"$file"
done
