"""`harken eval`: word and character error rates of a bundle on a manifest, greedy and (with
`--beam`) with the beam search and the bundle's LM, per voice and overall, and the worst
utterances. `--peers` adds reference rows from other recognisers (PocketSphinx, Whisper tiny.en;
`evaluation/peers.py`) scored on the same references, so every report shows the distance.

The network runs once over the manifest, in batches of similar-length utterances (fp32,
`DS2.forward` with the bundle's speaker adaptation, which streaming equals); each decoder then decodes the same log-probs.

    harken eval --bundle models/default --manifest data/corpus/test.jsonl --beam \
        --peers pocketsphinx whisper-tiny.en --out eval.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import soundfile as sf
import torch

from decoder.beam import BeamSearchDecoder
from decoder.loading import DECODER_JSON
from decoder.metrics import ErrorRate, edit_distance
from evaluation.attribution import KINDS, Kind, attribute, shares
from evaluation.peers import PEERS, PeerUnavailable, load_peer, transcribe_manifest
from models import DEFAULT_BUNDLE
from models.bundle import PRECISIONS, load_bundle
from models.config import parse_bool
from models.ensemble import Networks, alone_search, load_networks
from models.features import featurize
from models.input_adaptation import AdaptConfig, InputAdapter, InputTransforms, ProfileSchedule
from models.manifest import Utterance, read_manifest
from server.decoding import Decoder, build_decoder
from training.data import Example, collate, load_audio

F32 = npt.NDArray[np.float32]
NO_VOICE = "(no voice)"


@dataclass(frozen=True)
class Scored:
    """One utterance decoded by one decoder."""

    hypothesis: str
    word_errors: int
    words: int
    char_errors: int
    chars: int

    @property
    def wer(self) -> float:
        return ErrorRate(self.word_errors, self.words).rate

    @property
    def cer(self) -> float:
        return ErrorRate(self.char_errors, self.chars).rate


def score(reference: str, hypothesis: str) -> Scored:
    """Word and character edit distances (spaces normalised, as decoder.metrics does)."""
    ref, hyp = " ".join(reference.split()), " ".join(hypothesis.split())
    return Scored(
        hyp,
        edit_distance(ref.split(), hyp.split()),
        len(ref.split()),
        edit_distance(list(ref), list(hyp)),
        len(ref),
    )


# -- the network, batched ---------------------------------------------------------------------


@torch.inference_mode()
def log_probs(
    model: Networks,
    utterances: Sequence[Utterance],
    batch_frames: int,
    batch_size: int,
    adapter: InputAdapter | None = None,
    profiles: Sequence[InputTransforms | None] | None = None,
) -> tuple[list[F32], float]:
    """Per utterance its log-probs [T', V] (manifest order), and the audio seconds. Batches
    group utterances of similar length, of at most `batch_size` utterances and about
    `batch_frames` padded input frames, so little of the work is padding. With `adapter`,
    each utterance is heard through input transforms fitted to it, as a server adapting
    to files hears it; with `profiles` (one per utterance, or None), through its speaker's
    profile (`speaker_profiles`)."""
    frames = [_frames(model, u) for u in utterances]
    order = sorted(range(len(frames)), key=lambda i: frames[i])
    out: list[F32] = [np.zeros((0, model.config.vocab_size), np.float32)] * len(frames)
    rate = model.config.features.sample_rate
    samples = 0
    for batch in _batches([frames[i] for i in order], batch_frames, batch_size):
        idx = [order[k] for k in batch]
        audio = [load_audio(str(utterances[i].audio), rate) for i in idx]
        samples += sum(len(a) for a in audio)
        feats = [_features(model, a) for a in audio]
        fitted = [adapter.fit(f.numpy()) for f in feats] if adapter is not None else None
        no_labels = torch.zeros(0, dtype=torch.long)
        b = collate([Example(f, no_labels, i) for f, i in zip(feats, idx, strict=True)])
        heard = [profiles[i] for i in idx] if profiles is not None else None
        # as served: warps, members mixed (and the file's fitted transforms or the profiles)
        lp, n = model.forward(b.feats, b.feat_lengths, transforms=fitted, profiles=heard)
        for j, i in enumerate(idx):
            out[i] = lp[j, : int(n[j])].float().numpy()
    return out, samples / rate


def speaker_profiles(
    model: Networks,
    utterances: Sequence[Utterance],
    adapter: InputAdapter,
    schedule: ProfileSchedule,
) -> list[InputTransforms | None]:
    """The profile each utterance is heard through when each voice's utterances come, in
    manifest order, as one live stream that adapts to its speaker (`harken serve
    --adapt-speakers`; a client that resets between utterances): the profile fitted on the
    voice's audio before the utterance, by the schedule's rule. A fit that would land inside
    an utterance counts from the next one (the server's may land sooner). An utterance with no
    voice is a speaker of its own, and too short to have a profile."""
    rate, hop_s = model.config.features.sample_rate, model.config.features.hop_ms / 1000
    heard: dict[str, list[F32]] = {}
    fitted_on: dict[str, float] = {}
    current: dict[str, InputTransforms] = {}
    out: list[InputTransforms | None] = []
    for utt in utterances:
        voice = utt.voice
        out.append(current.get(voice) if voice is not None else None)
        if voice is None or fitted_on.get(voice, 0.0) >= schedule.max_s:
            continue
        feats = _features(model, load_audio(str(utt.audio), rate)).numpy()
        frames = heard.setdefault(voice, [])
        frames.append(feats)
        seconds = sum(len(f) for f in frames) * hop_s
        if schedule.due(fitted_on.get(voice, 0.0), seconds):
            read = np.concatenate(frames)[: int(schedule.max_s / hop_s)]
            current[voice] = adapter.fit(read, schedule.config(first=voice not in current))
            fitted_on[voice] = len(read) * hop_s
    return out


def _frames(model: Networks, utt: Utterance) -> int:
    """Approximate input frames, from the manifest's duration or the file header."""
    seconds = utt.duration or sf.info(str(utt.audio)).duration
    return int(seconds * 1000 / model.config.features.hop_ms)


def _features(model: Networks, audio: F32) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(featurize(audio, model.config.features)))


def _batches(sorted_lengths: list[int], batch_frames: int, batch_size: int) -> list[list[int]]:
    """Cut positions of ascending lengths into batches whose padded size stays in budget."""
    batches: list[list[int]] = []
    for k, n in enumerate(sorted_lengths):
        last = batches[-1] if batches else None
        if last is not None and len(last) < batch_size and (len(last) + 1) * n <= batch_frames:
            last.append(k)
        else:
            batches.append([k])
    return batches


# -- decoding and the report ------------------------------------------------------------------


def decode_all(decoder: Decoder, outputs: Sequence[F32]) -> tuple[list[str], float]:
    """Best hypothesis per utterance, and the seconds spent decoding."""
    start, texts = time.perf_counter(), []
    for lp in outputs:
        stream = decoder.start()
        stream.advance(lp)
        texts.append(stream.finalize()[0].text)
    return texts, time.perf_counter() - start


def summarize(scored: Sequence[Scored]) -> dict[str, Any]:
    """Corpus rates: total errors over total reference words / characters."""
    w = ErrorRate(sum(s.word_errors for s in scored), sum(s.words for s in scored))
    c = ErrorRate(sum(s.char_errors for s in scored), sum(s.chars for s in scored))
    return {
        "utterances": len(scored),
        "wer": w.rate,
        "cer": c.rate,
        "words": w.length,
        "word_errors": w.errors,
        "chars": c.length,
        "char_errors": c.errors,
    }


def by_voice(utts: Sequence[Utterance], scored: Sequence[Scored]) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[Scored]] = {}
    for u, s in zip(utts, scored, strict=True):
        groups.setdefault(u.voice or NO_VOICE, []).append(s)
    return {voice: summarize(groups[voice]) for voice in sorted(groups)}


