"""`harken punctuation`: train the punctuation and capitals model, and measure it.

    harken punctuation --text data/punct --out runs/punct

Reads the written English that `harken punctuation-text` gathered (labelled by
training/punctuation_data.py), trains the network that
`models/punctuation.py` runs (the same shapes in torch: embeddings, a GRU, a classifier over
a word's state and its lookahead's), exports it, and writes per-mark precision, recall and
F1 and case accuracy on the held-out texts (Brown's held-out fifth, one fortune in twenty)
to `report.json` / `report.md` beside it. `--eval-only DIR` measures a model already made.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from models.punctuation import (
    CASES,
    END,
    MARKS,
    PAD,
    SPECIALS,
    UNK,
    PunctuationConfig,
    Punctuator,
    suffix_bucket,
    write_all,
)
from training.punctuation_data import Document, Labelled, TextStats, mixed_forms, read_documents

IGNORE = -100


@dataclass(frozen=True)
class TrainSettings:
    """How the network is trained (the network's sizes are a PunctuationConfig)."""

    vocab_size: int = 24000  # most frequent training words kept; the rest read as <unk>
    max_words: int = 60  # a training sequence: whole sentences up to this many words
    batch: int = 32
    lr: float = 2e-3
    epochs: int = 6
    time_budget_s: float = 1800.0
    unk_rate: float = 0.03  # words read as <unk>: unknown names must not read as noise
    seed: int = 0


class Net(nn.Module):
    """models/punctuation.py's network in torch, for training."""

    def __init__(self, c: PunctuationConfig) -> None:
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.dim, padding_idx=PAD)
        self.suffix = nn.Embedding(c.suffix_buckets, c.dim)
        self.gru = nn.GRU(c.dim, c.hidden, batch_first=True)
        self.ffn = nn.Linear(c.hidden * (c.lookahead + 1), c.ffn)
        self.out = nn.Linear(c.ffn, len(MARKS) + len(CASES))

    def forward(self, ids: torch.Tensor, suffixes: torch.Tensor) -> torch.Tensor:
        """ids, suffixes [B, T + lookahead] -> logits [B, T, marks + cases]."""
        h, _ = self.gru(self.embed(ids) + self.suffix(suffixes))
        k, t = self.c.lookahead, ids.shape[1] - self.c.lookahead
        windows = torch.cat([h[:, j : j + t] for j in range(k + 1)], dim=2)
        logits: torch.Tensor = self.out(torch.relu(self.ffn(windows)))
        return logits

    def export(self, vocab: Sequence[str], mixed: dict[str, str]) -> Punctuator:
        sd = {k: v.detach().float().numpy() for k, v in self.state_dict().items()}
        weights = {
            "embed": sd["embed.weight"],
            "suffix": sd["suffix.weight"],
            "gru.w_ih": sd["gru.weight_ih_l0"],
            "gru.w_hh": sd["gru.weight_hh_l0"],
            "gru.b_ih": sd["gru.bias_ih_l0"],
            "gru.b_hh": sd["gru.bias_hh_l0"],
            "ffn.w": sd["ffn.weight"],
            "ffn.b": sd["ffn.bias"],
            "out.w": sd["out.weight"],
            "out.b": sd["out.bias"],
        }
        return Punctuator(self.c, vocab, weights, mixed)


# -- data ------------------------------------------------------------------------------------


def chunks(doc: Document, max_words: int, rng: random.Random | None) -> list[list[Labelled]]:
    """A document as transcripts of whole sentences: 1-5 at a time (random with `rng`, else
    up to `max_words`), as a recogniser's segments would hold them."""
    out: list[list[Labelled]] = []
    current: list[Labelled] = []
    want = rng.randint(1, 5) if rng else 99
    for sentence in doc.sentences:
        if current and (len(current) + len(sentence) > max_words or want <= 0):
            out.append(current)
            current, want = [], rng.randint(1, 5) if rng else 99
        current = current + sentence[: max_words * 2]
        want -= 1
    if current:
        out.append(current)
    return out


def build_vocab(docs: Sequence[Document], size: int) -> list[str]:
    counts = Counter(w.word for d in docs for s in d.sentences for w in s)
    kept = [w for w, n in counts.most_common(size - len(SPECIALS)) if n >= 2]
    return [*SPECIALS, *kept]


