"""Manifests, batch construction, augmentation and the dataset the trainer consumes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from models.config import FeatureConfig
from models.features import bin_positions
from models.manifest import ManifestError, Utterance, read_manifest, write_manifest
from models.warp import piecewise_warp_matrix, warp_frequencies
from training.augment import (
    AUGMENT_PRESETS,
    AugmentConfig,
    augment,
    augment_features,
    change_speed,
    colour_curve,
    coloured_noise,
    formant_matrix,
    lowpass,
    quantise_8bit,
    telephone,
)
from training.batching import (
    STRATEGIES,
    BatchConfig,
    BatchSampler,
    epoch_batches,
    padding_ratio,
)
from training.cli import add_arguments
from training.data import DataConfig, SpeechDataset, collate, encode, worker_init
from training.train import TrainConfig

LINEAR = FeatureConfig()  # the linear-bin features these tests build by hand

RNG = np.random.default_rng(0)
LENGTHS = [float(x) for x in RNG.uniform(1.0, 15.0, size=203)]


def test_manifest_round_trip(tmp_path: Path) -> None:
    wav = tmp_path / "a" / "x.wav"
    utts = [Utterance(wav, "hello world", 1.5, "flite:kal"), Utterance(wav, "hi")]
    write_manifest(tmp_path / "m.jsonl", utts)
    first = json.loads((tmp_path / "m.jsonl").read_text().splitlines()[0])
    assert first["audio"] == "a/x.wav"  # relative to the manifest
    assert read_manifest(tmp_path / "m.jsonl") == [
        Utterance(wav.resolve(), "hello world", 1.5, "flite:kal"),
        Utterance(wav.resolve(), "hi"),
    ]


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"audio": "a.wav", "text": "ok"', "not valid JSON"),
        ('["a.wav", "ok"]', "expected a JSON object"),
        ('{"audio": "a.wav"}', '"text" must be a non-empty string'),
        ('{"audio": "a.wav", "text": "Hello!"}', "outside the alphabet"),
        ('{"audio": "a.wav", "text": "ok", "duration": -1}', '"duration" must be a positive'),
        ('{"audio": "a.wav", "text": "ok", "speaker": 3}', "unknown keys ['speaker']"),
    ],
)
def test_manifest_reader_names_the_broken_line(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text('{"audio": "a.wav", "text": "fine"}\n\n' + line + "\n")
    with pytest.raises(ManifestError) as e:
        read_manifest(path)
    assert "broken.jsonl:3: " in str(e.value) and problem in str(e.value)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_utterance_once_per_epoch_and_deterministic(strategy: str) -> None:
    cfg = BatchConfig(strategy=strategy, batch_size=16, bins=8, seed=3)
    for epoch in range(3):
        batches = epoch_batches(LENGTHS, cfg, epoch)
        assert sorted(i for b in batches for i in b) == list(range(len(LENGTHS)))
        assert all(1 <= len(b) <= 16 for b in batches)
        assert batches == epoch_batches(LENGTHS, cfg, epoch)
    assert epoch_batches(LENGTHS, cfg, 1) != epoch_batches(LENGTHS, cfg, 2)
    other_seed = BatchConfig(strategy=strategy, batch_size=16, bins=8, seed=4)
    assert epoch_batches(LENGTHS, cfg, 1) != epoch_batches(LENGTHS, other_seed, 1)


def test_sortagrad_first_epoch_increases_in_length() -> None:
    cfg = BatchConfig(strategy="random", batch_size=10, sortagrad=True)
    order = [i for b in epoch_batches(LENGTHS, cfg, 0) for i in b]
    assert [LENGTHS[i] for i in order] == sorted(LENGTHS)
    later = [LENGTHS[i] for b in epoch_batches(LENGTHS, cfg, 1) for i in b]
    assert later != sorted(LENGTHS)


def test_alternated_bins_sort_up_then_down() -> None:
    cfg = BatchConfig(strategy="alternated", batch_size=1, bins=4, sortagrad=False)
    order = [b[0] for b in epoch_batches(LENGTHS, cfg, 1)]
    parts = np.array_split(np.array([LENGTHS[i] for i in order]), 4)
    for k, part in enumerate(parts):
        assert list(part) == sorted(part, reverse=k % 2 == 1)


def test_padding_ratio_orders_strategies_as_seeds_003() -> None:
    ratios = {
        s: padding_ratio(epoch_batches(LENGTHS, BatchConfig(s, 16, 8, False), 1), LENGTHS)
        for s in STRATEGIES
    }
    assert ratios["sorted"] < ratios["alternated"] < ratios["random"]
    assert ratios["bucketing"] < ratios["random"]
    assert padding_ratio([[0, 1]], [2.0, 1.0]) == pytest.approx(0.25)


def test_sampler_resumes_exactly_from_a_position() -> None:
    cfg = BatchConfig(strategy="alternated", batch_size=8, bins=4)
    sampler = BatchSampler(LENGTHS, cfg)
    sampler.set_epoch(2)
    full = list(sampler)
    sampler.set_epoch(2, start=7)
    assert list(sampler) == full[7:] and len(sampler) == len(full) - 7


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_take_disjoint_parts_of_each_global_batch(world: int) -> None:
    cfg = BatchConfig(strategy="bucketing", batch_size=12, bins=5)
    samplers = [BatchSampler(LENGTHS, cfg, rank=r, world=world) for r in range(world)]
    for s in samplers:
        s.set_epoch(1)
    per_rank = [list(s) for s in samplers]
    assert len({len(p) for p in per_rank}) == 1  # same number of steps on every rank
    for step in zip(*per_rank, strict=True):
        assert all(step) and not set(step[0]) & set(step[1])
    assert sorted(i for p in per_rank for b in p for i in b) == list(range(len(LENGTHS)))
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(LENGTHS, BatchConfig(batch_size=2), rank=0, world=3)


def _speech_like(seconds: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(16000 * seconds)) / 16000
    tone = np.sin(2 * np.pi * 180 * t) * (0.5 + 0.5 * np.sin(2 * np.pi * 3 * t))
    return (0.3 * tone + 0.01 * rng.standard_normal(t.size)).astype(np.float32)


def test_augmentation_keeps_length_and_dtype_and_depends_on_seed() -> None:
    audio = _speech_like(2.0, 0)
    cfg = AugmentConfig(p_speed=0.0, p_reverb=1.0, p_noise=1.0, p_gain=1.0)
    a = augment(audio, cfg, np.random.default_rng(1))
    b = augment(audio, cfg, np.random.default_rng(2))
    assert a.dtype == np.float32 and a.shape == audio.shape
    assert np.all(np.isfinite(a)) and np.abs(a).max() <= 1.0
    assert not np.allclose(a, b)
    assert np.array_equal(a, augment(audio, cfg, np.random.default_rng(1)))
    fast = change_speed(audio, 1.1)
    assert abs(len(fast) - len(audio) / 1.1) < 16 and fast.dtype == np.float32
    assert len(augment(audio, AugmentConfig(p_speed=1.0), np.random.default_rng(0))) != len(audio)


def test_augmentation_noise_respects_snr() -> None:
    audio = _speech_like(2.0, 0)
    cfg = AugmentConfig(p_speed=0, p_reverb=0, p_noise=1, p_babble=0, p_gain=0, snr_db=(10, 10))
    noisy = augment(audio, cfg, np.random.default_rng(5))
    noise = noisy - audio
    snr = 10 * np.log10(np.mean(audio**2) / np.mean(noise**2))
    assert snr == pytest.approx(10.0, abs=0.5)


def test_the_light_preset_leaves_more_examples_clean_and_keeps_the_voice_perturbations() -> None:
    """A late stage for clean speech: fewer examples under noise or a room, none below 10 dB,
    and the same speed, warp, colour and masks that stand in for new voices."""
    audio = _speech_like(1.0, 0)

    def untouched(cfg: AugmentConfig) -> int:
        cfg = replace(cfg, p_speed=0.0, p_gain=0.0)  # only rooms and noise change the audio
        rng = np.random.default_rng(0)
        return sum(np.array_equal(augment(audio, cfg, rng), audio) for _ in range(200))

    full, light = AUGMENT_PRESETS["full"], AUGMENT_PRESETS["light"]
    assert untouched(light) > untouched(full) + 40
    assert light.snr_db[0] >= 10.0
    for name in ("p_speed", "p_warp", "p_colour", "freq_masks", "time_masks", "speed", "warp"):
        assert getattr(light, name) == getattr(full, name)


def _corpus(tmp_path: Path) -> list[Utterance]:
    utts = []
    for i, text in enumerate(["hello world", "a b", "it's me again"]):
        path = tmp_path / f"{i}.wav"
        sf.write(path, _speech_like(0.5 + 0.4 * i, i), 16000, subtype="PCM_16")
        utts.append(Utterance(path, text, 0.5 + 0.4 * i))
    return utts


def test_dataset_and_collate(tmp_path: Path) -> None:
    utts = _corpus(tmp_path)
    clean = SpeechDataset(utts, DataConfig(FeatureConfig()))
    ex = clean[2]
    assert ex.feats.dtype == torch.float32 and ex.feats.shape[1] == 161
    assert ex.labels.tolist() == encode("it's me again") and encode("a b") == [3, 1, 4]
    batch = collate([clean[i] for i in range(3)])
    assert batch.feats.shape == (3, int(batch.feat_lengths.max()), 161)
    assert batch.labels.tolist() == sum((encode(u.text) for u in utts), [])
    assert batch.label_lengths.tolist() == [11, 3, 13]
    assert torch.all(batch.feats[0, int(batch.feat_lengths[0]) :] == 0)


def test_dataset_augmentation_is_seeded_by_epoch(tmp_path: Path) -> None:
    utts = _corpus(tmp_path)
    noisy = AugmentConfig(p_speed=0.0, p_noise=1.0)
    ds = SpeechDataset(utts, DataConfig(FeatureConfig(), noisy, seed=7))
    first = ds[1].feats
    assert torch.equal(first, ds[1].feats)
    ds.set_epoch(1)
    assert not torch.equal(first, ds[1].feats)
    loader = torch.utils.data.DataLoader(
        ds, batch_sampler=[[0, 1], [2]], collate_fn=collate, num_workers=1
    )
    assert [b.indices.tolist() for b in loader] == [[0, 1], [2]]


def test_frequency_warp_moves_formants_and_keeps_the_band_edges() -> None:
    bins = np.arange(161, dtype=np.float32)
    spec = np.tile(-((bins - 40.0) ** 2) / 20.0, (3, 1)).astype(np.float32)  # a peak at bin 40
    assert np.allclose(warp_frequencies(spec, 1.0, LINEAR), spec, atol=1e-5)
    up, down = warp_frequencies(spec, 1.2, LINEAR), warp_frequencies(spec, 0.85, LINEAR)
    assert up.shape == spec.shape and up.dtype == np.float32
    assert int(np.argmax(up[0])) == 48 and int(np.argmax(down[0])) == 34
    for warped in (up, down):  # 0 Hz and Nyquist stay where they are
        assert warped[0, 0] == pytest.approx(spec[0, 0], abs=1e-3)
        assert warped[0, -1] == pytest.approx(spec[0, -1], abs=1e-3)


def test_spec_augment_masks_with_the_mean_and_leaves_the_input_alone() -> None:
    rng = np.random.default_rng(0)
    spec = rng.standard_normal((200, 161)).astype(np.float32) - 5
    kept = spec.copy()
    cfg = AugmentConfig(freq_masks=2, freq_mask_bins=20, time_masks=2, time_mask_frames=30)
    out = augment_features(spec, cfg, np.random.default_rng(4), LINEAR)
    assert np.array_equal(spec, kept) and out.shape == spec.shape
    changed = out != spec
    masked_frames = changed.all(axis=1).sum()
    masked_bins = changed.all(axis=0).sum()
    assert 0 < masked_frames <= 0.15 * 200 and 0 < masked_bins <= 40
    mean = spec.mean(axis=0)
    rows, cols = np.nonzero(changed)
    assert np.allclose(out[rows, cols], mean[cols])
    assert np.array_equal(out, augment_features(spec, cfg, np.random.default_rng(4), LINEAR))
    assert np.array_equal(
        augment_features(spec, AugmentConfig(), rng, LINEAR), spec
    )  # off by default


def test_colour_is_a_smooth_curve_of_the_asked_size() -> None:
    curves = np.stack([colour_curve(161, 4.0, np.random.default_rng(i)) for i in range(200)])
    assert curves.shape == (200, 161) and curves.dtype == np.float32
    db = curves * 10 / np.log(10.0)
    assert 4.0 < db.std() < 8.0  # four terms of 4 dB each: about 5.7 dB overall
    assert np.abs(np.diff(db, axis=1)).max() < 2.0  # smooth: under 2 dB between bins


class _BlasThreads(torch.utils.data.Dataset[int]):
    """Reports the widest BLAS pool that the process reading it sees."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> int:
        return max(
            (p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"), default=0
        )


def test_loader_workers_run_one_blas_thread_each() -> None:
    """Workers run one per core; each with a BLAS pool of every core thrashed a 16-core host."""
    with threadpool_limits(2, user_api="blas"):
        plain = next(iter(torch.utils.data.DataLoader(_BlasThreads(), num_workers=1)))
        if int(plain) < 2:
            pytest.skip("numpy's BLAS here cannot run two threads")
        loader = torch.utils.data.DataLoader(
            _BlasThreads(), num_workers=1, worker_init_fn=worker_init
        )
        assert int(next(iter(loader))) == 1


def test_coloured_noise_keeps_its_length_level_and_slope_at_awkward_lengths() -> None:
    rng = np.random.default_rng(0)

    def low_share(x: np.ndarray) -> float:  # power below a twentieth of the band
        p = np.abs(np.fft.rfft(x)) ** 2
        return float(p[: len(p) // 20].sum() / p.sum())

    for n in (16001, 48017):  # 48017 is prime
        white, brown = coloured_noise(n, 0.0, rng), coloured_noise(n, 2.0, rng)
        assert white.shape == brown.shape == (n,) and white.dtype == np.float32
        assert np.std(white) == pytest.approx(1.0, rel=0.05)
        assert 0.02 < low_share(white) < 0.09 and low_share(brown) > 0.8


def test_per_region_warp_moves_formants_apart_and_keeps_their_order() -> None:
    mel = FeatureConfig(n_mels=80)
    positions = bin_positions(mel)
    hz = np.asarray(positions) * 8000.0
    # identity knots are the identity
    same = piecewise_warp_matrix(positions, [0.0, 0.2, 1.0], [0.0, 0.2, 1.0])
    np.testing.assert_allclose(same, np.eye(80), atol=1e-6)
    # F1 near 500 Hz moves down by 0.9 while F2 near 1500 Hz moves up by 1.1: one factor
    # could not do both
    f1, f2 = int(np.argmin(abs(hz - 500))), int(np.argmin(abs(hz - 1500)))
    bins = np.arange(80)
    spec = (np.exp(-((bins - f1) ** 2) / 4.0) + np.exp(-((bins - f2) ** 2) / 4.0))[None]
    low = hz < 1000  # F1's side and F2's side of the spectrum

    def peaks(warped: np.ndarray) -> tuple[float, float]:
        row = warped[0]
        return hz[np.argmax(np.where(low, row, -1))], hz[np.argmax(np.where(low, -1, row))]

    src = [0.0, hz[f1] / 8000, hz[f2] / 8000, 1.0]
    dst = [0.0, hz[f1] * 0.9 / 8000, hz[f2] * 1.1 / 8000, 1.0]
    p1, p2 = peaks(spec @ piecewise_warp_matrix(positions, src, dst))
    assert abs(p1 - hz[f1] * 0.9) < 30 and abs(p2 - hz[f2] * 1.1) < 60
    # random per-region warps move each formant by at most about the range, in order
    moved = set()
    for seed in range(20):
        warped = spec @ formant_matrix((0.85, 1.18), np.random.default_rng(seed), mel)
        p1, p2 = peaks(warped)
        assert 0.8 * hz[f1] < p1 < 1.25 * hz[f1] and 0.8 * hz[f2] < p2 < 1.25 * hz[f2]
        moved.add((round(p1 / hz[f1], 2), round(p2 / hz[f2], 2)))
    assert len({a - b for a, b in moved}) > 5  # the two move by different factors


def test_formant_preset_warps_half_the_utterances_and_rejects_bad_ranges() -> None:
    preset = AUGMENT_PRESETS["formant"]
    assert preset.p_formant == 0.5 and "per-region warp" in preset.describe()
    with pytest.raises(ValueError, match="formant"):
        AugmentConfig(p_formant=1.5)
    with pytest.raises(ValueError, match="formant_warp"):
        AugmentConfig(formant_warp=(1.2, 0.9))


# -- band effects: wideband audio made to sound like band-limited recordings and phones ----------

BAND_OFF = AugmentConfig(p_speed=0.0, p_reverb=0.0, p_noise=0.0, p_gain=0.0)


def _power(x: np.ndarray, rate: int = 16000) -> tuple[np.ndarray, np.ndarray]:
    return np.fft.rfftfreq(len(x), 1 / rate), np.abs(np.fft.rfft(x.astype(np.float64))) ** 2


def _band_share(out: np.ndarray, ref: np.ndarray, low: float, high: float) -> float:
    """`out`'s energy between low and high Hz as a share of `ref`'s there."""
    freqs, p_out = _power(out)
    _, p_ref = _power(ref)
    band = (freqs >= low) & (freqs < high)
    return float(p_out[band].sum() / p_ref[band].sum())


def _white(n: int, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(n)).astype(np.float32)


@pytest.mark.parametrize("cutoff", [3400.0, 5512.5, 7000.0])
def test_lowpass_removes_the_band_above_its_cut_off_and_keeps_the_rest(cutoff: float) -> None:
    noise = _white(16001)
    out = lowpass(noise, cutoff)
    assert out.dtype == np.float32 and out.shape == noise.shape
    assert _band_share(out, noise, 1.1 * cutoff, 8000.0) < 0.01
    assert _band_share(out, noise, 50.0, 0.9 * cutoff) == pytest.approx(1.0, abs=0.05)


def test_the_telephone_channel_passes_300_to_3400_hz_only() -> None:
    noise = _white(16001)
    out = telephone(noise)
    assert out.dtype == np.float32 and out.shape == noise.shape
    assert _band_share(out, noise, 0.0, 250.0) < 0.01
    assert _band_share(out, noise, 3600.0, 8000.0) < 0.01
    assert _band_share(out, noise, 400.0, 3300.0) == pytest.approx(1.0, abs=0.05)
    t = np.arange(12345) / 16000
    tone = (0.5 * np.sin(2 * np.pi * 1000 * t)).astype(np.float32)
    heard = telephone(tone)
    assert heard.shape == tone.shape and heard.dtype == np.float32
    inner = slice(800, -800)  # the resampler's edges aside
    assert np.corrcoef(heard[inner], tone[inner])[0, 1] > 0.999
    assert np.std(heard[inner]) == pytest.approx(np.std(tone[inner]), rel=0.05)


def test_8bit_samples_take_at_most_256_levels_and_stay_near_the_input() -> None:
    audio = 0.3 * _speech_like(1.0, 3)  # quiet: the peak goes to full scale before rounding
    out = quantise_8bit(audio)
    assert out.dtype == np.float32 and out.shape == audio.shape
    peak = float(np.abs(audio).max())
    steps = out.astype(np.float64) * 128 / peak
    assert len(np.unique(out)) <= 256 and np.allclose(steps, np.round(steps), atol=1e-3)
    assert np.abs(out - audio).max() <= peak / 128 + 1e-6
    assert len(np.unique(out)) > 100  # the whole 8-bit range is in use, not the quiet part
    assert np.array_equal(quantise_8bit(np.zeros(5, np.float32)), np.zeros(5, np.float32))


def test_band_effects_keep_length_and_dtype_and_follow_the_seed() -> None:
    audio = _speech_like(0.7, 1)[:11111]
    cfg = replace(BAND_OFF, p_lowpass=1.0, p_telephone=0.5, p_8bit=0.5)
    outs = [augment(audio, cfg, np.random.default_rng(seed)) for seed in range(4)]
    for out in outs:
        assert out.dtype == np.float32 and out.shape == audio.shape
        assert np.all(np.isfinite(out)) and np.abs(out).max() <= 1.0
    assert np.array_equal(outs[0], augment(audio, cfg, np.random.default_rng(0)))
    assert not np.array_equal(outs[0], outs[1])
    for short in (np.zeros(0, np.float32), audio[:3]):
        assert lowpass(short, 4000.0).shape == telephone(short).shape == short.shape


def test_band_effects_off_leave_the_audio_and_the_generator_alone() -> None:
    """At probability 0 nothing is drawn: an earlier recipe's examples stay bit-exact."""
    audio = _speech_like(0.5, 2)
    rng = np.random.default_rng(9)
    assert np.array_equal(augment(audio, BAND_OFF, rng), audio)
    fresh = np.random.default_rng(9)
    fresh.random(4)  # speed, reverberation, noise and gain draw one number each
    assert rng.random() == fresh.random()
    full = AUGMENT_PRESETS["full"]
    assert full.p_lowpass == full.p_telephone == full.p_8bit == 0.0
    assert "low-pass" not in full.describe()
    on = replace(full, p_lowpass=0.3, p_telephone=0.1, p_8bit=0.05).describe()
    assert "low-pass 3400-7000 Hz (p 0.3)" in on and "telephone" in on and "8-bit (p 0.05)" in on


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"p_lowpass": 1.5}, "p_lowpass"),
        ({"p_telephone": -0.1}, "p_telephone"),
        ({"p_8bit": 2.0}, "p_8bit"),
        ({"lowpass_hz": (7000.0, 3400.0)}, "lowpass_hz"),
        ({"lowpass_hz": (3400.0, 9000.0)}, "lowpass_hz"),
        ({"lowpass_hz": (0.0, 3400.0)}, "lowpass_hz"),
    ],
)
def test_bad_band_settings_are_refused(fields: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=f"AugmentConfig.{name}"):
        AugmentConfig(**fields)  # type: ignore[arg-type]


def test_the_trainer_takes_band_effects_from_its_flags() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        ["--train", "t.jsonl", "--out", "o", "--p-lowpass", "0.3", "--p-telephone", "0.1"]
    )
    assert (args.p_lowpass, args.p_telephone, args.p_8bit) == (0.3, 0.1, 0.0)
    cfg = TrainConfig(augment_preset="light", p_lowpass=0.3, p_8bit=0.05)
    aug = cfg.augmentation()
    assert aug == replace(AUGMENT_PRESETS["light"], p_lowpass=0.3, p_8bit=0.05)
    assert TrainConfig().augmentation() == AUGMENT_PRESETS["full"]
    assert TrainConfig(augment=False).augmentation() is None
    with pytest.raises(ValueError, match="p_telephone must be a probability"):
        TrainConfig(p_telephone=1.2)
    with pytest.raises(ValueError, match="need augment on"):
        TrainConfig(augment=False, p_8bit=0.1)