def error_kinds(
    utts: Sequence[Utterance], scored: Sequence[Scored], kinds: Sequence[Kind]
) -> dict[str, Any]:
    """Overall and per voice, each kind's utterances and share of the word errors."""
    groups: dict[str, list[int]] = {}
    for i, u in enumerate(utts):
        groups.setdefault(u.voice or NO_VOICE, []).append(i)

    def part(rows: Sequence[int]) -> dict[str, dict[str, float]]:
        return shares([kinds[i] for i in rows], [scored[i].word_errors for i in rows])

    return {
        "overall": part(range(len(utts))),
        "per_voice": {voice: part(groups[voice]) for voice in sorted(groups)},
        "per_utterance": list(kinds),  # in manifest order, as `per_utterance` lists errors
    }


def worst(
    utts: Sequence[Utterance],
    results: dict[str, list[Scored]],
    count: int,
    kinds: Sequence[Kind] = (),
) -> list[dict[str, Any]]:
    """The `count` utterances with the most word errors under the last (best) decoder, then
    the most character errors; each with every decoder's hypothesis (and the beam's error
    kind, when attributed)."""
    ranked = list(results)[-1]
    rows = results[ranked]
    order = sorted(
        range(len(utts)),
        key=lambda i: (-rows[i].wer, -rows[i].cer, -rows[i].words, str(utts[i].audio)),
    )
    out = []
    for i in order[:count]:
        row: dict[str, Any] = {
            "audio": str(utts[i].audio),
            "voice": utts[i].voice,
            "reference": utts[i].text,
        }
        for name, scored in results.items():
            row[name] = {"text": scored[i].hypothesis, "wer": scored[i].wer, "cer": scored[i].cer}
        if kinds:
            row["beam"]["kind"] = kinds[i]
        out.append(row)
    return out


