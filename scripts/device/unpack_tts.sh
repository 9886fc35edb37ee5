#!/usr/bin/env bash
# Unpack pack_tts.sh's tarball on a bare machine: data directories go to the absolute paths
# the engines were built to read (only where nothing is there yet), binaries run through
# wrappers in /opt/tts/bin that point them at the carried libraries.
set -euo pipefail
TARBALL=${1:?usage: unpack_tts.sh TTS.tar.xz}
P=/opt/tts
mkdir -p "$P" && tar -C "$P" -xJf "$TARBALL"
for d in usr/share/festival usr/lib/x86_64-linux-gnu/espeak-ng-data usr/share/games/fortunes etc/festival.scm; do
  [ -e "/$d" ] || { mkdir -p "/$(dirname "$d")"; cp -a "$P/root/$d" "/$d"; }
done
mkdir -p "$P/bin"
for b in espeak-ng flite festival; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib:%s/root/usr/lib/x86_64-linux-gnu exec %s/root/usr/bin/%s "$@"\n' \
    "$P" "$P" "$P" "$b" >"$P/bin/$b"
  chmod +x "$P/bin/$b"
done
echo "TTS engines in $P/bin: add it to PATH"
