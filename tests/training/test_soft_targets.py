"""Soft targets from a bundle: the KL term is zero only where the student says what the
teacher says and reads only real frames, a run with an ensemble teacher moves the student
towards the teacher's mix and exports the plain model, and a teacher whose frames cannot line
up with the student's is refused with the reason."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import harken_cli
from models.bundle import load_bundle
from models.ds2 import DS2
from models.ensemble import add_member, load_networks
from models.manifest import Utterance
from tests.conftest import random_bundle
from tests.training.test_train import MODEL, Recording, make_corpus, train_config
from training.batching import BatchConfig
from training.data import Batch, DataConfig, SpeechDataset, collate
from training.soft_targets import SoftTeacher, soft_losses
from training.train import export


def _bundle(root: Path, name: str, seed: int, **changes: Any) -> Path:
    return random_bundle(root / name, dataclasses.replace(MODEL, **changes), seed)


def _ensemble(root: Path) -> Path:
    own = _bundle(root, "teacher", 1, rnn_hidden=24)
    add_member(own, _bundle(root, "member", 2, rnn_hidden=20), 0.4, "wide")
    return own


def _log_probs(rows: list[list[float]]) -> torch.Tensor:
    return torch.log_softmax(torch.tensor(rows), dim=-1)


def test_the_term_is_zero_only_where_the_student_agrees_and_reads_real_frames() -> None:
    torch.manual_seed(0)
    teacher = torch.log_softmax(torch.randn(2, 5, 4), dim=-1)
    lengths = torch.tensor([5, 3])
    assert torch.allclose(soft_losses(teacher, teacher, lengths), torch.zeros(2), atol=1e-6)
    student = teacher.clone()
    student[1, 3:] = _log_probs([[9.0, 0.0, 0.0, 0.0]] * 2)  # past utterance 1's end
    assert torch.allclose(soft_losses(student, teacher, lengths), torch.zeros(2), atol=1e-6)
    student[0, 2] = _log_probs([[9.0, 0.0, 0.0, 0.0]])[0]
    kl = soft_losses(student, teacher, lengths)
    q, s = teacher[0, 2], student[0, 2]
    assert float(kl[0]) == pytest.approx(float((q.exp() * (q - s)).sum()), rel=1e-5)
    assert float(kl[0]) > 0 and float(kl[1]) == pytest.approx(0.0, abs=1e-6)


def test_the_teacher_hears_its_whole_ensemble(tmp_path: Path) -> None:
    bundle = _ensemble(tmp_path)
    teacher = SoftTeacher(bundle, MODEL)
    x = torch.randn(2, 61, MODEL.features.n_bins) * 3 - 8
    lengths = torch.tensor([61, 40])
    mixed, n = teacher(x, lengths)
    nets = load_networks(bundle)
    with torch.no_grad():
        (a, _), (b, _) = (m(x, lengths) for m in nets.models)
    expected = torch.log(0.6 * a.exp() + 0.4 * b.exp())
    for i, t in enumerate(n.tolist()):
        np.testing.assert_allclose(mixed[i, :t], expected[i, :t], atol=1e-5)


class Softened(Recording):
    def train_step(self, batch: Batch) -> float:
        loss = super().train_step(batch)
        self.kl = [*getattr(self, "kl", []), self.soft_loss]
        return loss


def _student_kl(student: DS2, teacher: SoftTeacher, utts: list[Utterance]) -> float:
    """Mean per-utterance KL of an exported student to the teacher on the training audio."""
    data = SpeechDataset(utts, DataConfig(MODEL.features, None, 0, None, MODEL.time_stride))
    batch = collate([data[i] for i in range(len(utts))])
    with torch.no_grad():
        lp, n = student(batch.feats, batch.feat_lengths)
        q, _ = teacher(batch.feats, batch.feat_lengths)
    return float(soft_losses(lp, q, n).mean())


def test_a_run_moves_the_student_towards_the_teacher_and_exports_the_plain_model(
    tmp_path: Path,
) -> None:
    utts = make_corpus(tmp_path, 4)
    teacher_dir = _ensemble(tmp_path)
    runs = {}
    for weight in (0.0, 10.0):
        extra = {"soft_teacher": str(teacher_dir), "soft_weight": weight} if weight else {}
        cfg = train_config(epochs=100, max_steps=12, augment=False, **extra)
        out = tmp_path / f"run{weight:g}"
        trainer = Softened(MODEL, cfg, BatchConfig(batch_size=4), utts, [], out)
        trainer.fit()
        runs[weight] = load_bundle(export(trainer, out / "bundle", "train.jsonl"))
        if weight:
            assert len(trainer.kl) == 12 and all(np.isfinite(trainer.kl))
            assert trainer.losses[-1] < trainer.losses[0]  # CTC still learns beside it
    teacher = SoftTeacher(teacher_dir, MODEL)
    kl = {w: _student_kl(runs[w], teacher, utts) for w in runs}
    assert kl[10.0] < 0.6 * kl[0.0], kl  # the same run without the term, side by side
    student = runs[10.0]
    assert set(student.state_dict()) == set(DS2(MODEL, folded=True).state_dict())
    assert "KL weight 10" in str(student.provenance["soft_targets"])
    assert "shares 0.60, 0.40" in str(student.provenance["soft_targets"])
    assert "soft_targets" not in runs[0.0].provenance


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--soft-weight", "0.5"], "soft_teacher and soft_weight go together"),
        (["--soft-teacher", "somewhere"], "soft_teacher and soft_weight go together"),
        (["--soft-teacher", "nowhere", "--soft-weight", "1"], "--soft-teacher nowhere"),
        (["--soft-teacher", "{stride3}", "--soft-weight", "1"], "time stride (3)"),
    ],
)
def test_bad_soft_teacher_flags_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], reason: str
) -> None:
    make_corpus(tmp_path, 2)
    stride3 = _bundle(tmp_path, "stride3", 0, time_stride=3, conv_time_kernel=5)
    flags = [f.format(stride3=stride3) for f in flags]
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "r")]
    assert harken_cli.main([*argv, *flags]) == 2
    assert reason in capsys.readouterr().err
    assert not (tmp_path / "r" / "checkpoint.pt").exists()