def evaluate(
    model: Networks,
    utts: Sequence[Utterance],
    decoders: dict[str, Decoder],
    args: argparse.Namespace,
) -> dict[str, Any]:
    """The whole evaluation as a JSON-ready report."""
    results: dict[str, list[Scored]] = {}
    timing: dict[str, float] = {}
    for name in args.peers:  # first: `worst` ranks by the last column, the bundle's best
        peer = load_peer(name, args.threads)
        rows = transcribe_manifest(peer, utts, load_audio)
        results[name] = [score(u.text, r.text) for u, r in zip(utts, rows, strict=True)]
        timing[f"{name}_s"] = sum(r.seconds for r in rows)
    start = time.perf_counter()
    adapter = (
        InputAdapter(
            lambda: load_bundle(args.bundle, dtype="fp32"),
            model.config.warp_factors,
            AdaptConfig(steps=args.adapt_steps, rate=args.adapt_rate),
        )
        if args.adapt_input
        else None
    )
    profiles = None
    if args.adapt_speaker:
        schedule = ProfileSchedule.of(args.profile_first_s, args.profile_max_s)
        fitter = InputAdapter(
            lambda: load_bundle(args.bundle, dtype="fp32"), model.config.warp_factors
        )
        profiles = speaker_profiles(model, utts, fitter, schedule)
    outputs, audio_seconds = log_probs(
        model, utts, args.batch_frames, args.batch_size, adapter, profiles
    )
    timing["forward_s"] = time.perf_counter() - start
    kinds: list[Kind] = []
    for name, decoder in decoders.items():
        texts, seconds = decode_all(decoder, outputs)
        results[name] = [score(u.text, t) for u, t in zip(utts, texts, strict=True)]
        timing[f"{name}_decode_s"] = seconds
        if name == "beam" and isinstance(decoder, BeamSearchDecoder):
            start = time.perf_counter()
            kinds = [
                attribute(decoder, lp, u.text, t)
                for lp, u, t in zip(outputs, utts, texts, strict=True)
            ]
            timing["attribution_s"] = time.perf_counter() - start
    return {
        "bundle": str(args.bundle),
        "manifest": str(args.manifest),
        "dtype": args.dtype,
        # the fit's settings, or false
        "adapt_input": (
            {"steps": args.adapt_steps, "rate": args.adapt_rate} if args.adapt_input else False
        ),
        # when each voice's profile was fitted (seconds of its audio), or false
        "adapt_speaker": (
            {"first_s": args.profile_first_s, "max_s": args.profile_max_s}
            if args.adapt_speaker
            else False
        ),
        "utterances": len(utts),
        "heard_through_a_profile": sum(p is not None for p in profiles or ()),
        "audio_seconds": audio_seconds,
        "timing": timing,
        "peers": list(args.peers),
        "decoders": {
            name: {"overall": summarize(s), "per_voice": by_voice(utts, s)}
            for name, s in results.items()
        },
        # the beam's word errors by what owes them: the search, the LM, the network
        "error_kinds": error_kinds(utts, results["beam"], kinds) if kinds else None,
        "worst": worst(utts, results, args.worst, kinds),
        # every utterance's error counts, so that `harken compare` can pair two reports; audio
        # relative to the manifest, so that reports from two checkouts still pair
        "per_utterance": {
            "audio": [os.path.relpath(u.audio, args.manifest.parent) for u in utts],
            **{
                name: [[x.word_errors, x.words, x.char_errors, x.chars] for x in s]
                for name, s in results.items()
            },
        },
    }


