"""Decoder benchmark on precomputed log-probs: ours against pyctcdecode and flashlight-text,
on the model's outputs and on a flattened copy; DS2 §7.3's pruning table; and the cost of
finalize() against utterance length.

The caller supplies the log-probs (evaluation/cli_bench_decoder.py runs the bundle's network;
without a bundle, decoder/synthetic.py stands in, and the results say so in "inputs").
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from decoder.alphabet import BLANK, Alphabet
from decoder.baselines import flashlight_decoder, pyctcdecode_decoder
from decoder.beam import BeamSearchDecoder, penalise_blank
from decoder.loading import load_decoder, read_decoder_json
from decoder.metrics import cer, wer
from decoder.synthetic import flatten

F32 = npt.NDArray[np.float32]
Decode = Callable[[F32], str]
FLASHLIGHT_BEAMS = (5, 10, 25, 50, 100)  # swept to find its time at our WER
SWEEP_CUTOFF_PROBS = (0.99, 0.995, 0.999, 0.9999, 1.0)  # 1.0: no cumulative cut
SWEEP_TOP_NS = (8, 16)  # and the whole alphabet (no cap)


def measure(decode: Decode, log_probs: Sequence[F32], refs: Sequence[str]) -> dict[str, float]:
    """WER, CER and mean milliseconds per utterance of one decoder."""
    start = time.perf_counter()
    hyps = [decode(lp) for lp in log_probs]
    ms = (time.perf_counter() - start) * 1000 / len(log_probs)
    pairs = list(zip(refs, hyps, strict=True))
    return {"wer": wer(pairs).rate, "cer": cer(pairs).rate, "ms_per_utt": round(ms, 3)}


def greedy(alphabet: Alphabet) -> Decode:
    def decode(lp: F32) -> str:
        best = lp.argmax(axis=1)
        keep = (best != BLANK) & np.concatenate([[True], best[1:] != best[:-1]])
        return " ".join(alphabet.decode(best[keep]).split())

    return decode


def ours(decoder: BeamSearchDecoder) -> Decode:
    return lambda lp: decoder.decode(lp)[0].text


def compare(
    log_probs: Sequence[F32], refs: Sequence[str], decoder: BeamSearchDecoder, lm_dir: Path
) -> dict[str, Any]:
    """Greedy, ours, pyctcdecode (beam 100) and flashlight (a beam sweep) on one input set.

    With a blank penalty in the bundle, the peers decode the penalised posteriors our search
    sees (precomputed, so its cost is ours alone): the rows then compare searches, not the
    knob. Greedy stays the network's own best path."""
    alphabet, cfg = decoder.alphabet, decoder.config
    searched = log_probs
    if cfg.blank_penalty:
        searched = [
            penalise_blank(lp.astype(np.float64), cfg.blank_penalty).astype(np.float32)
            for lp in log_probs
        ]
    unigrams = (lm_dir / read_decoder_json(lm_dir)["unigrams"]).read_text().split()
    lm_path = lm_dir / read_decoder_json(lm_dir)["lm"]
    out: dict[str, Any] = {
        "greedy": measure(greedy(alphabet), log_probs, refs),
        "harken": measure(ours(decoder), log_probs, refs),
        "pyctcdecode": measure(
            pyctcdecode_decoder(alphabet, lm_path, unigrams, cfg.alpha, cfg.beta), searched, refs
        ),
    }
    sweep = {}
    for beam in FLASHLIGHT_BEAMS:
        fl = flashlight_decoder(alphabet, lm_path, unigrams, cfg.alpha, cfg.beta, beam_size=beam)
        sweep[beam] = measure(fl, searched, refs)
    out["flashlight"] = sweep[100]
    out["flashlight_sweep"] = {str(b): r for b, r in sweep.items()}
    equal = [b for b in FLASHLIGHT_BEAMS if sweep[b]["wer"] <= out["harken"]["wer"] + 1e-9]
    out["flashlight_at_our_wer"] = {"beam": equal[0], **sweep[equal[0]]} if equal else None
    return out


