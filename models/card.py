"""A bundle's CARD.md from what was measured: the corpus statistics `harken synth` wrote, the
provenance `harken train` stored in config.json, and `harken eval` reports on dev and test.

    python -m models.card --bundle models/default --corpus-stats data/corpus/stats.json \
        --eval dev=eval_dev.json --eval test=eval_test.json

Every number on the card comes from one of those files; nothing is typed in by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from models.config import ModelConfig


def _voices(hours_per_voice: dict[str, float]) -> str:
    """Engines and voice counts, e.g. 'espeak-ng 700 voices, flite 3, festival 2'."""
    counts: dict[str, int] = {}
    for v in hours_per_voice:
        engine = v.split(":", 1)[0]
        counts[engine] = counts.get(engine, 0) + 1
    return ", ".join(f"{e}: {n} voice(s)" for e, n in sorted(counts.items()))


def _rates(report: dict[str, Any]) -> list[str]:
    rows = []
    for name, d in report["decoders"].items():
        o = d["overall"]
        rows.append(f"{name}: WER {o['wer']:.1%}, CER {o['cer']:.1%}")
    return rows


def _adaptation(cfg: ModelConfig) -> str:
    if not cfg.warp_factors:
        return "none"
    factors = ", ".join(f"{a:g}" for a in cfg.warp_factors)
    seconds = cfg.warp_decide_frames * cfg.frame_seconds
    return (
        f"each stream runs on frequency warps {factors} of its input and keeps, frame by frame, "
        f"the most confident; fixed after {seconds:g} s (`harken tune-warp` on dev)"
    )


def provenance_lines(prov: dict[str, Any]) -> list[str]:
    """One Markdown item per provenance field, and one per earlier training stage."""
    lines = [f"- {k.replace('_', ' ')}: {v}" for k, v in prov.items() if k != "earlier_stages"]
    for i, stage in enumerate(prov.get("earlier_stages", []), 1):
        fields = "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in stage.items())
        lines.append(f"- earlier stage {i}: {fields}")
    return lines


def card(meta: dict[str, Any], stats: dict[str, Any], evals: dict[str, dict[str, Any]]) -> str:
    cfg = ModelConfig.from_dict(meta["model"])
    prov = meta.get("provenance", {})
    f = cfg.features
    lines = [
        "# harken default English model",
        "",
        "Deep Speech 2 style streaming acoustic model (unidirectional GRU + row convolution),",
        "trained by `harken train` on speech that `harken synth` made with Debian's TTS engines,",
        "SVOX Pico, Piper and RHVoice reading the `fortunes` text (the Data section below counts",
        "the voices of each). Dev and test use held-out voices that training never saw.",
        "",
        "## Network",
        f"- input: log power spectrogram, {f.n_bins} bins, {f.window_ms:g} ms window, "
        f"{f.hop_ms:g} ms hop, "
        + (
            f"cepstral lifter at {f.cepstral_lifter} samples (envelope only: pitch harmonics "
            "removed)"
            if f.cepstral_lifter
            else "no lifter"
        ),
        f"- {cfg.conv_layers} x {cfg.conv_type.upper()} convolution, {cfg.conv_channels} channels, "
        f"time kernel {cfg.conv_time_kernel}, stride {cfg.time_stride} in time",
        f"- {cfg.rnn_layers} x unidirectional {cfg.rnn_type.upper()} of {cfg.rnn_hidden} units, "
        f"sequence-wise BatchNorm (folded), row convolution tau = {cfg.row_conv_tau} "
        f"({cfg.row_conv_tau * cfg.frame_seconds * 1000:.0f} ms look-ahead)",
        f"- {meta.get('parameters', 0):,} parameters; output every "
        f"{cfg.frame_seconds * 1000:.0f} ms over {len(cfg.alphabet) + 1} symbols",
        "- speaker adaptation: " + _adaptation(cfg),
        "",
        "## Data",
    ]
    for split in ("train", "dev", "test"):
        s = stats.get(split, {})
        if s:
            voices = _voices(s.get("hours_per_voice", {}))
            lines.append(
                f"- {split}: {s.get('utterances')} utterances, {s.get('hours')} h; {voices}"
            )
    lines += ["", "## Training"]
    lines += provenance_lines(prov)
    lines += ["", "## Accuracy (`harken eval`)"]
    for split, report in evals.items():
        lines.append(f"- {split} ({report['utterances']} utterances): " + "; ".join(_rates(report)))
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description="write a bundle's CARD.md from measured results")
    p.add_argument("--bundle", type=Path, required=True)
    p.add_argument("--corpus-stats", type=Path, required=True, help="stats.json of harken synth")
    p.add_argument("--eval", action="append", default=[], help="SPLIT=eval.json (repeatable)")
    args = p.parse_args()
    meta = json.loads((args.bundle / "config.json").read_text())
    stats = json.loads(args.corpus_stats.read_text())
    evals = {}
    for item in args.eval:
        split, _, path = item.partition("=")
        evals[split] = json.loads(Path(path).read_text())
    (args.bundle / "CARD.md").write_text(card(meta, stats, evals))
    print((args.bundle / "CARD.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