def markdown(report: dict[str, Any]) -> str:
    names = list(report["decoders"])
    lines = [
        f"# {report['bundle']} on {report['manifest']}",
        "",
        f"{report['utterances']} utterances, {report['audio_seconds'] / 3600:.2f} h; "
        + ", ".join(f"{k} {v:.1f} s" for k, v in report["timing"].items()),
        "",
        "| voice | utterances |" + "".join(f" {n} WER | {n} CER |" for n in names),
        "| --- | --- |" + " --- | --- |" * len(names),
    ]
    voices = list(report["decoders"][names[0]]["per_voice"])
    for voice in [*voices, "overall"]:
        cells = [
            report["decoders"][n]["overall" if voice == "overall" else "per_voice"] for n in names
        ]
        rows = [c if voice == "overall" else c[voice] for c in cells]
        label = f"**{voice}**" if voice == "overall" else voice
        lines.append(
            f"| {label} | {rows[0]['utterances']} |"
            + "".join(f" {r['wer']:.2%} | {r['cer']:.2%} |" for r in rows)
        )
    kinds = report.get("error_kinds")
    if kinds:
        lines += [
            "",
            "Where the beam's word errors come from (`evaluation/attribution.py`): **search**, "
            "it missed a reference its own score prefers; **LM**, the LM's side overrode a "
            "reference the network preferred; **network**, the network itself prefers the "
            "wrong words. Share of the word errors (utterances):",
            "",
            "| voice | search | LM | network |",
            "| --- | --- | --- | --- |",
        ]
        for voice, part in [*kinds["per_voice"].items(), ("**overall**", kinds["overall"])]:
            lines.append(
                f"| {voice} |"
                + "".join(f" {part[k]['share']:.1%} ({part[k]['utterances']}) |" for k in KINDS[1:])
            )
    lines += ["", f"Worst utterances (by {names[-1]} WER):", ""]
    for w in report["worst"]:
        lines.append(f"- {w['audio']} ({w['voice'] or NO_VOICE})")
        lines.append(f"  - ref: {w['reference']}")
        for n in names:
            why = f", {w[n]['kind']}" if "kind" in w[n] else ""
            lines.append(f"  - {n} (WER {w[n]['wer']:.0%}{why}): {w[n]['text']}")
    return "\n".join(lines) + "\n"