def pruning_table(
    log_probs: Sequence[F32],
    refs: Sequence[str],
    decoder: BeamSearchDecoder,
    off: dict[str, float] | None = None,
) -> dict[str, Any]:
    """DS2 §7.3: the search with and without the cumulative-probability pruning (`off`: the
    unpruned search's measurement when the caller already has it, e.g. a sweep's last row)."""
    on = measure(ours(decoder), log_probs, refs)
    if off is None:
        unpruned = decoder.with_config(cutoff_prob=1.0, cutoff_top_n=decoder.alphabet.size)
        off = measure(ours(unpruned), log_probs, refs)
    return {
        "on": on,
        "off": off,
        "speedup": round(off["ms_per_utt"] / on["ms_per_utt"], 2),
        "wer_change": on["wer"] - off["wer"],
    }


def pruning_sweep(
    log_probs: Sequence[F32], refs: Sequence[str], decoder: BeamSearchDecoder
) -> list[dict[str, float]]:
    """WER and time over a grid of (cutoff_prob, cutoff_top_n): the speed a bundle buys with
    its pruning and what it pays in accuracy, so the setting can be chosen on a dev set.
    The last row (1.0, whole alphabet) is the search without pruning."""
    rows = []
    for top_n in (*SWEEP_TOP_NS, decoder.alphabet.size):
        for prob in SWEEP_CUTOFF_PROBS:
            tuned = decoder.with_config(cutoff_prob=prob, cutoff_top_n=top_n)
            row = {"cutoff_prob": prob, "cutoff_top_n": top_n}
            rows.append(row | measure(ours(tuned), log_probs, refs))
    return rows


def finalize_cost(
    log_probs: Sequence[F32], decoder: BeamSearchDecoder, seconds: Sequence[float], chunk: int = 25
) -> list[dict[str, float]]:
    """Milliseconds spent in finalize() after streaming utterances of growing length (made by
    concatenating inputs), in chunks of `chunk` frames; the median of 3 runs."""
    frames = np.concatenate(list(log_probs))
    rows = []
    for s in seconds:
        n = int(s / decoder.config.frame_seconds)
        lp = np.resize(frames, (n, frames.shape[1])) if n > len(frames) else frames[:n]
        costs = []
        for _ in range(3):
            stream = decoder.start()
            for lo in range(0, n, chunk):
                stream.advance(lp[lo : lo + chunk])
            t0 = time.perf_counter()
            stream.finalize()
            costs.append((time.perf_counter() - t0) * 1000)
        rows.append({"seconds": s, "finalize_ms": round(float(np.median(costs)), 3)})
    return rows


def run_bench(
    log_probs: Sequence[F32],
    refs: Sequence[str],
    lm_dir: Path,
    alphabet: Alphabet,
    frame_seconds: float,
    inputs: dict[str, Any],
) -> dict[str, Any]:
    """Everything issue 3 asks for, as one JSON-able dict. Our search reads the bundle's own
    LM alone, without any general LM mixed in (`harken mix-lm`): the peers read one LM, and
    the rows compare searches, not LMs."""
    decoder = load_decoder(lm_dir, alphabet, frame_seconds, mix=False)
    flat = [flatten(lp) for lp in log_probs]
    results: dict[str, Any] = {"inputs": inputs, "config": decoder.config.__dict__}
    results.update(compare(log_probs, refs, decoder, lm_dir))
    results["flattened"] = compare(flat, refs, decoder, lm_dir)
    sweep = pruning_sweep(log_probs, refs, decoder)
    unpruned = {k: sweep[-1][k] for k in ("wer", "cer", "ms_per_utt")}  # (1.0, whole alphabet)
    results["pruning"] = {
        "model": pruning_table(log_probs, refs, decoder, off=unpruned),
        "flattened": pruning_table(flat, refs, decoder),
    }
    results["pruning_sweep"] = sweep
    results["finalize"] = finalize_cost(log_probs, decoder, (2, 5, 10, 20, 40, 80))
    return results