def _batch(
    seqs: Sequence[list[Labelled]],
    ids: dict[str, int],
    c: PunctuationConfig,
    unk: float,
    rng: random.Random,
) -> tuple[torch.Tensor, ...]:
    t = max(len(s) for s in seqs)
    width = t + c.lookahead
    word_ids = np.full((len(seqs), width), PAD, np.int64)
    suffixes = np.zeros((len(seqs), width), np.int64)
    marks = np.full((len(seqs), t), IGNORE, np.int64)
    cases = np.full((len(seqs), t), IGNORE, np.int64)
    end_bucket = suffix_bucket("", c.suffix_buckets)
    for b, seq in enumerate(seqs):
        for i, w in enumerate(seq):
            word_ids[b, i] = UNK if rng.random() < unk else ids.get(w.word, UNK)
            suffixes[b, i] = suffix_bucket(w.word, c.suffix_buckets)
            marks[b, i], cases[b, i] = w.mark, w.case
        n = len(seq)
        word_ids[b, n : n + c.lookahead] = END
        suffixes[b, n : n + c.lookahead] = end_bucket
    return tuple(torch.from_numpy(a) for a in (word_ids, suffixes, marks, cases))


def train(
    train_docs: Sequence[Document],
    mixed: dict[str, str],
    c: PunctuationConfig,
    s: TrainSettings,
    log: Path | None = None,
) -> Punctuator:
    rng = random.Random(s.seed)
    torch.manual_seed(s.seed)
    vocab = build_vocab(train_docs, s.vocab_size)
    c = PunctuationConfig(**{**asdict(c), "vocab": len(vocab)})
    ids = {w: i for i, w in enumerate(vocab)}
    net = Net(c)
    opt = torch.optim.AdamW(net.parameters(), lr=s.lr, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE)
    began, step = time.monotonic(), 0
    seqs_per_epoch = sum(len(chunks(d, s.max_words, None)) for d in train_docs)
    total = s.epochs * max(1, seqs_per_epoch // s.batch)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, s.lr, total_steps=total, pct_start=0.05)
    for epoch in range(s.epochs):
        seqs = [q for d in train_docs for q in chunks(d, s.max_words, rng)]
        rng.shuffle(seqs)
        for k in range(0, len(seqs) - s.batch + 1, s.batch):
            word_ids, suffixes, marks, cases = _batch(
                seqs[k : k + s.batch], ids, c, s.unk_rate, rng
            )
            logits = net(word_ids, suffixes)
            loss = loss_fn(logits[..., : len(MARKS)].transpose(1, 2), marks) + loss_fn(
                logits[..., len(MARKS) :].transpose(1, 2), cases
            )
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            if step < total - 1:
                sched.step()
            step += 1
            if step % 200 == 0 and log is not None:
                with log.open("a") as f:
                    f.write(
                        json.dumps(
                            {
                                "epoch": epoch,
                                "step": step,
                                "loss": loss.item(),
                                "s": round(time.monotonic() - began),
                            }
                        )
                        + "\n"
                    )
            if time.monotonic() - began > s.time_budget_s:
                return net.export(vocab, mixed)
    return net.export(vocab, mixed)


# -- measuring -------------------------------------------------------------------------------


@dataclass
class Scores:
    """Counts over held-out words: per mark true/false positives, false negatives; cases."""

    words: int = 0
    case_right: int = 0
    baseline_case_right: int = 0  # lower case, the first word and 'i' capitalised
    tp: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)

    def table(self) -> dict[str, dict[str, float]]:
        out = {}
        for m in MARKS[1:]:
            tp, fp, fn = self.tp[m], self.fp[m], self.fn[m]
            p = tp / (tp + fp) if tp + fp else 0.0
            r = tp / (tp + fn) if tp + fn else 0.0
            f1 = 2 * p * r / (p + r) if p + r else 0.0
            out[m] = {"precision": p, "recall": r, "f1": f1, "support": tp + fn}
        return out


def _written_case(word: str) -> int:
    letters = [ch for ch in word if ch.isalpha()]
    if len(letters) > 1 and all(ch.isupper() for ch in letters):
        return CASES.index("upper")
    return CASES.index("title") if letters and letters[0].isupper() else CASES.index("lower")


def score(p: Punctuator, docs: Sequence[Document], max_words: int) -> Scores:
    sc = Scores()
    for doc in docs:
        for seq in chunks(doc, max_words, None):
            written = write_all(p, [w.word for w in seq])
            for i, (ref, got) in enumerate(zip(seq, written, strict=True)):
                sc.words += 1
                ref_case = CASES.index("title") if ref.word == "i" else ref.case
                sc.case_right += _written_case(got.word) == ref_case
                base = CASES.index("title") if i == 0 or ref.word == "i" else 0
                sc.baseline_case_right += base == ref_case
                want = MARKS[ref.mark]
                if got.mark == want and want:
                    sc.tp[want] += 1
                else:
                    if got.mark:
                        sc.fp[got.mark] += 1
                    if want:
                        sc.fn[want] += 1
    return sc


