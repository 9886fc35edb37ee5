#!/usr/bin/env bash
# First of several back-to-back calls on a warm lent machine: keep the pack this call carried
# in an ignored folder of the repo root, where the next call (train_carried.sh with PACKS)
# finds it. Ignored outputs on the machine survive between calls only while it stays warm
# (its idle release is 30 s), so the next call must follow at once.
# Usage (on the machine, from the repo root): stash_pack.sh CARRIED_PACK_DIR DEST
set -euo pipefail
SRC=${1:?carried pack dir} DEST=${2:?destination, an ignored folder such as runs/pack1}
if git rev-parse --git-dir >/dev/null 2>&1 && ! git check-ignore -q "$DEST"; then
  echo "$DEST is not ignored by git: it would not persist"; exit 2
fi
mkdir -p "$DEST"
cp "$SRC"/* "$DEST"/
python3 - "$DEST" <<'PY'
import json, os, sys
d = sys.argv[1]
index = json.load(open(os.path.join(d, "index.json")))
end = max(o + n for _, o, n in index)
size = os.path.getsize(os.path.join(d, "corpus.bin"))
assert size == end, f"corpus.bin is {size} bytes, the index needs {end}"
print(f"{d}: {len(index)} clips, {size / 2**20:.1f} MiB, complete")
PY
