"""The bundles a training run writes: its latest and best weights with their provenance,
every earlier stage of a fine-tuned bundle's lineage, and the LM and search settings it
carries from the bundle it started from."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

from models.bundle import carry_decoder_files, read_bundle_config, save_bundle
from models.ensemble import alone_search
from training.train import Trainer


def export(trainer: Trainer, path: Path, train_manifest: str) -> Path:
    """Write the trained model as a bundle with its provenance."""
    p, model = trainer.progress, trainer.final_model
    last: dict[str, Any] = next((h for h in reversed(p.history) if "wer" in h), {})
    provenance: dict[str, Any] = {
        "train_manifest": train_manifest,
        "train_hours_per_epoch": round(sum(trainer.train_set.durations()) / 3600, 2),
        "steps": p.step,
        "epochs_completed": p.epoch,
        "train_time_hours": round(p.train_seconds / 3600, 2),
        "hardware": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, {trainer.dist.world} process(es)",
        "precision": trainer.cfg.precision,
        "weight_averaging": f"moving average, decay {trainer.cfg.ema_decay}"
        if trainer.ema is not None
        else "none",
        "dev_greedy_wer": last.get("wer"),
        "dev_greedy_cer": last.get("cer"),
        "dev_greedy_at_step": last.get("step"),
        "augmentation": trainer.train_set.cfg.augment.describe()
        if trainer.train_set.cfg.augment
        else "none",
    }
    for extra in trainer.extra_losses:
        provenance[extra.record] = extra.describe()
    if trainer.cfg.init_from:  # what the fine-tuned bundle had behind it, by value
        provenance["fine_tuned_from"] = trainer.cfg.init_from
        stages = lineage(read_bundle_config(trainer.cfg.init_from).get("provenance", {}))
        provenance["earlier_stages"] = stages
        hours = [s["train_time_hours"] for s in [*stages, provenance]]
        if all(isinstance(h, int | float) for h in hours):
            provenance["total_train_time_hours"] = round(sum(hours), 2)
        if carried := carry_language_model(trainer.cfg.init_from, path):
            provenance["language_model"] = carried
    return save_bundle(model, path, provenance=provenance)


def carry_language_model(init_from: str, path: Path) -> str:
    """Copy the LM and search settings of the bundle a fine-tune started from into its
    export (its decoder.json and the files that names), and say so; '' when it has none.
    An ensemble's search settings were tuned for its networks together: the export is its
    own network alone, so the settings it keeps for that (`ensemble.alone`) replace them."""
    alone = alone_search(init_from)
    carried = carry_decoder_files(init_from, path, alone)
    if not carried:
        print(f"{init_from} has no LM (decoder.json): {path} is exported without one")
        return ""
    what = f"{', '.join(carried)} carried over from {init_from}"
    if alone:
        settings = ", ".join(f"{k} {v:g}" for k, v in sorted(alone.items()))
        what += f", with the search settings its own network has alone ({settings})"
    print(f"{path}: {what}")
    return what


def dev_cer_of(bundle: Path) -> float | None:
    """The dev CER a bundle's provenance records, if that bundle exists."""
    try:
        cer = read_bundle_config(bundle).get("provenance", {}).get("dev_greedy_cer")
    except (OSError, ValueError):
        return None
    return float(cer) if isinstance(cer, int | float) else None


def export_checkpoint(trainer: Trainer, bundle: Path, train_manifest: str) -> int:
    """`--export-only`: the bundle of the run's checkpoint, as `fit` would have exported it."""
    if not trainer.dist.main:
        return 0
    try:
        if not trainer.resume():
            print(f"harken train: error: no checkpoint in {trainer.out}", file=sys.stderr)
            return 2
    except ValueError as e:  # another model config, or a technique this trainer lacks
        print(f"harken train: error: {e}", file=sys.stderr)
        return 2
    print(
        f"step {trainer.progress.step}: bundle written to {export(trainer, bundle, train_manifest)}"
    )
    return 0


STAGE_KEYS = ("train_manifest", "steps", "epochs_completed", "train_time_hours", "augmentation")


def lineage(base: dict[str, Any]) -> list[dict[str, Any]]:
    """Every training stage behind a base bundle's weights, oldest first, so that a chain of
    fine-tunes keeps the whole history (bundles from before this kept one earlier stage as
    `base_*` keys, and anything before that is not recorded)."""
    if "earlier_stages" in base:
        earlier = list(base["earlier_stages"])
    elif "base_steps" in base:
        earlier = [{k: base[f"base_{k}"] for k in STAGE_KEYS if f"base_{k}" in base}]
    else:
        earlier = []
    last = {k: base.get(k, "not recorded") for k in STAGE_KEYS}
    last["distillation"] = base.get("distillation", "none")  # only teacher runs record one
    # what only the runs of techniques since removed recorded (training/train.py REMOVED)
    for key in ("soft_targets", "phone_targets", "consistency"):
        if key in base:
            last[key] = base[key]
    return [*earlier, last]