def report(results: dict[str, Scores], meta: dict[str, object]) -> tuple[dict[str, object], str]:
    body: dict[str, object] = {"meta": meta, "sets": {}}
    lines = [
        "| held-out text | words | , F1 (P/R) | . F1 (P/R) | ? F1 (P/R) | case accuracy "
        "(baseline) |",
        "| --- | ---: | --- | --- | --- | --- |",
    ]
    for name, sc in results.items():
        t = sc.table()
        body["sets"][name] = {  # type: ignore[index]
            "words": sc.words,
            "marks": t,
            "case_accuracy": sc.case_right / max(sc.words, 1),
            "baseline_case_accuracy": sc.baseline_case_right / max(sc.words, 1),
        }
        cells = [
            f"{t[m]['f1']:.3f} ({t[m]['precision']:.2f}/{t[m]['recall']:.2f})" for m in MARKS[1:]
        ]
        lines.append(
            f"| {name} | {sc.words:,} | {' | '.join(cells)} | "
            f"{sc.case_right / max(sc.words, 1):.3f} ({sc.baseline_case_right / max(sc.words, 1):.3f}) |"
        )
    return body, "\n".join(lines) + "\n"


# -- command line ----------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--text",
        type=Path,
        required=True,
        help="a `harken punctuation-text` directory (train.jsonl, held_*.jsonl)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="directory for the model (punctuation.*) and its report",
    )
    parser.add_argument(
        "--eval-only",
        type=Path,
        default=None,
        help="measure the model in this directory instead of training one",
    )
    parser.add_argument(
        "--epochs", type=int, default=TrainSettings.epochs, help="passes over the training text"
    )
    parser.add_argument(
        "--time-budget-s",
        type=float,
        default=TrainSettings.time_budget_s,
        help="stop training after this many seconds",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads for training")
    sizes = PunctuationConfig(vocab=0)
    parser.add_argument("--dim", type=int, default=sizes.dim, help="word embedding size")
    parser.add_argument("--hidden", type=int, default=sizes.hidden, help="GRU state size")
    parser.add_argument("--ffn", type=int, default=sizes.ffn, help="classifier hidden size")
    parser.add_argument(
        "--lookahead",
        type=int,
        default=sizes.lookahead,
        help="words after a word that its mark and case may depend on",
    )
    parser.add_argument("--seed", type=int, default=0, help="shuffling and initialisation")


HELD = {
    "held_brown.jsonl": "Brown, held-out fifth",
    "held_fortunes.jsonl": "fortunes, one in twenty",
}


def main(args: argparse.Namespace) -> int:
    torch.set_num_threads(args.threads)
    missing = [n for n in ("train.jsonl", *HELD) if not (args.text / n).is_file()]
    if missing:
        raise SystemExit(f"--text {args.text}: no {', '.join(missing)} (harken punctuation-text)")
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    held = {name: read_documents(args.text / f, TextStats()) for f, name in HELD.items()}
    settings = TrainSettings(epochs=args.epochs, time_budget_s=args.time_budget_s, seed=args.seed)
    if args.eval_only is not None:
        p = Punctuator.load(args.eval_only)
        if p is None:
            raise SystemExit(f"{args.eval_only}: no punctuation model here")
        meta: dict[str, object] = {"model": str(args.eval_only)}
    else:
        stats = TextStats()
        docs = read_documents(args.text / "train.jsonl", stats)
        print(
            f"training text: {stats.documents} documents, {stats.sentences} sentences, "
            f"{stats.words} words; sentences dropped {dict(stats.dropped)}"
        )
        p = train(
            docs,
            mixed_forms(stats),
            PunctuationConfig(
                vocab=0, dim=args.dim, hidden=args.hidden, ffn=args.ffn, lookahead=args.lookahead
            ),
            settings,
            log=args.out / "log.jsonl",
        )
        meta = {
            "text": str(args.text),
            "train_words": stats.words,
            "train_documents": stats.documents,
            "dropped": dict(stats.dropped),
            "settings": asdict(settings),
            "train_s": round(time.monotonic() - began),
        }
        p.save(args.out, provenance=meta)
    results = {name: score(p, docs, settings.max_words) for name, docs in held.items()}
    body, table = report(results, meta)
    (args.out / "report.json").write_text(json.dumps(body, indent=1) + "\n")
    (args.out / "report.md").write_text(table)
    print(table)
    return 0
