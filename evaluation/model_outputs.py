"""Log-probs of a bundle's network over a manifest, computed once for the decoder's offline
tools (tune-lm, bench-decoder). The only place these tools touch the acoustic model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from models.config import ModelConfig
from models.ensemble import load_networks
from models.features import featurize
from models.manifest import read_manifest
from training.data import load_audio

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class ModelOutputs:
    config: ModelConfig
    log_probs: list[F32]  # one [T', V] array per utterance, in manifest order
    references: list[str]
    audio_seconds: float


def manifest_log_probs(
    bundle: Path, manifest: Path, limit: int = 0, dtype: torch.dtype | str = torch.float32
) -> ModelOutputs:
    """Run the bundle's network (CPU, float32 unless `dtype` says otherwise, one utterance at
    a time, with its speaker adaptation and any ensemble members, as the server runs it) over
    a manifest."""
    model = load_networks(bundle, dtype=dtype)
    utterances = read_manifest(manifest)
    utterances = utterances[:limit] if limit else utterances
    outputs, seconds = [], 0.0
    with torch.inference_mode():
        for utt in utterances:
            audio = load_audio(str(utt.audio))
            seconds += len(audio) / model.config.features.sample_rate
            feats = torch.from_numpy(featurize(audio, model.config.features))[None]
            log_probs, lengths = model.forward(feats, torch.tensor([feats.shape[1]]))
            outputs.append(log_probs[0, : int(lengths[0])].float().numpy())
    return ModelOutputs(model.config, outputs, [u.text for u in utterances], seconds)
