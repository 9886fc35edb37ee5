"""The phone head: a pronouncing dictionary read as CMUdict writes it (stress dropped, later
pronunciations and comments skipped, a phone outside ARPAbet refused with its line), an
utterance with an unknown word adds no phone loss, a run with the head learns its phones and
exports the plain model, its checkpoint refuses a resume without the head, and a head that
cannot work is refused with the reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import harken_cli
from models.bundle import load_bundle
from models.ds2 import DS2
from tests.training.test_train import (
    MODEL,
    Recording,
    assert_the_checkpoint_keeps_its_head,
    make_corpus,
    train_config,
)
from training.batching import BatchConfig
from training.data import Batch
from training.heads import WithHeads
from training.phones import PHONES, PhoneHead, phone_losses, phone_targets, read_lexicon
from training.train import export

LEXICON = """;;; a comment line
hello HH AH0 L OW1
hello(2) HH EH0 L OW1
go G OW1
on AA1 N
a AH0
bad B AE1 D
cab K AE1 B
no N OW1
hi HH AY1
there DH EH1 R  # a trailing comment
ok OW2 K EY1
see S IY1
me M IY1
"""


def ids(*phones: str) -> tuple[int, ...]:
    return tuple(PHONES.index(p) + 1 for p in phones)


def lexicon_file(tmp_path: Path, text: str = LEXICON) -> Path:
    path = tmp_path / "words.dict"
    path.write_text(text)
    return path


def test_the_lexicon_reads_cmudict_first_pronunciations_without_stress(tmp_path: Path) -> None:
    lex = read_lexicon(lexicon_file(tmp_path))
    assert lex["hello"] == ids("HH", "AH", "L", "OW")  # the first, not hello(2)
    assert lex["there"] == ids("DH", "EH", "R")
    assert "hello(2)" not in lex and ";;;" not in lex and len(lex) == 12


@pytest.mark.parametrize(
    ("text", "reason"),
    [("go G OW1\nbad B AE1 DX\n", "words.dict:2: 'bad' has phone 'DX'"), (";;; none\n", "no pro")],
)
def test_a_lexicon_that_would_teach_wrong_targets_is_refused(
    tmp_path: Path, text: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        read_lexicon(lexicon_file(tmp_path, text))


def test_an_utterance_with_an_unknown_word_has_no_phones(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 4)  # abc, hello, go on, a bad cab
    targets = phone_targets(utts, read_lexicon(lexicon_file(tmp_path)))
    assert targets[0] is None  # "abc" is in no dictionary
    assert targets[2] == ids("G", "OW", "AA", "N")
    assert targets[3] == ids("AH", "B", "AE", "D", "K", "AE", "B")


def test_the_loss_is_ctc_on_the_utterances_with_phones_and_nothing_on_the_rest() -> None:
    torch.manual_seed(0)
    head = PhoneHead(8)
    hidden = torch.randn(2, 6, 8, requires_grad=True)
    lengths = torch.tensor([6, 4])
    log_probs = head(hidden)
    losses, have = phone_losses(log_probs, [None, ids("G", "OW")], lengths)
    assert have == 1 and losses[0] == 0
    direct = F.ctc_loss(
        log_probs[1:, :4].transpose(0, 1), torch.tensor([ids("G", "OW")]), lengths[1:],
        torch.tensor([2]), blank=0, reduction="none",
    )  # fmt: skip
    assert torch.allclose(losses[1], direct[0])
    losses.sum().backward()
    assert hidden.grad is not None
    assert torch.all(hidden.grad[0] == 0) and hidden.grad[1].abs().sum() > 0
    none, count = phone_losses(log_probs, [None, None], lengths)
    assert count == 0 and torch.all(none == 0)


def test_while_probed_the_head_learns_and_the_network_gets_none_of_its_gradient() -> None:
    torch.manual_seed(0)
    model = DS2(MODEL)
    heads = WithHeads(model, None, None, phones=PhoneHead(MODEL.rnn_hidden), phone_layer=0)
    feats, lengths = torch.randn(2, 40, MODEL.features.n_bins), torch.tensor([40, 30])
    grads = {}
    for reach in (False, True):
        heads.zero_grad()
        heads.phones_reach_network = reach
        out = heads(feats, lengths)
        assert out.phones is not None
        phone_losses(out.phones, [ids("G", "OW"), ids("N", "OW")], out.out_lengths)[
            0
        ].sum().backward()
        grads[reach] = sum(
            float(p.grad.abs().sum()) for p in model.parameters() if p.grad is not None
        )
        assert heads.phones is not None and heads.phones.out.weight.grad is not None
    assert grads[False] == 0 and grads[True] > 0


class Phoned(Recording):
    """Also records each step's phone CTC loss."""

    def train_step(self, batch: Batch) -> float:
        loss = super().train_step(batch)
        self.phone_ctc = [*getattr(self, "phone_ctc", []), self.phone_loss]
        return loss


def test_a_run_with_the_phone_head_learns_and_exports_the_plain_model(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 4)
    lex = str(lexicon_file(tmp_path))
    cfg = train_config(
        epochs=100, max_steps=12, augment=False, phone_lexicon=lex, phone_weight=0.5,
        phone_layer=0, phone_probe_steps=4,
    )  # fmt: skip
    trainer = Phoned(MODEL, cfg, BatchConfig(batch_size=4), utts, [], tmp_path / "run")
    trainer.fit()
    assert trainer.losses[-1] < trainer.losses[0]  # CTC learns beside the phone head
    assert all(np.isfinite(trainer.phone_ctc))
    assert trainer.phone_ctc[-1] < trainer.phone_ctc[0]  # and so does the head
    bundle = load_bundle(export(trainer, tmp_path / "bundle", "train.jsonl"))
    assert set(bundle.state_dict()) == set(DS2(MODEL, folded=True).state_dict())
    described = str(bundle.provenance["phone_targets"])
    assert "recurrent layer 0" in described and "for 3 of 4 training utterances" in described
    assert_the_checkpoint_keeps_its_head(Phoned, cfg, utts, tmp_path / "run", "with a phone head")


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--phone-weight", "0.5"], "phone_lexicon and phone_weight go together"),
        (["--phone-lexicon", "LEX", "--phone-weight", "0.5", "--phone-layer", "9"],
         "phone_layer must be -1"),
        (["--phone-lexicon", "ONLYGO", "--phone-weight", "0.5"], "none of the training"),
        (["--phone-lexicon", "MISSING", "--phone-weight", "0.5"], "phone_lexicon: "),
    ],
)  # fmt: skip
def test_phone_heads_that_cannot_work_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], reason: str
) -> None:
    make_corpus(tmp_path, 2)  # abc, hello
    only = tmp_path / "only"
    only.mkdir()
    paths = {
        "LEX": str(lexicon_file(tmp_path)),
        "ONLYGO": str(lexicon_file(only, "go G OW1\n")),
        "MISSING": str(tmp_path / "absent.dict"),
    }
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--out", str(tmp_path / "r"),
            *[paths.get(f, f) for f in flags]]  # fmt: skip
    assert harken_cli.main(argv) == 2
    assert reason in capsys.readouterr().err