def write_results(results: dict[str, Any], out: Path) -> None:
    """OUT/results.json and OUT/results.md."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text(markdown(results))


def markdown(r: dict[str, Any]) -> str:
    cfg = r["config"]
    lines = [
        f"# Decoder benchmark\n\nInputs: {json.dumps(r['inputs'])}\n",
        f"Our search: beam {cfg['beam_width']}, threshold {cfg['score_threshold']}, LM weight "
        f"{cfg['alpha']}, bonus {cfg['beta']}, blank penalty {cfg.get('blank_penalty', 0.0)} "
        "(pyctcdecode and flashlight-text decode the same penalised posteriors, with the "
        "same LM, weight and bonus; pyctcdecode at beam 100, flashlight-text swept).\n",
    ]
    for title, part in (("Model outputs", r), ("Flattened (logits / 2)", r["flattened"])):
        lines += [f"## {title}\n", "| decoder | WER | CER | ms/utt |", "| --- | --- | --- | --- |"]
        for name in ("greedy", "harken", "pyctcdecode", "flashlight"):
            m = part[name]
            lines.append(f"| {name} | {m['wer']:.4f} | {m['cer']:.4f} | {m['ms_per_utt']:.2f} |")
        for beam, m in part["flashlight_sweep"].items():
            lines.append(
                f"| flashlight beam {beam} | {m['wer']:.4f} | {m['cer']:.4f} | {m['ms_per_utt']:.2f} |"
            )
        lines.append("")
    lines += pruning_markdown(r)
    lines += ["", "## finalize() cost\n", "| utterance s | finalize ms |", "| --- | --- |"]
    lines += [f"| {row['seconds']} | {row['finalize_ms']:.3f} |" for row in r["finalize"]]
    return "\n".join(lines) + "\n"


def pruning_markdown(r: dict[str, Any]) -> list[str]:
    """The pruning tables' markdown lines: on/off at the bundle's setting, then the sweep."""
    lines: list[str] = []
    cfg = r["config"]
    lines += [
        f"## Pruning (DS2 §7.3: cumulative probability {cfg['cutoff_prob']}, "
        f"at most {cfg['cutoff_top_n']} symbols)\n",
        "| inputs | ms/utt on | ms/utt off | speed-up | WER on | WER off |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, p in r["pruning"].items():
        lines.append(
            f"| {name} | {p['on']['ms_per_utt']:.2f} | {p['off']['ms_per_utt']:.2f} | "
            f"{p['speedup']:.1f}x | {p['on']['wer']:.4f} | {p['off']['wer']:.4f} |"
        )
    if "pruning_sweep" in r:
        lines += [
            "",
            "## Pruning sweep (model outputs; the bundle's setting is "
            f"{cfg['cutoff_prob']} / {cfg['cutoff_top_n']})\n",
            "| cutoff prob | top n | WER | CER | ms/utt |",
            "| --- | --- | --- | --- | --- |",
        ]
        lines += [
            f"| {row['cutoff_prob']} | {row['cutoff_top_n']} | {row['wer']:.4f} | "
            f"{row['cer']:.4f} | {row['ms_per_utt']:.2f} |"
            for row in r["pruning_sweep"]
        ]
    return lines


def synthetic_main(argv: Sequence[str] | None = None) -> int:
    """Benchmark on synthetic log-probs of a manifest's texts (no acoustic model needed):
    python -m decoder.bench --manifest data/corpus/test.jsonl --lm models/default --out DIR"""
    import argparse

    from decoder.alphabet import ENGLISH
    from decoder.synthetic import synthetic_log_probs

    parser = argparse.ArgumentParser(description=synthetic_main.__doc__)
    parser.add_argument("--manifest", type=Path, required=True)
    parser.add_argument("--lm", type=Path, required=True, help="directory with decoder.json")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=0, help="first N utterances (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    lines = args.manifest.read_text().splitlines()
    refs = [json.loads(line)["text"] for line in lines if line.strip()]
    refs = refs[: args.limit] if args.limit else refs
    alphabet, rng = Alphabet(ENGLISH), np.random.default_rng(args.seed)
    log_probs = [synthetic_log_probs(t, alphabet, rng) for t in refs]
    inputs = {
        "kind": "synthetic (decoder/synthetic.py), not a model",
        "texts": str(args.manifest),
        "utterances": len(refs),
        "seed": args.seed,
    }
    results = run_bench(log_probs, refs, args.lm, alphabet, 0.02, inputs)
    write_results(results, args.out)
    print(markdown(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(synthetic_main())
