#!/usr/bin/env bash
# Read a trained wide network as the pair's second network, against the shipped pair, on both
# dev sets (the readings of kokoro_en.md's wideenglish2 and widemix2 tables):
#
#   bash models/results/kokoro_en/read_wide.sh OUT WIDE_BUNDLE SHARE [SOUP_WITH]
#
# puts WIDE_BUNDLE's weights (or, with SOUP_WITH, a 1:1 soup of the two) in a copy of
# models/default as its wide/ network at SHARE, and reads it with general_lm/read_pair.sh
# (runs/OUT_cmp_{corpus,asterisk}.md). Those tables were read before the general LM joined
# models/default's search (at 660e363); a reading now uses the search as shipped.
set -euo pipefail
cd "$(dirname "$0")/../../.."
out=$1 wide=$2 share=$3 soup=${4:-}
if [ -n "$soup" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  .venv/bin/python models/results/soup/soup.py "$tmp/soup" "$wide" "$soup" >/dev/null
  wide=$tmp/soup
fi
bash models/results/general_lm/read_pair.sh "$out" - "$wide" "$share"
