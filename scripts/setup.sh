#!/usr/bin/env bash
# One-shot, idempotent set-up: Debian packages, .venv, torch (pinned, first), the rest.
# Re-running is cheap: each step is skipped when its stamp is newer than its inputs.
# Usage: setup.sh [--test]   (--test adds what only the tests need: Debian's chromium)
set -euo pipefail
cd "$(dirname "$0")/.."
STAMP=.venv/.harken-stamps
APT_PKGS=(espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts fortunes fortunes-min ffmpeg
          cmake libboost-program-options-dev libboost-system-dev libboost-thread-dev libboost-test-dev
          zlib1g-dev libbz2-dev liblzma-dev libsndfile1)
[ "${1:-}" = "--test" ] && APT_PKGS+=(chromium)  # the browser page test

need_apt=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  echo "[setup] apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
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
if [ ! -f "$STAMP/deps" ] || [ pyproject.toml -nt "$STAMP/deps" ] || [ scripts/constraints.txt -nt "$STAMP/deps" ]; then
  echo "[setup] installing harken and its dependencies"
  .venv/bin/pip install -q -c scripts/constraints.txt -e ".[dev,bench]"
  touch "$STAMP/deps"
fi
# KenLM's lmplz and build_binary, built once from its source release into third_party/kenlm
echo "[setup] KenLM tools (cached after the first build)"
.venv/bin/python -m decoder.kenlm_tools
