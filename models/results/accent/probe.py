"""Can Kokoro speak with espeak-ng's accents, and would such voices be as hard as awb? (probe)

Usage: python models/results/accent/probe.py OUT_DIR [N]

Kokoro reads any phonemes in its alphabet; the corpus feeds it hibari's US G2P (misaki's
symbols: A = eɪ, I = aɪ, W = aʊ, Y = ɔɪ, O = oʊ, Q = əʊ, T = the US flap). espeak-ng writes the
same IPA for its accents (en-gb-scotland: monophthong eː and oː, trilled r, ʌʉ), so Kokoro's
natural voices could speak a Scottish or RP English that no training voice speaks today (the
held-out flite awb is a Scottish man and the model's worst voice). Here the first N (default
30) TTS dev sentences that awb speaks are rendered by two male Kokoro voices with hibari's
phonemes, espeak-ng's en-us and its en-gb-scotland; Whisper tiny.en (is it intelligible?) and
the shipped model (is it as hard as awb?) read each set. Nothing here trains on dev: it only
measures.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import soundfile as sf
import soxr
import torch

from corpus import kokoro
from decoder.metrics import cer, wer
from evaluation.peers import load_peer
from models.ensemble import load_networks
from models.features import featurize
from models.manifest import read_manifest
from models.metrics import greedy_decode
from models.warp import adapted_forward
from training.data import load_audio

VOICES = ("jm_kumo", "blend10")  # Kokoro's man, and a blend at 0.75 of him


def main() -> None:
    out = Path(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(2)
    awb = [u for u in read_manifest(Path("data/corpus/dev.jsonl")) if u.voice == "flite:awb"][:n]
    engine = kokoro.load()
    variants: dict[str, list[npt.NDArray[np.float32]]] = {"flite awb (held out)": []}
    for u in awb:
        variants["flite awb (held out)"].append(load_audio(str(u.audio)))
    for voice in VOICES:
        for front in ("hibari", "en-us", "en-gb-scotland"):
            name = f"{voice} {front}"
            variants[name] = []
            for i, u in enumerate(awb):
                ps = (
                    kokoro.phonemes(u.text)
                    if front == "hibari"
                    else kokoro.espeak_phonemes(u.text, front)
                )
                audio = kokoro._kokoro(engine, voice, ps, 1.0)
                audio = audio * (0.9 / max(float(np.abs(audio).max()), 1e-4))
                audio16 = soxr.resample(audio, kokoro.SAMPLE_RATE, 16000).astype(np.float32)
                if i < 3:
                    sf.write(out / f"{name.replace(' ', '_')}_{i}.wav", audio16, 16000)
                variants[name].append(audio16)
    whisper = load_peer("whisper-tiny.en", threads=2)
    model = load_networks("models/default", ensemble=False).models[0]
    refs = [u.text for u in awb]
    rows = {}
    with torch.inference_mode():
        for name, audios in variants.items():
            greedy = []
            for a in audios:
                feats = torch.from_numpy(featurize(a, model.config.features))[None]
                lp, m = adapted_forward(model, feats, torch.tensor([feats.shape[1]]))
                greedy.append(
                    greedy_decode(lp[0, : int(m[0])].float().numpy(), model.config.alphabet)
                )
            heard = [whisper.transcribe(a) for a in audios]
            rows[name] = {
                "ours_greedy_cer": cer(zip(refs, greedy, strict=True)).rate,
                "whisper_wer": wer(zip(refs, heard, strict=True)).rate,
                "example": {"ref": refs[0], "ours": greedy[0], "whisper": heard[0]},
            }
            print(f"{name:<28} ours greedy CER {rows[name]['ours_greedy_cer']:.2%}  "
                  f"whisper WER {rows[name]['whisper_wer']:.2%}", flush=True)  # fmt: skip
    (out / "probe.json").write_text(json.dumps({"sentences": n, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
