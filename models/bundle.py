"""Model bundles: a directory with `model.safetensors`, `config.json` and `CARD.md`.

A bundle is what training hands to serving. Its BatchNorm is folded into the preceding
weights (DS2 §3.2 keeps running averages for deployment; folding removes the extra op), its
normalisation statistics and provenance live in `config.json`. Loading checks everything and
names exactly what is wrong, because a half-loaded model silently produces garbage.
Other files in the directory (an LM, `decoder.json`) belong to the decoder and are left alone;
`carry_decoder_files` copies them from the bundle a fine-tune started from, which would
otherwise be served without its LM.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from models.card import provenance_lines
from models.config import ModelConfig
from models.ds2 import DS2, ConvLayer, RecurrentLayer, SequenceBatchNorm
from models.quantize import quantize_recurrence

DECODER_JSON = "decoder.json"  # the decoder's part of a bundle: LM files and search settings
# the punctuator that writes its transcripts (models/punctuation.py), carried like the LM
PUNCTUATION_FILES = ("punctuation.json", "punctuation.safetensors")
FORMAT = "harken-bundle"
VERSION = 1
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# what a model can run in: a torch dtype throughout, or int8 recurrent layers (models/quantize.py)
PRECISIONS = (*DTYPES, "int8")


class BundleError(ValueError):
    """A bundle directory that cannot be loaded; the message says what to fix."""


@torch.no_grad()
def fold_batchnorm(model: DS2) -> DS2:
    """A copy of `model` in inference form, each BatchNorm merged into the weights before it."""
    if model.folded:
        return model
    folded = DS2(model.config, folded=True).to(next(model.parameters()).device)
    src = {k: v for k, v in model.state_dict().items() if ".bn." not in k}
    dst = folded.state_dict()
    for k, v in src.items():
        if k in dst and dst[k].shape == v.shape:
            dst[k].copy_(v)
    for a, b in zip(model.conv_stack, folded.conv_stack, strict=True):
        _fold_into(a.bn, _param(a.conv, "weight"), _param(b.conv, "weight"), _param(b.conv, "bias"))
    for ra, rb in zip(model.rnn_stack, folded.rnn_stack, strict=True):
        _fold_into(ra.bn, ra.input_proj.weight, rb.input_proj.weight, rb.input_proj.bias)
    return folded.eval()


@torch.no_grad()
def unfold_batchnorm(folded: DS2, calibration: list[torch.Tensor]) -> DS2:
    """A trainable copy of a folded model (to fine-tune a bundle): each BatchNorm gets the
    statistics of its input on `calibration` ([T, F] feature arrays of the audio training
    will see, augmented as its batches are, so that the running averages stay put) and
    an affine map that undoes them, so the copy computes what the bundle computes, in eval
    mode exactly and in training mode up to how far a batch's statistics stray from them."""
    if not folded.folded:
        raise ValueError("the model is not folded")
    if not calibration:
        raise ValueError("unfolding needs calibration features")
    model = DS2(folded.config, folded=False).to(next(folded.parameters()).device)
    dst = model.state_dict()
    for k, v in folded.state_dict().items():
        if k in dst and dst[k].shape == v.shape:
            dst[k].copy_(v)
    pairs: list[tuple[torch.nn.Module, torch.nn.Module, int]] = [
        (a.conv, b.bn, 1) for a, b in zip(folded.conv_stack, model.conv_stack, strict=True)
    ]
    # a recurrent layer's projection runs inside its fused kernel: its hook projects the input
    pairs += [(a, b.bn, 2) for a, b in zip(folded.rnn_stack, model.rnn_stack, strict=True)]
    sums: dict[int, list[torch.Tensor]] = {}

    def hook(i: int, channel_dim: int) -> Any:
        def record(m: torch.nn.Module, inp: Any, out: torch.Tensor) -> None:
            if isinstance(m, RecurrentLayer):
                out = m.input_proj(inp[0])
            x = out.double().movedim(channel_dim, 0).flatten(1)
            acc = sums.setdefault(i, [x.new_zeros(x.shape[0])] * 3)
            sums[i] = [acc[0] + x.shape[1], acc[1] + x.sum(1), acc[2] + (x * x).sum(1)]

        return record

    handles = [m.register_forward_hook(hook(i, d)) for i, (m, _, d) in enumerate(pairs)]
    try:
        folded.eval()
        for feats in calibration:  # one at a time: no padding to mask out of the statistics
            x = feats.to(folded.feat_mean)[None]
            folded(x, torch.tensor([x.shape[1]], device=x.device))
    finally:
        for h in handles:
            h.remove()
    for i, (m, bn, _) in enumerate(pairs):
        assert isinstance(bn, SequenceBatchNorm)
        count, total, sq = sums[i]
        bias = _param(m.input_proj if isinstance(m, RecurrentLayer) else m, "bias").double()
        mean = total / count - bias  # the statistics of W x, which the unfolded layer sees
        var = (sq / count - (total / count) ** 2).clamp_min(1e-8)
        bn.running_mean.copy_(mean)
        bn.running_var.copy_(var)
        bn.weight.copy_(torch.sqrt(var + bn.eps))
        bn.bias.copy_(mean + bias)
    return model


