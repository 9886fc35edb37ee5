"""The acoustic model: what serving needs (features, network, streaming step, bundles)."""

from pathlib import Path

DEFAULT_BUNDLE = Path(__file__).resolve().parent / "default"  # the bundle `harken serve` serves
