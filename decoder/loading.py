"""decoder.json: the files and tuned settings of a bundle's LM, and loading a decoder from it.

    {"lm": "lm.binary", "unigrams": "unigrams.txt", "unit": "word", "order": 4,
     "config": {"alpha": 0.5, "beta": 1.0, "beam_width": 64, ...},
     "mix": [{"lm": "general.binary", "unigrams": "general.unigrams.txt", "weight": 0.8}]}

`mix` (optional, `harken mix-lm`) interpolates further LMs with the first one, each at its
weight (the first LM gets the rest); the search knows the words of every unigram list.

`config` holds DecoderConfig fields; frame_seconds is not among them, since it belongs to
the acoustic model (the bundle's config.json), and the caller passes it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from decoder.alphabet import Alphabet
from decoder.beam import BeamSearchDecoder, DecoderConfig
from decoder.lm import InterpolatedLM, KenLM, LanguageModel, Unit

DECODER_JSON = "decoder.json"
_NOT_SAVED = ("frame_seconds",)


def write_decoder_json(
    directory: Path,
    config: DecoderConfig,
    unit: Unit,
    order: int,
    lm: str,
    unigrams: str,
    texts: list[dict[str, Any]] | None = None,
) -> Path:
    """Write (or overwrite) DIR/decoder.json; returns its path. `texts` records what the LM
    was built from (`decoder.build.describe_text`); the search never reads it."""
    settings = {k: v for k, v in dataclasses.asdict(config).items() if k not in _NOT_SAVED}
    doc: dict[str, Any] = {
        "lm": lm,
        "unigrams": unigrams,
        "unit": unit,
        "order": order,
        "config": settings,
    }
    if texts is not None:
        doc["texts"] = texts
    path = directory / DECODER_JSON
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def read_decoder_json(directory: Path) -> dict[str, Any]:
    path = directory / DECODER_JSON
    if not path.is_file():
        raise FileNotFoundError(f"no {DECODER_JSON} in {directory}; build one with harken build-lm")
    doc: dict[str, Any] = json.loads(path.read_text())
    unknown = set(doc.get("config", {})) - {f.name for f in dataclasses.fields(DecoderConfig)}
    if unknown:
        raise ValueError(f"{path}: unknown config fields {sorted(unknown)}")
    return doc


def update_decoder_json(directory: Path, **settings: float | int) -> None:
    """Change some config fields (e.g. the tuned alpha and beta) in place."""
    doc = read_decoder_json(directory)
    doc["config"].update(settings)
    DecoderConfig(**doc["config"])  # validates
    (directory / DECODER_JSON).write_text(json.dumps(doc, indent=2) + "\n")


def load_config(directory: Path, frame_seconds: float, **overrides: Any) -> DecoderConfig:
    doc = read_decoder_json(directory)
    return DecoderConfig(**{**doc["config"], "frame_seconds": frame_seconds, **overrides})


def load_decoder(
    directory: Path,
    alphabet: Alphabet,
    frame_seconds: float,
    *,
    mix: bool = True,
    **overrides: Any,
) -> BeamSearchDecoder:
    """The beam search decoder a directory's decoder.json describes (LM and unigrams loaded
    once; share the result between streams). `mix=False` leaves out any mixed-in LMs: the
    bundle's own LM alone, as a peer decoder that reads one LM would use it."""
    directory = Path(directory)
    doc = read_decoder_json(directory)
    config = load_config(directory, frame_seconds, **overrides)
    unit = doc.get("unit", "word")
    own = KenLM(directory / doc["lm"], unit=unit)
    lm: LanguageModel = own
    unigrams = _words(directory, doc)
    mixed = doc.get("mix", []) if mix else []
    if mixed:
        try:
            weights = [float(m["weight"]) for m in mixed]
            models = [KenLM(directory / m["lm"], unit=unit) for m in mixed]
            lm = InterpolatedLM([own, *models], [1.0 - sum(weights), *weights])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{directory / DECODER_JSON}: bad mix {mixed!r}: {e}") from None
        if unigrams is not None:
            extra = [w for m in mixed for w in _words(directory, m) or ()]
            unigrams = sorted(set(unigrams).union(extra))
    return BeamSearchDecoder(alphabet, config, lm, unigrams)


def _words(directory: Path, entry: dict[str, Any]) -> list[str] | None:
    """The words of an entry's unigram list (None if it names none)."""
    name: str | None = entry.get("unigrams")
    return (directory / name).read_text().split() if name else None