def _param(module: torch.nn.Module, name: str) -> torch.Tensor:
    p = getattr(module, name)
    assert isinstance(p, torch.Tensor)
    return p


def _fold_into(
    bn: torch.nn.Module, w: torch.Tensor, w_out: torch.Tensor, b_out: torch.Tensor
) -> None:
    assert isinstance(bn, SequenceBatchNorm)
    scale, shift = bn.scale_shift()
    shape = (-1,) + (1,) * (w.dim() - 1)
    w_out.copy_(w * scale.view(shape))
    b_out.copy_(shift)


def save_bundle(
    model: DS2,
    path: str | Path,
    provenance: dict[str, Any] | None = None,
    card: str | None = None,
) -> Path:
    """Write `model` (folded on the way) as a bundle directory at `path`."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    m = fold_batchnorm(model.float().eval())
    state = {
        k: v.detach().float().contiguous().cpu()
        for k, v in m.state_dict().items()
        if k not in ("feat_mean", "feat_std")
    }
    save_file(state, str(out / "model.safetensors"))
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "model": m.config.to_dict(),
        "batchnorm_folded": True,
        "normalization": {"mean": m.feat_mean.tolist(), "std": m.feat_std.tolist()},
        "parameters": m.num_parameters(),
        "provenance": provenance or {},
    }
    (out / "config.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "CARD.md").write_text(
        card if card is not None else default_card(m, provenance or {}, out)
    )
    return out


def default_card(model: DS2, provenance: dict[str, Any], root: Path | None = None) -> str:
    """A card of what the model is; with the bundle's `root`, of the LM it is served with."""
    cfg = model.config
    lines = [
        "# harken acoustic model",
        "",
        f"- architecture: {cfg.conv_layers} x {cfg.conv_type} conv ({cfg.conv_channels} ch), "
        f"{cfg.rnn_layers} x {cfg.rnn_type.upper()} {cfg.rnn_hidden}, row conv tau={cfg.row_conv_tau}",
        f"- parameters: {model.num_parameters():,}",
        f"- output frame: {cfg.frame_seconds * 1000:.0f} ms; alphabet: {''.join(cfg.alphabet)!r}",
    ]
    if root is not None:
        lines.append(f"- language model: {language_model_summary(root)}")
    return "\n".join([*lines, *provenance_lines(provenance)]) + "\n"


def language_model_summary(root: Path) -> str:
    """The LM a bundle is served with, in a line; or that it has none, which costs words."""
    files = decoder_files(root)
    if not files:
        return (
            "none: no decoder.json, so the beam search hears the network alone "
            "(`harken build-lm` builds one into the bundle)"
        )
    return f"{', '.join(files[1:])}, with the search settings of {DECODER_JSON}"


def decoder_files(bundle: str | Path) -> list[str]:
    """The decoder's files of a bundle: decoder.json first, then every file it names (the
    LM and its unigram list, those of the LMs mixed in) and a licence beside an LM
    (`general.LICENSE` beside `general.binary`); [] when it has no decoder.json."""
    root = Path(bundle)
    path = root / DECODER_JSON
    if not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text())
        entries = [doc, *doc.get("mix", [])]
        named = [e[k] for e in entries for k in ("lm", "unigrams") if isinstance(e.get(k), str)]
    except (OSError, ValueError, AttributeError, TypeError) as e:
        raise BundleError(f"{path} is not a readable decoder.json: {e}") from None
    licences = [f"{Path(e['lm']).stem}.LICENSE" for e in entries if isinstance(e.get("lm"), str)]
    names = [DECODER_JSON, *named, *(n for n in licences if (root / n).is_file())]
    bad = [n for n in names if Path(n).is_absolute() or ".." in Path(n).parts]
    missing = [n for n in names if not (root / n).is_file()]
    if bad or missing:
        raise BundleError(
            f"{path} names files outside the bundle {bad} or missing from it {missing}"
        )
    return list(dict.fromkeys(names))


def carry_decoder_files(
    src: str | Path, dst: str | Path, search: Mapping[str, float] | None = None
) -> list[str]:
    """Copy bundle `src`'s LM and search settings (`decoder_files`) and its punctuator
    (`PUNCTUATION_FILES`) into bundle `dst`, with `search` replacing some of decoder.json's
    settings; returns the names copied ([] when `src` has none). A file `dst` already holds
    unchanged (an earlier export's) stays."""
    names = decoder_files(src) + [n for n in PUNCTUATION_FILES if (Path(src) / n).is_file()]
    out = Path(dst)
    for name in names:
        source, target = Path(src) / name, out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if name == DECODER_JSON:
            doc = json.loads(source.read_text())
            doc["config"] = {**doc.get("config", {}), **(search or {})}
            target.write_text(json.dumps(doc, indent=2) + "\n")
        elif not _same_file(source, target):
            shutil.copy2(source, target)
    return names


