"""Split pack_corpus.py's blob back into clips beside its manifests.

Usage: unpack_corpus.py PACK_DIR OUT_DIR
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def main() -> None:
    pack, out = Path(sys.argv[1]), Path(sys.argv[2])
    index = json.loads((pack / "index.json").read_text())
    with (pack / "corpus.bin").open("rb") as blob:
        for rel, offset, size in index:
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            blob.seek(offset)
            path.write_bytes(blob.read(size))
    for manifest in pack.glob("*.jsonl"):
        shutil.copy(manifest, out / manifest.name)
    print(f"{len(index)} clips in {out}")


if __name__ == "__main__":
    main()