# -- command line -----------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bundle", type=Path, default=DEFAULT_BUNDLE, help="model bundle directory")
    p.add_argument("--manifest", type=Path, required=True, help="JSON Lines manifest to score")
    p.add_argument("--beam", action="store_true", help="also the beam search with the bundle's LM")
    p.add_argument("--beam-width", type=int, default=0, help="override decoder.json's beam width")
    p.add_argument(
        "--out",
        type=Path,
        help="report as JSON here and Markdown beside (a .md path: Markdown only)",
    )
    p.add_argument("--limit", type=int, default=0, help="first N utterances only (0: all)")
    p.add_argument("--worst", type=int, default=10, help="worst utterances to list")
    p.add_argument("--batch-size", type=int, default=32, help="utterances per forward batch")
    p.add_argument("--batch-frames", type=int, default=20000, help="padded frames per batch")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument(
        "--dtype",
        choices=PRECISIONS,
        default="fp32",
        help="precision of the network (what `harken serve --dtype` would run)",
    )
    p.add_argument(
        "--ensemble",
        type=parse_bool,
        default=True,
        help="hear with every network of an ensemble bundle (false: its own network only, "
        "with the settings it keeps for that; what `harken serve --ensemble false` runs)",
    )
    p.add_argument(
        "--adapt-input",
        type=parse_bool,
        default=False,
        help="hear each utterance through input transforms fitted to it first, as a server "
        "with --adapt-files hears a file (models/input_adaptation.py)",
    )
    p.add_argument("--adapt-steps", type=int, default=5, help="the fit's gradient steps")
    p.add_argument("--adapt-rate", type=float, default=0.05, help="the fit's step rate")
    p.add_argument(
        "--adapt-speaker",
        type=parse_bool,
        default=False,
        help="hear each voice's utterances (manifest order) as one live stream that fits its "
        "speaker's profile as it goes, as a server with --adapt-speakers hears it",
    )
    p.add_argument("--profile-first-s", type=float, default=15.0, help="first profile's audio")
    p.add_argument("--profile-max-s", type=float, default=60.0, help="last profile's audio")
    p.add_argument(
        "--peers",
        nargs="+",
        default=[],
        choices=PEERS,
        metavar="PEER",
        help=f"also score these recognisers as reference rows ({', '.join(PEERS)}; "
        "the peers extra)",
    )


def main(args: argparse.Namespace) -> int:
    if args.adapt_input and args.adapt_speaker:
        raise SystemExit(
            "harken eval: error: --adapt-input (a file fitted on itself) and --adapt-speaker (a "
            "live stream's profile) are two ways to serve; score one at a time"
        )
    if args.adapt_speaker:
        try:
            ProfileSchedule.of(args.profile_first_s, args.profile_max_s)
        except ValueError as e:
            raise SystemExit(f"harken eval: error: {e}") from None
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    model = load_networks(args.bundle, dtype=args.dtype, ensemble=args.ensemble)
    utts = read_manifest(args.manifest, check_audio=True)
    utts = utts[: args.limit] if args.limit else utts
    if not utts:
        raise SystemExit(f"{args.manifest} has no utterances")
    decoders: dict[str, Decoder] = {"greedy": build_decoder(args.bundle, model.config, "greedy")}
    if args.beam:
        if not (args.bundle / DECODER_JSON).is_file():
            print(f"note: {args.bundle} has no {DECODER_JSON}: beam search without an LM")
        search = {} if args.ensemble else alone_search(args.bundle)
        if args.beam_width > 0:
            search["beam_width"] = args.beam_width
        decoders["beam"] = build_decoder(args.bundle, model.config, "beam", search)
    try:
        report = evaluate(model, utts, decoders, args)
    except PeerUnavailable as e:
        raise SystemExit(f"harken eval: error: {e}") from None
    text = markdown(report)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        if args.out.suffix != ".md":
            args.out.write_text(json.dumps(report, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(text)
    return 0
