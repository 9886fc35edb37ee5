"""A bundle's CARD.md from what was measured: the corpus statistics `harken synth` (and
`harken prepare`) wrote, the provenance `harken train` stored in config.json, and
`harken eval` reports on dev and test, with the peer recognisers' rows when they were scored,
and the bundle's decoder.json, unigrams.txt and the `harken lm-text` reports of its LM text;
for a model continued from another, that one's card (`--earlier-card`: its Data lines).

    python -m models.card --bundle models/default --corpus-stats data/corpus/stats.json \
        --eval dev=eval_dev.json --eval test=eval_test.json \
        --lm-text "WordNet's glosses=data/lm/wordnet.report.json"

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


def _extra(stats: dict[str, Any]) -> str:
    """A further training source: `harken synth`'s stats.json (its train split) or
    `harken prepare`'s prepare_report.json (its kept splits)."""
    if "kept" in stats:
        kept = stats["kept"]
        return (
            "; ".join(
                f"{split} {k['utterances']} utterances, {k['hours']} h" for split, k in kept.items()
            )
            + f" ({stats.get('source', 'prepared')})"
        )
    train = stats.get("train", {})
    return f"train {train.get('utterances')} utterances, {train.get('hours')} h; " + _voices(
        train.get("hours_per_voice", {})
    )


EARLIER = " (learnt before this stage)"


def earlier_data(card_text: str, listed: set[str]) -> list[str]:
    """The Data lines of the card of the model a stage continued from, less the sources the
    new card lists itself: what the earlier stages learnt from, after that data's files are
    gone (a fresh machine keeps the repository, not the corpora)."""
    out, inside = [], False
    for line in card_text.splitlines():
        if line.startswith("## "):
            inside = line == "## Data"
        elif inside and line.startswith("- ") and ": " in line:
            label, rest = line[2:].split(": ", 1)
            label = label.removesuffix(EARLIER)
            if label not in listed:
                out.append(f"- {label}{EARLIER}: {rest}")
    return out


def _standing(evals: dict[str, dict[str, Any]]) -> list[str]:
    """Our best decoder beside the peer recognisers scored on the same references, so the
    card says plainly how far the model is from what users compare it with."""
    rows = []
    for split, report in evals.items():
        peers, d = report.get("peers", []), report["decoders"]
        if not peers:
            continue
        ours = "beam" if "beam" in d else "greedy"
        wer = d[ours]["overall"]["wer"]
        others = ", ".join(f"{p} {d[p]['overall']['wer']:.1%}" for p in peers)
        best = min(d[p]["overall"]["wer"] for p in peers)
        verdict = "ahead of" if wer < best else f"{wer - best:.1%} behind"
        rows.append(f"- {split}: harken {ours} WER {wer:.1%}; {others} ({verdict} the best peer)")
    if not rows:
        return []
    return [
        "",
        "## Beside the peers (`harken eval --peers`, the same references)",
        *rows,
        "",
        "Where harken is behind, a peer transcribes more words right; harken's strengths are "
        "streaming latency and throughput on small CPUs (README, Measured). Trust it on voices "
        "like its training voices; expect many more errors on unseen real speakers.",
    ]


_KIND_NAMES = (("search", "search"), ("lm", "LM"), ("network", "network"))


def _error_kinds(evals: dict[str, dict[str, Any]]) -> list[str]:
    """What owes the beam's word errors on each set (`evaluation/attribution.py`), so the card
    says which lever would help: a wider search, the LM, or the network."""
    rows = []
    for split, report in evals.items():
        kinds = (report.get("error_kinds") or {}).get("overall")
        if kinds:
            shares = ", ".join(f"{name} {kinds[k]['share']:.1%}" for k, name in _KIND_NAMES)
            rows.append(f"- {split}: {shares}")
    if not rows:
        return []
    return [
        "",
        "## Where the beam's word errors come from (`harken eval --beam`)",
        "The search missed a transcript its own score prefers (search); the LM, bonus or "
        "unknown-word penalty overrode what the network preferred (LM); the network itself "
        "prefers the wrong words (network). Shares of the word errors:",
        *rows,
    ]


