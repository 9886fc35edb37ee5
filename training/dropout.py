"""Dropout between the recurrent layers, and the BatchNorm statistics it leaves behind.

Why dropout: the network hears its training voices at about half the character error of
voices it never heard (models/results/voicegap.md), the signature of a model that fits the
voices it has rather than speech; zeroing a share of each recurrent layer's inputs
(`DS2.dropout`, train mode only) is the plainest regulariser against that.

Why recalibrate: each layer's input projection is batch-normalised, and its running
statistics are measured on dropped inputs, whose variance inverted dropout inflates. In eval
mode nothing is dropped, so those statistics would scale every gate's input down a little.
`recalibrated` re-measures them with dropout off before a model is scored or exported, as
weight averaging's recipes re-measure BatchNorm after averaging."""

from __future__ import annotations

import copy

import torch
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from models.ds2 import DS2, SequenceBatchNorm


@torch.no_grad()
def recalibrated(model: DS2, features: list[Tensor], batch_size: int = 16) -> DS2:
    """An eval-mode copy of `model`, dropout off, whose BatchNorm running statistics are the
    mean of each batch's own over `features` ([T, F] arrays as training batches see them).
    Every layer normalises by its batch's statistics while they are measured, as in
    training, so a layer's statistics do not depend on the stale ones of the layers below."""
    if not features:
        raise ValueError("recalibrating BatchNorm needs calibration features")
    out = copy.deepcopy(model)
    out.dropout = 0.0
    out.train()
    norms = [m for m in out.modules() if isinstance(m, SequenceBatchNorm)]
    kept = [m.momentum for m in norms]
    device = out.feat_mean.device
    for k, start in enumerate(range(0, len(features), batch_size)):
        for m in norms:
            m.momentum = 1.0 / (k + 1)  # a running mean over batches; the first replaces
        chunk = features[start : start + batch_size]
        lengths = torch.tensor([len(f) for f in chunk], device=device)
        out(pad_sequence(chunk, batch_first=True).to(device), lengths)
    for m, momentum in zip(norms, kept, strict=True):
        m.momentum = momentum
    return out.eval().requires_grad_(False)
