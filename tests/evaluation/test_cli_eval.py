"""`harken eval` on a tiny random bundle with a tiny LM: the report's structure, rates that
add up, and batched forward passes that equal one utterance at a time."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from decoder.beam import DecoderConfig
from decoder.loading import write_decoder_json
from evaluation import cli_eval
from evaluation.tune_warp import write_warp
from models.bundle import load_bundle
from models.ensemble import load_networks
from models.features import featurize
from models.input_adaptation import AdaptConfig, InputAdapter, ProfileSchedule, fit_transforms
from models.manifest import Utterance, read_manifest, write_manifest
from tests.decoder.conftest import WORD_BIGRAMS, WORDS, write_arpa
from training.data import load_audio

VOICES = ["espeak:en-us", "flite:slt"]
TEXTS = ["a b", "ab ba", "hello there", "a", "ba ab a"]


@pytest.fixture
def bundle_with_lm(tiny_bundle: Path, tmp_path: Path) -> Path:
    """The shared tiny bundle plus a bigram word LM and its decoder.json."""
    bundle = Path(shutil.copytree(tiny_bundle, tmp_path / "bundle"))
    write_arpa(bundle / "lm.arpa", WORDS, WORD_BIGRAMS)
    (bundle / "unigrams.txt").write_text("a\nb\nab\nba\n")
    write_decoder_json(bundle, DecoderConfig(beam_width=8), "word", 2, "lm.arpa", "unigrams.txt")
    return bundle


def make_manifest(root: Path) -> Path:
    """Five utterances of noise and tones, 0.3 to 1.5 s, from two voices."""
    rng = np.random.default_rng(1)
    utts = []
    for i, text in enumerate(TEXTS):
        n = int(16000 * (0.3 + 0.3 * i))
        t = np.arange(n) / 16000
        audio = 0.2 * np.sin(2 * np.pi * (300 + 100 * i) * t) + 0.05 * rng.standard_normal(n)
        sf.write(root / f"u{i}.wav", audio.astype(np.float32), 16000, subtype="PCM_16")
        utts.append(Utterance(root / f"u{i}.wav", text, None, VOICES[i % 2]))
    write_manifest(root / "test.jsonl", utts)
    return root / "test.jsonl"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    cli_eval.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_report_has_greedy_and_beam_per_voice_and_overall(
    bundle_with_lm: Path, tmp_path: Path
) -> None:
    manifest = make_manifest(tmp_path)
    out = tmp_path / "report.json"
    args = parse("--bundle", str(bundle_with_lm), "--manifest", str(manifest), "--beam")
    args.out, args.worst, args.batch_size = out, 3, 2
    assert cli_eval.main(args) == 0
    report = json.loads(out.read_text())
    assert "| **overall** | 5 |" in out.with_suffix(".md").read_text()
    assert report["utterances"] == 5 and report["audio_seconds"] > 0
    assert set(report["timing"]) == {
        "forward_s",
        "greedy_decode_s",
        "beam_decode_s",
        "attribution_s",
    }
    assert list(report["decoders"]) == ["greedy", "beam"]
    for result in report["decoders"].values():
        overall, voices = result["overall"], result["per_voice"]
        assert sorted(voices) == sorted(VOICES)
        assert overall["utterances"] == 5 == sum(v["utterances"] for v in voices.values())
        for key in ("word_errors", "words", "char_errors", "chars"):
            assert overall[key] == sum(v[key] for v in voices.values())
        assert overall["words"] == sum(len(t.split()) for t in TEXTS)
        assert overall["wer"] == overall["word_errors"] / overall["words"]
    worst = report["worst"]
    assert len(worst) == 3
    assert [w["beam"]["wer"] for w in worst] == sorted(
        (w["beam"]["wer"] for w in worst), reverse=True
    )
    assert {"audio", "voice", "reference", "greedy", "beam"} <= set(worst[0])
    # every wrong beam transcript is owed to the search, the LM or the network
    kinds, beam = report["error_kinds"], report["decoders"]["beam"]
    assert sorted(kinds["per_voice"]) == sorted(VOICES)
    wrong = sum(1 for w in report["per_utterance"]["beam"] if w[0] > 0)
    assert sum(k["utterances"] for k in kinds["overall"].values()) == wrong > 0
    assert sum(k["share"] for k in kinds["overall"].values()) == pytest.approx(1.0)
    for voice, part in kinds["per_voice"].items():
        errors = beam["per_voice"][voice]["word_errors"]
        assert sum(k["share"] for k in part.values()) == pytest.approx(1.0 if errors else 0.0)
    assert all(w["beam"]["kind"] in ("search", "lm", "network") for w in worst)
    assert [k != "right" for k in kinds["per_utterance"]] == [
        w[0] > 0 for w in report["per_utterance"]["beam"]
    ]
    assert "| **overall** | " in out.with_suffix(".md").read_text().split("come from")[1]


def test_markdown_output_and_greedy_only(tiny_bundle: Path, tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path)
    args = parse("--bundle", str(tiny_bundle), "--manifest", str(manifest), "--limit", "4")
    args.out = tmp_path / "report.md"
    assert cli_eval.main(args) == 0
    text = args.out.read_text()
    assert "| voice | utterances | greedy WER | greedy CER |" in text
    assert "| **overall** | 4 |" in text and "beam" not in text and "come from" not in text
    assert "Worst utterances" in text and "ref: " in text


def test_batched_forward_equals_one_utterance_at_a_time(tiny_bundle: Path, tmp_path: Path) -> None:
    utts = read_manifest(make_manifest(tmp_path))
    model = load_networks(tiny_bundle)
    batched, seconds = cli_eval.log_probs(model, utts, batch_frames=10**6, batch_size=8)
    alone, _ = cli_eval.log_probs(model, utts, batch_frames=10**6, batch_size=1)
    assert seconds == pytest.approx(sum(0.3 + 0.3 * i for i in range(5)), abs=0.05)
    for a, b in zip(batched, alone, strict=True):
        assert a.shape == b.shape and a.shape[0] > 0
        np.testing.assert_allclose(a, b, atol=1e-4)


def test_adapt_input_hears_each_utterance_as_a_server_adapting_to_files_does(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    warped_bundle = Path(shutil.copytree(tiny_bundle, tmp_path / "warped"))
    write_warp(warped_bundle, (0.9, 1.1), 4, "mean")  # as models/default hears
    utts = read_manifest(make_manifest(tmp_path))
    model = load_networks(warped_bundle)
    adapter = InputAdapter(lambda: load_bundle(warped_bundle), model.config.warp_factors)
    batched, _ = cli_eval.log_probs(model, utts, 10**6, 8, adapter)
    plain, _ = cli_eval.log_probs(model, utts, 10**6, 8)
    for utt, got, heard in zip(utts, batched, plain, strict=True):
        feats = featurize(load_audio(str(utt.audio)), model.config.features)
        fitted = fit_transforms(model.models[0], feats, model.config.warp_factors)
        x, n = torch.from_numpy(feats)[None], torch.tensor([len(feats)])
        with torch.inference_mode():
            alone, _ = model.forward(x, n, transforms=[fitted])
        np.testing.assert_allclose(got, alone[0, : len(got)].numpy(), atol=1e-4)
        assert not np.allclose(got, heard, atol=1e-3)
    args = parse("--bundle", str(warped_bundle), "--manifest", str(tmp_path / "test.jsonl"))
    args.out = tmp_path / "adapted.json"
    args.adapt_input, args.adapt_steps = True, 2
    assert cli_eval.main(args) == 0
    assert json.loads(args.out.read_text())["adapt_input"] == {"steps": 2, "rate": 0.05}


def test_adapt_speaker_hears_each_voice_as_one_stream_that_fits_its_profile(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    warped_bundle = Path(shutil.copytree(tiny_bundle, tmp_path / "warped"))
    write_warp(warped_bundle, (0.9, 1.1), 4, "mean")
    utts = read_manifest(make_manifest(tmp_path))  # voices alternate; 0.3, 0.6, ... 1.5 s
    model = load_networks(warped_bundle)
    adapter = InputAdapter(lambda: load_bundle(warped_bundle), model.config.warp_factors)
    # fitted in pieces of a quarter second, but a voice's first profile as one sequence
    schedule = ProfileSchedule(0.5, 1.0, AdaptConfig(max_seconds=1.0, piece_seconds=0.25))
    profiles = cli_eval.speaker_profiles(model, utts, adapter, schedule)
    feats = [featurize(load_audio(str(u.audio)), model.config.features) for u in utts]
    # espeak (u0, u2, u4): too little before u2; fitted on its first second after it.
    # flite (u1, u3): fitted on u1 (0.6 s) after it, then on its first second after u3.
    assert [p is None for p in profiles] == [True, True, True, False, False]
    first_s = int(1.0 * 1000 / model.config.features.hop_ms)
    whole = dataclasses.replace(schedule.fit, piece_seconds=0.0)
    want = {
        3: adapter.fit(feats[1], whole),
        4: adapter.fit(np.concatenate([feats[0], feats[2]])[:first_s], whole),
    }
    assert not np.allclose(adapter.fit(feats[1], schedule.fit).gain, want[3].gain)
    for i, fitted in want.items():
        got = profiles[i]
        assert got is not None
        np.testing.assert_allclose(got.gain, fitted.gain, atol=1e-6)
    heard, _ = cli_eval.log_probs(model, utts, 10**6, 8, profiles=profiles)
    x, n = torch.from_numpy(feats[4])[None], torch.tensor([len(feats[4])])
    with torch.inference_mode():
        alone, _ = model.forward(x, n, profiles=[want[4]])
    np.testing.assert_allclose(heard[4], alone[0, : len(heard[4])].numpy(), atol=1e-4)
    args = parse("--bundle", str(warped_bundle), "--manifest", str(tmp_path / "test.jsonl"))
    args.out = tmp_path / "profiled.json"
    args.adapt_speaker, args.profile_first_s, args.profile_max_s = True, 0.5, 1.0
    assert cli_eval.main(args) == 0
    report = json.loads(args.out.read_text())
    assert report["adapt_speaker"] == {"first_s": 0.5, "max_s": 1.0}
    assert report["heard_through_a_profile"] == 2
    args.adapt_input = True
    with pytest.raises(SystemExit, match="score one at a time"):
        cli_eval.main(args)
    args.adapt_input, args.profile_first_s = False, 2.0
    with pytest.raises(SystemExit, match="0 < first_s <= max_s"):
        cli_eval.main(args)


def test_batches_respect_both_budgets() -> None:
    lengths = [10, 20, 30, 40, 50, 60]
    batches = cli_eval._batches(lengths, batch_frames=100, batch_size=3)
    assert [k for b in batches for k in b] == list(range(6))
    assert all(len(b) <= 3 and len(b) * lengths[b[-1]] <= 100 for b in batches if len(b) > 1)


def test_peers_are_scored_as_reference_rows_beside_the_bundle(
    tiny_bundle: Path, tmp_path: Path
) -> None:
    manifest = make_manifest(tmp_path)
    args = parse(
        "--bundle", str(tiny_bundle), "--manifest", str(manifest), "--peers", "pocketsphinx"
    )
    args.out = tmp_path / "report.json"
    assert cli_eval.main(args) == 0
    report = json.loads(args.out.read_text())
    assert report["peers"] == ["pocketsphinx"]
    assert list(report["decoders"]) == ["pocketsphinx", "greedy"]  # the bundle's rank last
    assert report["decoders"]["pocketsphinx"]["overall"]["words"] == sum(
        len(t.split()) for t in TEXTS
    )
    assert report["timing"]["pocketsphinx_s"] > 0
    assert "pocketsphinx WER" in args.out.with_suffix(".md").read_text()


def test_a_missing_peer_package_names_the_extra(
    tiny_bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pocketsphinx", None)  # import fails as if not installed
    manifest = make_manifest(tmp_path)
    args = parse(
        "--bundle", str(tiny_bundle), "--manifest", str(manifest), "--peers", "pocketsphinx"
    )
    with pytest.raises(SystemExit, match=r"harken eval: error: .*\.\[peers\]"):
        cli_eval.main(args)