def _precisions(evals: dict[str, dict[str, Any]]) -> str:
    """The precision the scores were measured in: a server's `--dtype auto` may run another
    (int8 recurrent layers on most CPUs), whose paired scores are measured separately."""
    found = sorted({str(r["dtype"]) for r in evals.values() if "dtype" in r})
    if not found:
        return ""
    return (
        f", the network in {' and '.join(found)}; "
        "other precisions: `harken eval --dtype`, README `--dtype`"
    )


def _adaptation(cfg: ModelConfig) -> str:
    if not cfg.warp_factors:
        return "none"
    factors = ", ".join(f"{a:g}" for a in cfg.warp_factors)
    if cfg.warp_merge == "mean":
        return (
            f"each stream runs on frequency warps {factors} of its input and averages their "
            "probabilities, frame by frame, for the whole stream (`harken tune-warp` on dev)"
        )
    seconds = cfg.warp_decide_frames * cfg.frame_seconds
    return (
        f"each stream runs on frequency warps {factors} of its input and keeps, frame by frame, "
        f"the most confident; fixed after {seconds:g} s (`harken tune-warp` on dev)"
    )


def _member_lines(members: list[tuple[str, float, dict[str, Any]]]) -> list[str]:
    """An ensemble bundle's further networks (`models/ensemble.py`), after its own."""
    if not members:
        return []
    own = 1.0 - sum(share for _, share, _ in members)
    lines = [
        f"- ensemble: this network's per-frame probabilities ({own:.2f} of the mean) averaged "
        "with those of "
        + ("another network" if len(members) == 1 else "other networks")
        + "; every stream runs each network, so serving costs the sum of their steps "
        "(`harken loadtest` measures it)"
    ]
    for folder, share, meta in members:
        m = ModelConfig.from_dict(meta["model"])
        lines.append(
            f"  - `{folder}/` ({share:.2f}): {m.rnn_layers} x {m.rnn_type.upper()} of "
            f"{m.rnn_hidden} units, {meta.get('parameters', 0):,} parameters; speaker "
            f"adaptation: {_adaptation(m)}"
        )
    return lines


def provenance_lines(prov: dict[str, Any]) -> list[str]:
    """One Markdown item per provenance field, and one per earlier training stage."""
    lines = [f"- {k.replace('_', ' ')}: {v}" for k, v in prov.items() if k != "earlier_stages"]
    for i, stage in enumerate(prov.get("earlier_stages", []), 1):
        fields = "; ".join(f"{k.replace('_', ' ')} {v}" for k, v in stage.items())
        lines.append(f"- earlier stage {i}: {fields}")
    return lines


