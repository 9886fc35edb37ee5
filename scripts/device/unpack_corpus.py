"""Split pack_corpus.py's blob back into clips beside its manifests, decoded to 16-bit WAV.

Decoding once up front, on every core, is cheap (libsndfile decodes Opus at about 400 audio
s/s per thread here, so the corpus takes seconds on 16 cores), and it keeps the training
loader's workers on augmentation: decoding Opus in them halves what each one feeds.

Usage: unpack_corpus.py PACK_DIR OUT_DIR
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import soundfile as sf


def decode(path: Path) -> Path:
    audio, rate = sf.read(str(path), dtype="int16")
    wav = path.parent.parent / "wav" / path.with_suffix(".wav").name
    wav.parent.mkdir(exist_ok=True)
    sf.write(str(wav), audio, rate, subtype="PCM_16")
    path.unlink()
    return wav


def main() -> None:
    pack, out = Path(sys.argv[1]), Path(sys.argv[2])
    index = json.loads((pack / "index.json").read_text())
    with (pack / "corpus.bin").open("rb") as blob:
        for rel, offset, size in index:
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            blob.seek(offset)
            path.write_bytes(blob.read(size))
    with ProcessPoolExecutor(os.cpu_count() or 1) as pool:
        list(pool.map(decode, [out / rel for rel, _, _ in index], chunksize=64))
    for manifest in pack.glob("*.jsonl"):
        rows = [json.loads(line) for line in manifest.open()]
        for row in rows:
            row["audio"] = "wav/" + Path(row["audio"]).with_suffix(".wav").name
        (out / manifest.name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(index)} clips decoded to WAV in {out}")


if __name__ == "__main__":
    main()
