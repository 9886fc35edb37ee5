"""Pack Opus-coded manifests into one blob for a lent GPU machine, under a byte cap.

The device tool carries at most 64 MiB, and one tar header per short file would waste a sixth
of that, so the clips are concatenated into `corpus.bin` with an index of (path, offset, size);
`unpack_corpus.py` splits them out again on the machine. When the clips exceed the cap, a seeded
random share of the first manifest's utterances is left out, and the count is printed.

Usage: pack_corpus.py SRC_DIR DST_DIR MAX_BYTES MANIFEST... (names of SRC_DIR/*.jsonl)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path


def main() -> None:
    src, dst, cap, names = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    rows = {n: [json.loads(line) for line in (src / n).open()] for n in names}
    size = {r["audio"]: (src / r["audio"]).stat().st_size for rs in rows.values() for r in rs}
    total = sum(size.values())
    first = rows[names[0]]
    order = list(range(len(first)))
    random.Random(0).shuffle(order)
    dropped: set[int] = set()
    for i in order:
        if total <= cap:
            break
        dropped.add(i)
        total -= size[first[i]["audio"]]
    rows[names[0]] = [r for i, r in enumerate(first) if i not in dropped]
    gone = sum(first[i]["duration"] for i in dropped)
    print(f"left out {len(dropped)} of {len(first)} utterances of {names[0]} ({gone / 3600:.2f} h)")
    dst.mkdir(parents=True, exist_ok=True)
    index, offset = [], 0
    with (dst / "corpus.bin").open("wb") as blob:
        for rs in rows.values():
            for r in rs:
                data = (src / r["audio"]).read_bytes()
                blob.write(data)
                index.append([r["audio"], offset, len(data)])
                offset += len(data)
    (dst / "index.json").write_text(json.dumps(index))
    for n, rs in rows.items():
        (dst / n).write_text("".join(json.dumps(r) + "\n" for r in rs))
    hours = sum(r["duration"] for rs in rows.values() for r in rs) / 3600
    print(f"{len(index)} clips, {hours:.2f} h, {offset / 2**20:.1f} MiB in {dst}/corpus.bin")


if __name__ == "__main__":
    main()