def language_model_lines(
    decoder: dict[str, Any], vocabulary: int, lm_bytes: int, names: dict[str, str] | None = None
) -> list[str]:
    """The LM section: what the decoder reads, from which text, at which weight.

    The texts are the ones `harken build-lm` recorded in decoder.json, so the card can be
    written where they no longer exist; `names` says in words what a file (as recorded) is."""
    cfg = decoder.get("config", {})
    names = names or {}
    lines = [
        "## Language model",
        f"- KenLM {decoder.get('order')}-gram over {decoder.get('unit', 'word')}s, "
        f"{vocabulary:,} words, {lm_bytes / 1e6:.1f} MB",
    ]
    if "texts" not in decoder:
        lines.append("- text: not recorded (decoder.json was written before build-lm kept it)")
    for text in decoder.get("texts", []):
        name = names.get(text["file"], text["file"])
        times = f", counted {text['times']} times" if text["times"] > 1 else ""
        held = ""
        if "held_out" in text:
            held = (
                f" (none sharing {text['ngram']} words with {len(text['held_out'])} held-out "
                "manifests)"
            )
        lines.append(
            f"- text: {name}{times}, {text['sentences']:,} sentences, {text['words']:,} words, "
            f"{text['vocabulary']:,} distinct{held}"
        )
    for m in decoder.get("mix", []):
        counts = "/".join(f"{n:,}" for n in m.get("ngrams", []))
        lines.append(
            f"- interpolated at {m['weight']} with {names.get(m['lm'], m.get('source', m['lm']))}: "
            f"a {m.get('order')}-gram ({counts} n-grams), {m.get('vocabulary', 0):,} words "
            "spelt in the alphabet (`harken mix-lm`)"
        )
    lines.append(
        f"- weight {cfg.get('alpha')}, insertion bonus {cfg.get('beta')} (`harken tune-lm` on "
        f"dev), beam {cfg.get('beam_width')}"
    )
    if cfg.get("blank_penalty"):
        lines.append(
            f"- blank penalty {cfg['blank_penalty']}: taken off every frame's blank log-prob "
            "before the search, so fewer characters of unheard voices are deleted"
        )
    if cfg.get("lookahead"):
        lines.append(
            f"- unigram look-ahead {cfg['lookahead']}: a partial word scores that share of the "
            "weighted best unigram it could still become, so likely words are not cut mid-word"
        )
    if cfg.get("commit_s"):
        lines.append(
            f"- early commit {cfg['commit_s']} s: hypotheses that parted from the best one "
            "longer ago are dropped, so partials' `stable` words trail the audio by about that"
        )
    return lines


# the LM section of a bundle without decoder.json: served so, it reads many more words wrong
NO_LANGUAGE_MODEL = [
    "## Language model",
    "- none: the bundle has no decoder.json, so the beam search hears the network alone "
    "(`harken build-lm` builds an LM into it; `harken train --init-from` carries the "
    "starting bundle's)",
]


