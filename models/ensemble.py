"""A bundle that hears with more than one network: their per-frame probabilities averaged.

Two networks trained differently make partly different mistakes, so the mean of their
output distributions, frame by frame, reads better than either (experiments/ensemble.md).
A bundle opts in with an `ensemble` entry in its config.json naming member bundles kept
inside it and their shares of the mean:

    "ensemble": {"members": [{"bundle": "wide", "weight": 0.3}]}

The bundle's own network takes the rest (0.7 here). An optional `alone` entry holds the
search settings tuned for the bundle's own network heard by itself (decoder.json's fields,
e.g. `{"blank_penalty": 0.75}`), which a server or eval run with `--ensemble false` uses:
that halves a pair's model cost at the accuracy the first network has alone. `harken
ensemble` writes it from decoder.json when a bundle first gains a member.

Each member is a complete bundle (weights, normalisation, its own speaker warps), loaded
and adapted on its own; members must share the features, the alphabet, the time stride and
the conv layers' look-ahead, so that their output frames are the same frames. The row
convolution's look-ahead may differ: a member that sees further ahead emits each frame a
little later, and the server holds the others' frames until it has them all
(`models/rows.py` `align_members`, in `server/runner.py` `EnsembleRunner`), so a pair is as late
as its longest look-ahead. The LM and decoder settings are the bundle's own, and
`harken tune-lm` tunes them on the mix; `harken tune-warp` tunes the bundle's own network's
warps, so tune a member's before it joins (`harken ensemble`).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from models.bundle import BundleError, load_bundle, read_bundle_config
from models.config import ModelConfig
from models.ds2 import DS2
from models.input_adaptation import InputTransforms
from models.mixing import mix, mix_numpy
from models.streaming import plan
from models.warp import adapted_forward

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class MemberSpec:
    """One network of a bundle: its bundle directory and its share of the mean."""

    path: Path
    weight: float


def member_specs(path: str | Path, ensemble: bool = True) -> list[MemberSpec]:
    """The bundle's networks, its own first; one member of weight 1 without `ensemble` (in
    the bundle, or asked for: `ensemble=False` hears with the bundle's own network only)."""
    root = Path(path)
    meta = read_bundle_config(root)
    entry = meta.get("ensemble")
    if entry is None or not ensemble:
        return [MemberSpec(root, 1.0)]
    where = root / "config.json"
    members = entry.get("members") if isinstance(entry, dict) else None
    if not isinstance(members, list) or not members:
        raise BundleError(f"{where}: ensemble.members must be a non-empty list")
    specs: list[MemberSpec] = []
    for m in members:
        if not isinstance(m, dict) or not isinstance(m.get("bundle"), str):
            raise BundleError(f"{where}: each ensemble member needs a 'bundle' name, got {m!r}")
        weight = m.get("weight")
        if not isinstance(weight, int | float) or not 0.0 < float(weight) < 1.0:
            raise BundleError(f"{where}: member {m['bundle']!r} weight must be in (0, 1)")
        sub = (root / m["bundle"]).resolve()
        if root.resolve() not in sub.parents:
            raise BundleError(f"{where}: member {m['bundle']!r} must be a folder inside {root}")
        if "ensemble" in read_bundle_config(sub):
            raise BundleError(f"{sub}: a member cannot itself be an ensemble")
        specs.append(MemberSpec(root / m["bundle"], float(weight)))
    own = 1.0 - sum(s.weight for s in specs)
    if own <= 0.0:
        raise BundleError(f"{where}: members' weights must sum to less than 1 (the rest is own)")
    return [MemberSpec(root, own), *specs]


def _check_compatible(models: list[DS2], where: str) -> None:
    """Members must yield the same frames from the same features (see the module doc)."""
    first, geometry = models[0].config, _front(models[0])
    for model in models[1:]:
        cfg = model.config
        if cfg.features != first.features or cfg.alphabet != first.alphabet:
            raise BundleError(f"{where}: ensemble members must share features and alphabet")
        if cfg.time_stride != first.time_stride or _front(model) != geometry:
            raise BundleError(
                f"{where}: ensemble members must share the time stride and the conv layers' "
                "look-ahead (their output frames must be the same frames)"
            )


def _front(model: DS2) -> tuple[object, ...]:
    """The streaming geometry up to the recurrent layers: which input frames each output
    frame's recurrence has heard (the row convolution only adds later frames to it)."""
    p = plan(model)
    return p.conv_buffer, p.conv_first, p.rnn_first


