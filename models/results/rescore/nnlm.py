"""Step 2: a word LSTM language model on the shipped LM's text, for n-best rescoring.

Usage (repository root): python models/results/rescore/nnlm.py WORK_DIR EPOCHS

The text is the shipped 4-gram's: the fortunes dev and test do not use (data/corpus/lm_text.txt,
counted three times) and WordNet's glosses (data/lm/wordnet.txt, held-out filtered); 800
fortunes are kept aside for validation. Words seen twice or more (36,087 with <unk>),
embedding 256, one LSTM layer of 768, a 256 projection, an adaptive softmax; Adam, one-cycle
to 2e-3, batches of 64 sentences of like length, dropout 0.25. Saves WORK_DIR/nnlm.pt
after every epoch.
"""

from __future__ import annotations

import math
import random
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

PAD, EOS, UNK = 0, 1, 2  # </s> also starts a sentence


class WordLM(nn.Module):
    def __init__(self, vocab: int, emb: int = 256, hidden: int = 768) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, batch_first=True)
        self.proj = nn.Linear(hidden, emb)
        self.drop = nn.Dropout(0.25)
        self.head = nn.AdaptiveLogSoftmaxWithLoss(emb, vocab, cutoffs=[4000, 20000], div_value=4.0)

    def hidden(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.drop(self.emb(x)))
        out: torch.Tensor = self.drop(self.proj(h))
        return out


def lines(path: str) -> list[list[str]]:
    with open(path) as f:
        return [line.split() for line in f if line.strip()]


def batches(data: list[list[int]], size: int, shuffle: bool) -> Iterator[tuple[torch.Tensor, ...]]:
    order = sorted(range(len(data)), key=lambda i: len(data[i]))
    chunks = [order[i : i + size] for i in range(0, len(order), size)]
    if shuffle:
        random.shuffle(chunks)
    for chunk in chunks:
        x = torch.zeros(len(chunk), max(len(data[i]) for i in chunk) + 1, dtype=torch.long)
        for j, i in enumerate(chunk):
            x[j, : len(data[i]) + 1] = torch.tensor([EOS, *data[i]])
        yield x[:, :-1], x[:, 1:]


def perplexity(model: WordLM, data: list[list[int]]) -> float:
    model.eval()
    total = count = 0.0
    with torch.no_grad():
        for x, y in batches(data, 256, False):
            mask = y != PAD
            total -= model.head(model.hidden(x)[mask], y[mask]).output.sum().item()
            count += mask.sum().item()
    model.train()
    return math.exp(total / count)


def main(work: Path, epochs: int) -> None:
    torch.set_num_threads(2)
    random.seed(0)
    torch.manual_seed(0)
    fortunes, wordnet = lines("data/corpus/lm_text.txt"), lines("data/lm/wordnet.txt")
    random.shuffle(fortunes)
    val, fortunes = fortunes[:800], fortunes[800:]
    counts = Counter(w for s in fortunes + wordnet for w in s)
    itos = ["<pad>", "</s>", "<unk>"] + [w for w, c in counts.most_common() if c >= 2]
    stoi = {w: i for i, w in enumerate(itos)}
    print("vocab", len(itos), flush=True)

    def encode(s: list[str]) -> list[int]:
        return [stoi.get(w, UNK) for w in s] + [EOS]

    train = [encode(s) for s in fortunes] * 3 + [encode(s) for s in wordnet]
    val_ids = [encode(s) for s in val]
    model = WordLM(len(itos))
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    total = epochs * math.ceil(len(train) / 64)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 2e-3, total_steps=total, pct_start=0.05)
    start, step = time.time(), 0
    for epoch in range(epochs):
        for x, y in batches(train, 64, True):
            mask = y != PAD
            loss = model.head(model.hidden(x)[mask], y[mask]).loss
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            step += 1
            if step % 500 == 0:
                print(epoch, step, total, round(loss.item(), 3), round(time.time() - start))
        ppl = perplexity(model, val_ids)
        print("epoch", epoch, "val ppl", round(ppl, 1), round(time.time() - start), flush=True)
        torch.save({"itos": itos, "state": model.state_dict()}, work / "nnlm.pt")


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
