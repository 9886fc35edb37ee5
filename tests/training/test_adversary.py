"""Speaker-adversarial training: the network gets the voice classifier's gradient reversed and
scaled, the loss reads only frames inside each utterance, an adversarial run (on the row-conv
output or a lower layer) learns and exports the plain model, its checkpoint refuses a resume
without the adversary, and adversaries that cannot work are refused with the reason."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
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
from training.adversary import VoiceAdversary, voice_ids, voice_losses
from training.batching import BatchConfig
from training.data import Batch
from training.train import export


def test_the_network_gets_the_classifier_gradient_reversed_and_scaled() -> None:
    torch.manual_seed(0)
    adversary = VoiceAdversary(8, ["a", "b", "c"], scale=0.25)
    hidden = torch.randn(2, 5, 8, requires_grad=True)
    voices, lengths = torch.tensor([0, 2]), torch.tensor([5, 3])
    voice_losses(adversary(hidden), voices, lengths)[0].sum().backward()
    reversed_grad = hidden.grad.clone()
    classifier_grad = [p.grad.clone() for p in adversary.parameters()]
    plain = hidden.detach().clone().requires_grad_(True)  # the same state, no reversal
    adversary.zero_grad()
    voice_losses(adversary.net(plain), voices, lengths)[0].sum().backward()
    assert torch.allclose(reversed_grad, plain.grad * -0.25, atol=1e-6)
    for before, p in zip(classifier_grad, adversary.parameters(), strict=True):
        assert torch.allclose(before, p.grad)  # the classifier learns as usual


def test_the_loss_reads_only_frames_inside_each_utterance() -> None:
    logits = torch.zeros(2, 4, 3)
    logits[0, :, 1] = 10.0  # utterance 0 (voice 1) named right on every frame
    logits[1, :2, 0] = 10.0  # utterance 1 (voice 0) right on its two real frames,
    logits[1, 2:, 2] = 10.0  # wrong past its length, where nothing counts
    ce, named = voice_losses(logits, torch.tensor([1, 0]), torch.tensor([4, 2]))
    assert torch.allclose(ce, torch.zeros(2), atol=1e-3)
    assert named == 1.0
    ce_short, _ = voice_losses(torch.zeros(1, 4, 3), torch.tensor([0]), torch.tensor([3]))
    assert torch.allclose(ce_short, torch.tensor([3 * np.log(3.0)], dtype=torch.float32))


def two_voices(utts: list[Utterance]) -> list[Utterance]:
    return [dataclasses.replace(u, voice="ab"[i % 2]) for i, u in enumerate(utts)]


class Adversarial(Recording):
    """Also records each step's voice cross-entropy."""

    def train_step(self, batch: Batch) -> float:
        loss = super().train_step(batch)
        self.voice_ce = [*getattr(self, "voice_ce", []), self.adversary_loss]
        return loss


@pytest.mark.parametrize(("layer", "where"), [(-1, "row-conv output"), (0, "recurrent layer 0")])
def test_an_adversarial_run_learns_and_exports_the_plain_model(
    tmp_path: Path, layer: int, where: str
) -> None:
    utts = two_voices(make_corpus(tmp_path, 4))
    cfg = train_config(
        epochs=100, max_steps=12, augment=False, adversary_scale=0.1, adversary_layer=layer
    )
    trainer = Adversarial(MODEL, cfg, BatchConfig(batch_size=4), utts, [], tmp_path / "run")
    trainer.fit()
    assert trainer.losses[-1] < trainer.losses[0]  # CTC learns beside the adversary
    assert all(np.isfinite(trainer.voice_ce)) and trainer.voice_ce[0] > 0
    bundle = load_bundle(export(trainer, tmp_path / "bundle", "train.jsonl"))
    assert set(bundle.state_dict()) == set(DS2(MODEL, folded=True).state_dict())
    assert "2 voices" in str(bundle.provenance["voice_adversary"])
    assert where in str(bundle.provenance["voice_adversary"])
    assert_the_checkpoint_keeps_its_head(
        Adversarial, cfg, utts, tmp_path / "run", "with a voice adversary"
    )


def test_voices_are_indexed_by_name() -> None:
    utts = [Utterance(Path(f"{i}.wav"), "a", 1.0, v) for i, v in enumerate(["y", "x", "y"])]
    assert voice_ids(utts) == ([1, 0, 1], ["x", "y"])


@pytest.mark.parametrize(
    ("voices", "flags", "reason"),
    [
        (["tones", "tones"], [], "at least two voices"),
        (["a", None], [], "needs every utterance's"),
        (["a", "b"], ["--adversary-layer", "7"], "adversary_layer must be -1"),
    ],
)
def test_adversaries_that_cannot_work_are_refused_with_the_reason(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    voices: list[str | None],
    flags: list[str],
    reason: str,
) -> None:
    utts = make_corpus(tmp_path, 2)
    write_manifest(
        tmp_path / "train.jsonl",
        [dataclasses.replace(u, voice=v) for u, v in zip(utts, voices, strict=True)],
    )
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "r"),
            "--adversary-scale", "0.5", *flags]  # fmt: skip
    assert harken_cli.main(argv) == 2
    assert reason in capsys.readouterr().err