@dataclass(frozen=True)
class Networks:
    """A bundle's networks, loaded, with their shares: what offline tools hear it with."""

    models: list[DS2]
    weights: list[float]

    @property
    def config(self) -> ModelConfig:
        """The bundle's own network's config (its members share what decoding needs)."""
        return self.models[0].config

    @property
    def dtype(self) -> torch.dtype:
        """The precision the networks were loaded in (int8 loads keep fp32 activations)."""
        return next(self.models[0].parameters()).dtype

    def num_parameters(self) -> int:
        return sum(m.num_parameters() for m in self.models)

    def forward(
        self,
        feats: Tensor,
        lengths: Tensor,
        adapt: bool = True,
        transforms: Sequence[InputTransforms] | None = None,
        profiles: Sequence[InputTransforms | None] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Mixed log-probs [B, T', V] and lengths: each member with its own speaker warps,
        exactly as the streaming server hears the bundle; `adapt=False` hears the features
        as they are (a teacher on training voices, where the warps would only add cost).
        `transforms`, one per utterance, adapt the bundle's own network's input as the
        server does for a file (`models/input_adaptation.py`); `profiles` (one per utterance or
        None) are speakers' profiles that the bundle's own network hears through, as the
        server does for a stream once it has one; the members hear it as is."""
        outs, n = [], lengths
        for i, model in enumerate(self.models):
            x = feats.to(self.dtype)
            fitted, profiled = (transforms, profiles) if i == 0 else (None, None)
            lp, n = (
                adapted_forward(model, x, lengths, fitted, profiled) if adapt else model(x, lengths)
            )
            outs.append(lp)
        return mix(outs, self.weights), n


def alone_search(path: str | Path) -> dict[str, float]:
    """The search settings an ensemble bundle keeps for its own network heard alone (its
    `ensemble.alone` entry; empty when it has none or is a single network)."""
    root = Path(path)
    entry = read_bundle_config(root).get("ensemble")
    alone = entry.get("alone", {}) if isinstance(entry, dict) else {}
    if not isinstance(alone, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in alone.values()
    ):
        raise BundleError(f"{root / 'config.json'}: ensemble.alone must map settings to numbers")
    return {str(k): float(v) for k, v in alone.items()}


def load_networks(
    path: str | Path,
    device: str = "cpu",
    dtype: torch.dtype | str = torch.float32,
    ensemble: bool = True,
) -> Networks:
    """Every network of a bundle (its own only with `ensemble=False`), as `load_bundle`
    loads one."""
    specs = member_specs(path, ensemble)
    models = [load_bundle(s.path, device=device, dtype=dtype) for s in specs]
    _check_compatible(models, str(Path(path) / "config.json"))
    return Networks(models, [s.weight for s in specs])


def add_member(bundle: str | Path, member: str | Path, weight: float, name: str) -> Path:
    """Copy the network of bundle `member` into `bundle`/`name` and give it `weight` of the
    mean, taken from the bundle's own share; checked by loading the result. The member's LM
    and decoder files are not copied: the bundle decodes with its own."""
    root, src = Path(bundle), Path(member)
    if not name or "/" in name or name.startswith("."):
        raise BundleError(f"member name must be a plain folder name, got {name!r}")
    dest = root / name
    if dest.exists():
        raise BundleError(f"{dest} exists already; choose another name or remove it")
    meta = read_bundle_config(root)
    if "ensemble" in read_bundle_config(src):
        raise BundleError(f"{src}: a member cannot itself be an ensemble")
    if "ensemble" not in meta:
        meta["ensemble"] = {"members": [], "alone": _tuned_search(root)}
    entry = meta["ensemble"]
    entry["members"].append({"bundle": name, "weight": weight})
    dest.mkdir()
    try:
        for file in ("model.safetensors", "config.json", "CARD.md"):
            if (src / file).is_file():
                shutil.copy2(src / file, dest / file)
        before = (root / "config.json").read_text()
        (root / "config.json").write_text(json.dumps(meta, indent=1) + "\n")
        try:
            load_networks(root)
        except BundleError:
            (root / "config.json").write_text(before)
            raise
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    # the card's scores were measured without the member: say so until they are re-measured
    with (root / "CARD.md").open("a") as card:
        card.write(
            f"\n- ensemble member `{name}/` added by `harken ensemble` ({weight:g} of the "
            f"per-frame mean, from {src}); scores above this line were measured without it\n"
        )
    return dest


# the decoder.json settings `harken tune-lm` tunes for the network it hears: what the bundle's
# own network keeps for `--ensemble false` once the mix is tuned in their place
TUNED = ("alpha", "beta", "blank_penalty")


def _tuned_search(root: Path) -> dict[str, float]:
    """The bundle's tuned search settings (decoder.json's), before a member joins."""
    path = root / "decoder.json"
    if not path.is_file():
        return {}
    try:
        config = json.loads(path.read_text()).get("config", {})
    except (OSError, ValueError, AttributeError) as e:
        raise BundleError(f"{path}: unreadable ({e})") from None
    return {k: float(config[k]) for k in TUNED if isinstance(config.get(k), int | float)}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="the bundle that gains a member (edited in place)")
    p.add_argument("member", type=Path, help="a bundle whose network joins it")
    p.add_argument(
        "--weight", type=float, required=True, help="the member's share of the mean, in (0, 1)"
    )
    p.add_argument("--name", default="", help="its folder inside the bundle (default: its name)")


def main(args: argparse.Namespace) -> int:
    try:
        dest = add_member(args.bundle, args.member, args.weight, args.name or args.member.name)
    except BundleError as e:
        raise SystemExit(f"error: {e}") from e
    for spec in member_specs(args.bundle):
        print(f"{spec.weight:.3f}  {spec.path}")
    print(f"{args.member} joined {args.bundle} as {dest.name}")
    return 0


__all__ = [
    "MemberSpec",
    "Networks",
    "add_member",
    "load_networks",
    "member_specs",
    "mix",
    "mix_numpy",
]
