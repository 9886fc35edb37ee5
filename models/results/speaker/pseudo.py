"""Does a speaker's profile learn more from the stream's own transcripts than from the
network's confidence? (offline probe)

Usage: python models/results/speaker/pseudo.py BUNDLE MANIFEST OUT.json [ENROL]

The served profile (`speaker.md`) fits a per-bin gain and offset of the first network's input
by lowering the entropy of its speech frames: the network grows surer of whatever it already
heard. A live stream has more than that: the finals it already sent, read through the search
and its LM, which mishear far fewer words than the network's frames (TTS dev: 27% beam WER
against 57% greedy). Fitting the same transform by CTC towards those transcripts (pseudo
labels, classic unsupervised speaker adaptation) lets the LM teach the network the voice.

Per voice, the first ENROL utterances (default 16, about a minute) are the enrolment; every
later one is scored, the pair as served but for what is fitted of the first network:
- "served": nothing;
- "entropy": the served profile (per-bin gain and offset, 10 entropy steps at 0.05) alone;
- "pseudo ...": CTC towards the served pair's beam transcripts of the enrolment;
- "oracle ...": CTC towards the true transcripts (what the fitted parameters could give at best).
What is fitted: "in", the served profile's per-bin gain and offset; "affine", a full affine
map of the normalised input (fMLLR's form); "lhuc", a per-unit amplitude of each recurrent
layer's output (LHUC, Swietojanski and Renals 2014). The CTC is taken on what the stream
hears: the first network's warped copies averaged, mixed with the other network's (fixed)
output at the bundle's weights. (`speaker/pseudo_first_tts_dev.json` is this probe's first
version: the "in" fits only, as 10 and 30 pseudo-label steps and 30 oracle steps.)
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from decoder.alphabet import Alphabet
from decoder.loading import load_decoder
from decoder.metrics import wer
from evaluation.variants import beam_texts
from models.ds2 import DS2
from models.ensemble import Networks
from models.input_adaptation import InputTransforms, _Adam, fit_transforms
from models.mixing import mix, mix_numpy
from models.results.adapt.probe import F32, others_served
from models.results.speaker.probe import (
    PROFILE,
    by_voice,
    features,
    frozen_first,
    out,
    report,
    scored,
)
from models.warp import warp_features
from training.data import encode

# name: (label source, steps, rate, what is fitted)
FITS = {
    "pseudo in s10": ("pseudo", 10, 0.05, ("in",)),
    "oracle in s30": ("truth", 30, 0.05, ("in",)),
    "oracle lhuc s30": ("truth", 30, 0.05, ("lhuc",)),
    "oracle affine s30": ("truth", 30, 0.01, ("affine",)),
    "oracle in+lhuc s30": ("truth", 30, 0.05, ("in", "lhuc")),
    "pseudo lhuc s30": ("pseudo", 30, 0.05, ("lhuc",)),
    "pseudo in+lhuc s30": ("pseudo", 30, 0.05, ("in", "lhuc")),
}


def served(nets: Networks, first: DS2, feats: torch.Tensor, even: list[float]) -> F32:
    """The pair's output [T', V] for raw frames [T, F], as served."""
    cfg, factors = first.config.features, first.config.warp_factors or (1.0,)
    plain = mix_numpy([out(first, warp_features(feats, a, cfg)) for a in factors], even)
    return mix_numpy([plain, *others_served(nets, feats[None])], nets.weights)


@dataclass
class Adaptation:
    """A speaker's fitted parameters for the first network: per warped copy a per-bin gain
    and offset of its input (`in`, normalised units), a full affine map of the normalised
    input (`affine`), and per recurrent layer a per-unit amplitude 2 sigmoid(r) of its output
    (LHUC, Swietojanski and Renals 2014), shared by the copies."""

    scale: torch.Tensor  # [K, F]
    shift: torch.Tensor  # [K, F]
    matrix: torch.Tensor  # [K, F, F], added to the identity
    lhuc: list[torch.Tensor]  # per recurrent layer [H]

    @classmethod
    def zero(cls, k: int, bins: int, first: DS2) -> Adaptation:
        return cls(
            torch.zeros(k, bins),
            torch.zeros(k, bins),
            torch.zeros(k, bins, bins),
            [torch.zeros(r.hidden) for r in first.rnn_stack],
        )

    def params(self, kinds: tuple[str, ...]) -> list[torch.Tensor]:
        out = []
        if "in" in kinds:
            out += [self.scale, self.shift]
        if "affine" in kinds:
            out += [self.matrix, self.shift]
        if "lhuc" in kinds:
            out += self.lhuc
        return out

    def forward(self, first: DS2, raw: torch.Tensor, lengths: torch.Tensor, j: int) -> torch.Tensor:
        """The first network's log-probs of copy j's raw frames [B, T, F] through this."""
        mean, std = first.feat_mean.float(), first.feat_std.float()
        z = (raw - mean) / std
        z = z * (1 + self.scale[j]) + z @ self.matrix[j].T + self.shift[j]
        hooks = [
            r.register_forward_hook(lambda m, i, o, a=a: o * (2 * torch.sigmoid(a)))
            for r, a in zip(first.rnn_stack, self.lhuc, strict=True)
        ]
        try:
            log_probs: torch.Tensor = first(mean + z * std, lengths)[0]
            return log_probs
        finally:
            for h in hooks:
                h.remove()


def fit_ctc(
    nets: Networks,
    first: DS2,
    enrol: list[torch.Tensor],
    texts: list[str],
    steps: int,
    rate: float,
    kinds: tuple[str, ...],
) -> Adaptation:
    """The parameters `kinds` of an Adaptation that lower the CTC loss of the served mixture
    towards `texts`, over the enrolment as one padded batch."""
    cfg, factors = first.config.features, first.config.warp_factors or (1.0,)
    k = len(factors)
    lengths = torch.tensor([e.shape[0] for e in enrol])
    batch = torch.nn.utils.rnn.pad_sequence(enrol, batch_first=True)
    copies = [warp_features(batch, a, cfg) for a in factors]
    out_lengths = first.output_lengths(lengths)
    heard = [others_served(nets, e[None]) for e in enrol]  # per utterance, per other network
    others = [
        torch.nn.utils.rnn.pad_sequence([torch.from_numpy(h[m]) for h in heard], batch_first=True)
        for m in range(len(nets.models) - 1)
    ]
    labels = [torch.tensor(encode(t)) for t in texts]
    keep = [i for i, lab in enumerate(labels) if 0 < len(lab) <= int(out_lengths[i])]
    targets = torch.cat([labels[i] for i in keep])
    target_lengths = torch.tensor([len(labels[i]) for i in keep])
    ad = Adaptation.zero(k, batch.shape[-1], first)
    params = ad.params(kinds)
    adam = _Adam.start(params)
    even = [1.0 / k] * k
    for _ in range(steps):
        for p in params:
            p.requires_grad_(True)
        outs = [ad.forward(first, c, lengths, j) for j, c in enumerate(copies)]
        t = outs[0].shape[1]
        lp = mix([mix(outs, even), *(o[:, :t] for o in others)], nets.weights)
        loss = F.ctc_loss(
            lp[keep].transpose(0, 1),
            targets,
            out_lengths[keep],
            target_lengths,
            blank=0,
            reduction="sum",
            zero_infinity=True,
        ) / float(target_lengths.sum())
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p in params:
                p.requires_grad_(False)
            adam.update(params, grads, rate)
    return ad


def main() -> None:
    bundle, manifest, dest = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    enrol_n = int(sys.argv[4]) if len(sys.argv) > 4 else 16
    nets, first, even = frozen_first(bundle)
    fcfg, factors = first.config.features, first.config.warp_factors or (1.0,)

    decoder = load_decoder(
        bundle, Alphabet.from_list(first.config.alphabet), first.config.frame_seconds
    )
    names = ["served", "entropy", *FITS]
    variants: dict[str, list[F32]] = {n: [] for n in names}
    refs: list[str] = []
    pseudo_wer: list[tuple[str, str]] = []
    t0 = time.time()
    for voice, utts in by_voice(manifest).items():
        enrol = [features(u.audio, first) for u in utts[:enrol_n]]
        hyps = beam_texts(decoder, [served(nets, first, e, even) for e in enrol])
        pseudo_wer += [(u.text, h) for u, h in zip(utts[:enrol_n], hyps, strict=True)]
        truth = [u.text for u in utts[:enrol_n]]
        entropy = fit_transforms(first, torch.cat(enrol).numpy(), factors, PROFILE)
        profiles = {}
        for name, (source, steps, rate, kinds) in FITS.items():
            texts = hyps if source == "pseudo" else truth
            profiles[name] = fit_ctc(nets, first, enrol, texts, steps, rate, kinds)
        print(f"{voice}: enrolled in {time.time() - t0:.0f} s", flush=True)
        for u in utts[enrol_n:]:
            feats = features(u.audio, first)
            copies = [warp_features(feats, a, fcfg) for a in factors]
            others = others_served(nets, feats[None])

            def through(
                t: InputTransforms | None,
                copies: list[torch.Tensor] = copies,
                others: list[F32] = others,
            ) -> F32:
                outs = [out(first, t.apply(c, j) if t else c) for j, c in enumerate(copies)]
                return mix_numpy([mix_numpy(outs, even), *others], nets.weights)

            def adapted(
                ad: Adaptation, copies: list[torch.Tensor] = copies, others: list[F32] = others
            ) -> F32:
                n = torch.tensor([copies[0].shape[0]])
                with torch.no_grad():
                    outs = [
                        ad.forward(first, c[None], n, j)[0].numpy() for j, c in enumerate(copies)
                    ]
                return mix_numpy([mix_numpy(outs, even), *others], nets.weights)

            variants["served"].append(through(None))
            variants["entropy"].append(through(entropy))
            for name, ad in profiles.items():
                variants[name].append(adapted(ad))
            refs.append(u.text)
    print(f"{len(refs)} utterances scored, {time.time() - t0:.0f} s", flush=True)

    rows = scored(bundle, first, refs, variants)
    fits = {
        n: {"labels": s, "steps": st, "rate": r, "fitted": list(k)}
        for n, (s, st, r, k) in FITS.items()
    }
    labels = wer(pseudo_wer).rate
    report(
        dest,
        bundle,
        manifest,
        refs,
        rows,
        enrol_utterances=enrol_n,
        pseudo_label_wer=labels,
        fits=fits,
    )


if __name__ == "__main__":
    main()