def _same_file(a: Path, b: Path) -> bool:
    """Whether `b` is `a`, or a copy of it that `shutil.copy2` made (same size and time)."""
    if not b.is_file():
        return False
    sa, sb = a.stat(), b.stat()
    return a.resolve() == b.resolve() or (sa.st_size, sa.st_mtime_ns) == (
        sb.st_size,
        sb.st_mtime_ns,
    )


def read_bundle_config(path: str | Path) -> dict[str, Any]:
    """The parsed and checked `config.json` of a bundle."""
    root = Path(path)
    if not root.is_dir():
        raise BundleError(
            f"bundle {root} is not a directory (expected model.safetensors + config.json)"
        )
    for name in ("model.safetensors", "config.json"):
        if not (root / name).is_file():
            raise BundleError(f"bundle {root} has no {name}")
    try:
        meta = json.loads((root / "config.json").read_text())
    except json.JSONDecodeError as e:
        raise BundleError(f"{root / 'config.json'} is not valid JSON: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise BundleError(
            f"{root / 'config.json'} is not a harken bundle config (format != {FORMAT!r})"
        )
    if meta.get("version") != VERSION:
        raise BundleError(
            f"bundle version {meta.get('version')!r} unsupported; this harken reads {VERSION}"
        )
    for key in ("model", "normalization"):
        if key not in meta:
            raise BundleError(f"{root / 'config.json'} lacks {key!r}")
    return meta


def load_bundle(
    path: str | Path, device: str = "cpu", dtype: torch.dtype | str = torch.float32
) -> DS2:
    """Load a bundle as an eval-mode `DS2` (its `.config` is the `ModelConfig`), in a torch
    dtype or one of `PRECISIONS` by name ("int8": fp32 with int8 recurrent layers, CPU only).
    """
    if isinstance(dtype, str) and dtype not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {dtype!r}")
    root = Path(path)
    meta = read_bundle_config(root)
    try:
        config = ModelConfig.from_dict(meta["model"])
    except (TypeError, ValueError) as e:
        raise BundleError(f"{root / 'config.json'}: bad model config: {e}") from e
    model = DS2(config, folded=bool(meta.get("batchnorm_folded", False)))
    _load_weights(model, root / "model.safetensors")
    _load_norm(model, meta["normalization"], root)
    model.provenance = dict(meta.get("provenance", {}))
    if dtype == "int8":
        return quantize_recurrence(model.to(device=device).eval())
    return model.to(device=device, dtype=DTYPES[dtype] if isinstance(dtype, str) else dtype).eval()


def _load_weights(model: DS2, file: Path) -> None:
    try:
        weights = load_file(str(file))
    except Exception as e:  # safetensors raises several types for corrupt files
        raise BundleError(f"{file} is not a readable safetensors file: {e}") from e
    expected = {
        k: v.shape for k, v in model.state_dict().items() if k not in ("feat_mean", "feat_std")
    }
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    wrong = [
        f"{k}: {tuple(weights[k].shape)} != {tuple(s)}"
        for k, s in expected.items()
        if k in weights and weights[k].shape != s
    ]
    if missing or extra or wrong:
        raise BundleError(
            f"{file} does not match its config.json: missing {missing[:5]}, unexpected {extra[:5]}, "
            f"wrong shapes {wrong[:5]}"
        )
    model.load_state_dict(weights, strict=False)


def _load_norm(model: DS2, norm: dict[str, Any], root: Path) -> None:
    n = model.config.features.n_bins
    mean, std = norm.get("mean"), norm.get("std")
    if not (isinstance(mean, list) and isinstance(std, list) and len(mean) == len(std) == n):
        raise BundleError(
            f"{root / 'config.json'}: normalization mean/std must be lists of {n} numbers"
        )
    std_t = torch.tensor(std, dtype=torch.float32)
    if not bool(torch.all(std_t > 0)):
        raise BundleError(f"{root / 'config.json'}: normalization std must be positive")
    model.feat_mean.copy_(torch.tensor(mean, dtype=torch.float32))
    model.feat_std.copy_(std_t)


__all__ = [
    "DECODER_JSON",
    "DTYPES",
    "PRECISIONS",
    "BundleError",
    "ConvLayer",
    "carry_decoder_files",
    "decoder_files",
    "RecurrentLayer",
    "fold_batchnorm",
    "unfold_batchnorm",
    "load_bundle",
    "read_bundle_config",
    "save_bundle",
]