def card(
    meta: dict[str, Any],
    stats: dict[str, Any],
    evals: dict[str, dict[str, Any]],
    extra_data: dict[str, dict[str, Any]] | None = None,
    language_model: list[str] | None = None,
    earlier_card: str | None = None,
    members: list[tuple[str, float, dict[str, Any]]] | None = None,
) -> str:
    """`language_model`: the LM section (`language_model_lines`; None: the bundle has no
    LM, and the card says so); `earlier_card`: the text of the card of the bundle this one
    continued from; `members`: (folder, share, config.json) of each further network of an
    ensemble bundle."""
    cfg = ModelConfig.from_dict(meta["model"])
    prov = meta.get("provenance", {})
    f = cfg.features
    lines = [
        "# harken default English model",
        "",
        "Deep Speech 2 style streaming acoustic model (unidirectional GRU + row convolution),",
        "trained by `harken train` on speech that `harken synth` made with Debian's TTS engines,",
        "SVOX Pico, Piper, RHVoice and Kokoro reading the `fortunes` text, and on any real speech",
        "the Data section names (it counts the voices of each). Dev and test use held-out voices",
        "that training never saw; `experiments/people.md` puts the scores beside PocketSphinx",
        "and Whisper tiny.en on the same sets.",
        "",
        "## Network",
        f"- input: {'log-mel filterbank' if f.n_mels else 'log power spectrogram'}, "
        f"{f.n_bins} bins, {f.window_ms:g} ms window, "
        f"{f.hop_ms:g} ms hop, "
        + (
            f"cepstral lifter at {f.cepstral_lifter} samples (envelope only: pitch harmonics "
            "removed)"
            if f.cepstral_lifter
            else "no lifter"
        ),
        f"- {cfg.conv_layers} x {cfg.conv_type.upper()} convolution, {cfg.conv_channels} channels, "
        f"time kernel {cfg.conv_time_kernel}, stride {cfg.time_stride} in time",
        f"- {cfg.rnn_layers} x unidirectional {cfg.rnn_type.upper()} of {cfg.rnn_hidden} units"
        + (f" (the top {cfg.rnn_residual_layers} residual)" if cfg.rnn_residual_layers else "")
        + ", "
        f"sequence-wise BatchNorm (folded), row convolution tau = {cfg.row_conv_tau} "
        f"({cfg.row_conv_tau * cfg.frame_seconds * 1000:.0f} ms look-ahead)",
        f"- {meta.get('parameters', 0):,} parameters; output every "
        f"{cfg.frame_seconds * 1000:.0f} ms over {len(cfg.alphabet) + 1} symbols",
        "- speaker adaptation: " + _adaptation(cfg),
        *_member_lines(members or []),
        "",
        "## Data",
    ]
    listed = set()
    for split in ("train", "dev", "test"):
        s = stats.get(split, {})
        if s.get("utterances"):  # a corpus built for its dev/test only trained nothing
            voices = _voices(s.get("hours_per_voice", {}))
            lines.append(
                f"- {split}: {s.get('utterances')} utterances, {s.get('hours')} h; {voices}"
            )
            listed.add(split)
    for name, extra in (extra_data or {}).items():
        lines += [f"- {name}: " + _extra(extra)]
        listed.add(name)
    if earlier_card:
        lines += earlier_data(earlier_card, listed)
    lines += ["", "## Training"]
    lines += provenance_lines(prov)
    lines += ["", *(language_model or NO_LANGUAGE_MODEL)]
    lines += ["", "## Accuracy (`harken eval`" + _precisions(evals) + ")"]
    for split, report in evals.items():
        lines.append(f"- {split} ({report['utterances']} utterances): " + "; ".join(_rates(report)))
    lines += _error_kinds(evals)
    lines += _standing(evals)
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description="write a bundle's CARD.md from measured results")
    p.add_argument("--bundle", type=Path, required=True)
    p.add_argument("--corpus-stats", type=Path, required=True, help="stats.json of harken synth")
    p.add_argument("--eval", action="append", default=[], help="SPLIT=eval.json (repeatable)")
    p.add_argument(
        "--extra-data",
        action="append",
        default=[],
        help="NAME=stats.json or prepare_report.json of a further training source (repeatable)",
    )
    p.add_argument(
        "--earlier-card",
        type=Path,
        help="CARD.md of the bundle this one continued from: its data lines carry over",
    )
    p.add_argument(
        "--lm-name",
        action="append",
        default=[],
        help="FILE=NAME: what a text decoder.json records (by its build-lm path) is, in words",
    )
    args = p.parse_args()
    meta = json.loads((args.bundle / "config.json").read_text())
    stats = json.loads(args.corpus_stats.read_text())
    evals = {}
    for item in args.eval:
        split, _, path = item.partition("=")
        evals[split] = json.loads(Path(path).read_text())
    extra = {}
    for item in args.extra_data:
        name, _, path = item.partition("=")
        extra[name] = json.loads(Path(path).read_text())
    language_model = None
    if (args.bundle / "decoder.json").is_file():
        decoder = json.loads((args.bundle / "decoder.json").read_text())
        unigrams = (args.bundle / decoder["unigrams"]).read_text().split()
        names = dict(item.partition("=")[::2] for item in args.lm_name)
        language_model = language_model_lines(
            decoder, len(unigrams), (args.bundle / decoder["lm"]).stat().st_size, names
        )
    earlier = args.earlier_card.read_text() if args.earlier_card else None
    members = [  # models/ensemble.py's entry (its loader checked it when `evaluate` ran)
        (
            m["bundle"],
            m["weight"],
            json.loads((args.bundle / m["bundle"] / "config.json").read_text()),
        )
        for m in meta.get("ensemble", {}).get("members", [])
    ]
    text = card(meta, stats, evals, extra, language_model, earlier, members)
    (args.bundle / "CARD.md").write_text(text)
    print((args.bundle / "CARD.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
