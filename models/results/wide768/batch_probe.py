"""What a larger batch buys a CPU training step: one batch of 2N against two of N.

Usage: python models/results/wide768/batch_probe.py CHECKPOINT MANIFEST [N] [REPEATS]

Builds the checkpoint's training model (train mode, bf16 autocast, two threads, as
`harken train --precision bf16 --threads 2` runs it), takes 2N utterances of about the
median duration from the manifest (clean audio), and times a forward and backward (CTC loss,
no optimizer step) of the 2N as one batch and as two batches of N, alternating, REPEATS
times. Prints wall and process seconds of each and the audio per wall second. The first
repeat includes one-time kernel set-up; read the later ones."""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F

from models.config import ModelConfig
from models.ds2 import DS2
from models.manifest import read_manifest
from server.precision import cpu_description
from training.data import Batch, DataConfig, SpeechDataset, collate


def step(model: DS2, batch: Batch) -> tuple[float, float]:
    model.zero_grad(set_to_none=True)
    wall, cpu = time.perf_counter(), time.process_time()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        log_probs, out_lens = model(batch.feats, batch.feat_lengths)[:2]
    loss = F.ctc_loss(
        log_probs.float().transpose(0, 1),
        batch.labels,
        out_lens,
        batch.label_lengths,
        reduction="sum",
        zero_infinity=True,
    )
    loss.backward()  # type: ignore[no-untyped-call]
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    checkpoint, manifest = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 48
    repeats = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    torch.set_num_threads(2)
    state = torch.load(checkpoint, map_location="cpu", weights_only=False)
    config = ModelConfig.from_dict(state["model_config"])
    model = DS2(config)
    model.load_state_dict(state["model"])
    model.train()
    utts = sorted(read_manifest(manifest), key=lambda u: u.duration or 0.0)
    middle = len(utts) // 2 - n
    data = SpeechDataset(utts[middle : middle + 2 * n], DataConfig(features=config.features))
    examples = [data[i] for i in range(2 * n)]
    audio_s = sum(e.feats.shape[0] for e in examples) * config.features.hop_ms / 1000
    print(f"{cpu_description()}; {2 * n} utterances, {audio_s:.0f} s of audio")
    for r in range(repeats):
        a = step(model, collate(examples[:n]))
        b = step(model, collate(examples[n:]))
        c = step(model, collate(examples))
        print(
            f"repeat {r}: two of {n}: {a[0] + b[0]:.2f} s wall ({audio_s / (a[0] + b[0]):.0f} "
            f"audio s/s), {a[1] + b[1]:.1f} s CPU; one of {2 * n}: {c[0]:.2f} s wall "
            f"({audio_s / c[0]:.0f} audio s/s), {c[1]:.1f} s CPU",
            flush=True,
        )


if __name__ == "__main__":
    main()
