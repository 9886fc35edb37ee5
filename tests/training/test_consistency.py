"""Two views of each utterance (CR-CTC): each example can carry a second, independently
augmented view of the same audio with the same frames; a batch stacks the second views after
the first; the loss pulls each view towards its twin and is zero between equal views; a run
with it learns, hears the two views of an utterance more alike than a run without it, records
it in the bundle, and a setting that cannot work is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import harken_cli
from models.bundle import load_bundle
from tests.training.test_train import MODEL, Recording, make_corpus, train_config
from training.augment import AUGMENT_PRESETS
from training.batching import BatchConfig
from training.consistency import consistency_losses
from training.data import Batch, DataConfig, SpeechDataset, collate
from training.train import export


def views_of(tmp_path: Path, n: int = 3, views: int = 2) -> SpeechDataset:
    cfg = DataConfig(MODEL.features, AUGMENT_PRESETS["light"], seed=3, views=views)
    return SpeechDataset(make_corpus(tmp_path, n), cfg)


def test_the_second_view_has_the_same_frames_and_its_own_perturbations(tmp_path: Path) -> None:
    two = views_of(tmp_path)
    one = views_of(tmp_path, views=1)
    for i in range(len(two)):
        e = two[i]
        assert e.twin is not None and e.twin.shape == e.feats.shape
        assert not torch.equal(e.twin, e.feats)  # drawn apart: another warp, other masks
        assert torch.equal(e.feats, one[i].feats)  # the first view is what one view would be
        again = two[i].twin
        assert again is not None and torch.equal(again, e.twin)  # seeded: reruns see the same
        assert one[i].twin is None


def test_a_batch_stacks_the_second_views_after_the_first(tmp_path: Path) -> None:
    ds = views_of(tmp_path)
    examples = [ds[i] for i in range(3)]
    batch = collate(examples)
    assert batch.views == 2 and batch.feats.shape[0] == 6
    assert batch.indices.tolist() == [0, 1, 2, 0, 1, 2]
    assert batch.label_lengths.tolist() == [*batch.label_lengths[:3].tolist()] * 2
    for i, e in enumerate(examples):
        n = e.feats.shape[0]
        assert torch.equal(batch.feats[i, :n], e.feats)
        assert e.twin is not None and torch.equal(batch.feats[3 + i, :n], e.twin)
    with pytest.raises(ValueError, match="every example of a batch has a second view"):
        collate([examples[0], examples[1]._replace(twin=None)])


def test_the_loss_pulls_each_view_towards_its_twin_and_is_zero_between_equal_views() -> None:
    torch.manual_seed(0)
    first = torch.randn(2, 5, 4).log_softmax(-1)
    second = torch.randn(2, 5, 4).log_softmax(-1)
    lengths = torch.tensor([5, 3, 5, 3])
    same = consistency_losses(torch.cat([first, first]), lengths)
    assert torch.allclose(same, torch.zeros(4), atol=1e-6)
    got = consistency_losses(torch.cat([first, second]), lengths)

    def kl(p: torch.Tensor, q: torch.Tensor, n: int) -> torch.Tensor:  # KL(q || p), n frames
        return (q[:n].exp() * (q[:n] - p[:n])).sum()

    want = [kl(first[0], second[0], 5), kl(first[1], second[1], 3),
            kl(second[0], first[0], 5), kl(second[1], first[1], 3)]  # fmt: skip
    assert torch.allclose(got, torch.stack(want), atol=1e-5)
    # each row's gradient comes from its own term only: the twin is held fixed
    rows = torch.cat([first, second]).requires_grad_(True)
    consistency_losses(rows, lengths)[0].backward()
    assert rows.grad is not None
    assert rows.grad[0].abs().sum() > 0 and rows.grad[1:].abs().sum() == 0
    with pytest.raises(ValueError, match="same number of frames"):
        consistency_losses(torch.cat([first, second]), torch.tensor([5, 3, 4, 3]))


class Viewed(Recording):
    """Recording's losses plus the consistency term of every step."""

    def train_step(self, batch: Batch) -> float:
        loss = super().train_step(batch)
        self.kls = [*getattr(self, "kls", []), self.consistency_loss]
        return loss


def _views_kl(trainer: Recording, ds: SpeechDataset) -> float:
    """How differently the trained network hears the two views of these utterances."""
    batch = collate([ds[i] for i in range(len(ds))])
    model = trainer.final_model.eval()
    with torch.no_grad():
        log_probs, out_lens = model(batch.feats, batch.feat_lengths)[:2]
    return float(consistency_losses(log_probs, out_lens).mean())


def test_a_run_with_it_learns_and_hears_the_views_more_alike(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 4)
    trained = {}
    for weight in (0.0, 2.0):
        cfg = train_config(
            epochs=100, max_steps=16, augment_preset="light", consistency_weight=weight
        )
        trainer = Viewed(MODEL, cfg, BatchConfig(batch_size=4), utts, [], tmp_path / f"r{weight}")
        trainer.fit()
        trained[weight] = trainer
    t = trained[2.0]
    assert t.losses[-1] < t.losses[0]  # CTC still learns
    assert all(k >= 0 for k in t.kls) and t.kls[-1] > 0
    assert trained[0.0].kls == [0.0] * 16  # without the weight there is no second view
    ds = views_of(tmp_path, 4)
    assert _views_kl(t, ds) < _views_kl(trained[0.0], ds)
    bundle = load_bundle(export(t, tmp_path / "bundle", "train.jsonl"))
    assert "weight 2 between the two views" in str(bundle.provenance["consistency"])


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--consistency-weight", "0.2", "--augment", "false"],
         "consistency_weight needs augmentation"),
        (["--consistency-weight", "-1"], "consistency_weight must be >= 0"),
    ],
)  # fmt: skip
def test_consistency_that_cannot_work_is_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], reason: str
) -> None:
    make_corpus(tmp_path, 2)
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "r"),
            *flags]  # fmt: skip
    assert harken_cli.main(argv) == 2
    assert reason in capsys.readouterr().err
