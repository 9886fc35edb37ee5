#!/usr/bin/env bash
# Pack Debian's TTS engines (espeak-ng, flite, festival with its voices) and the fortunes text
# into one tarball, so that `harken synth` can build the corpus on a rented GPU machine that
# has no package registry. Libraries come from this machine (Debian 12); glibc and the C++
# runtime are left to the target. Unpack there with scripts/device/unpack_tts.sh.
set -euo pipefail
OUT=${1:?usage: pack_tts.sh OUT.tar.xz}
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
PKGS=(espeak-ng libespeak-ng1 espeak-ng-data flite libflite1 festival festlex-cmu festlex-poslex
      festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts libestools2.5 fortunes fortunes-min)
for p in "${PKGS[@]}"; do
  dpkg -L "$p" | grep -vE '^/usr/share/(doc|man|lintian|info)/' | while IFS= read -r f; do
    if [ -f "$f" ] && [ ! -L "$f" ]; then mkdir -p "$STAGE/root$(dirname "$f")"; cp -p "$f" "$STAGE/root$f"; fi
    if [ -L "$f" ]; then mkdir -p "$STAGE/root$(dirname "$f")"; cp -P "$f" "$STAGE/root$f"; fi
  done
done
cp -p /etc/festival.scm "$STAGE/root/etc/festival.scm" 2>/dev/null || true
mkdir -p "$STAGE/lib"
for b in /usr/bin/espeak-ng /usr/bin/flite /usr/bin/festival; do
  ldd "$b" | awk '/=> \//{print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|libgcc_s|libstdc\+\+)\.so' \
    | while IFS= read -r lib; do
        # a library that one of the packages above ships is already under root/
        [ -e "$STAGE/root/usr/lib/x86_64-linux-gnu/$(basename "$lib")" ] || cp -L "$lib" "$STAGE/lib/"
      done
done
# espeak-ng speaks only English here: drop the other languages' dictionaries
find "$STAGE/root/usr/lib/x86_64-linux-gnu/espeak-ng-data" -maxdepth 1 -name '*_dict' ! -name 'en_dict' -delete
XZ_OPT=-9 tar -C "$STAGE" -cJf "$OUT" root lib
du -h "$OUT"
