"""The trainer: a tiny model learns, a killed run resumes exactly where it stopped, and
data-parallel replicas stay identical and equal one process on the combined batch."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf
import torch
from torch.multiprocessing.spawn import spawn

import harken_cli
from decoder.lm import InterpolatedLM
from evaluation.tune_warp import write_warp
from models.bundle import (
    PUNCTUATION_FILES,
    BundleError,
    decoder_files,
    load_bundle,
    save_bundle,
)
from models.config import ModelConfig
from models.ds2 import DS2
from models.ensemble import add_member
from models.manifest import Utterance, read_manifest, write_manifest
from models.metrics import error_rates
from server.decoding import build_decoder
from tests.models.conftest import TINY_CONFIGS
from training.batching import BatchConfig
from training.cli import read_training_manifests
from training.data import Batch, collate
from training.export import export, lineage
from training.train import (
    REMOVED,
    TrainConfig,
    Trainer,
    ema_rate,
    training_precision,
    transcribe_greedy,
)

MODEL = TINY_CONFIGS["2d-gru"]
TEXTS = ["abc", "hello", "go on", "a bad cab", "no", "hi there", "ok", "see me"]
SAMPLE_RATE = 16000


def make_corpus(root: Path, n: int) -> list[Utterance]:
    """n short utterances: one 70 ms tone per character (its pitch set by the character) in
    light noise, so the transcript is learnable; written as WAVs plus a manifest."""
    rng = np.random.default_rng(0)
    utts = []
    for i in range(n):
        text = TEXTS[i % len(TEXTS)]
        t = np.arange(int(0.07 * SAMPLE_RATE)) / SAMPLE_RATE
        tones = [0.3 * np.sin(2 * np.pi * (200 + 60 * (ord(c) - 96)) * t) for c in text]
        silence = np.zeros(int(0.1 * SAMPLE_RATE))
        audio = np.concatenate([silence, *tones, silence])
        audio = (audio + 0.01 * rng.standard_normal(len(audio))).astype(np.float32)
        path = root / f"u{i}.wav"
        sf.write(path, audio, SAMPLE_RATE, subtype="PCM_16")
        utts.append(Utterance(path, text, len(audio) / SAMPLE_RATE, "tones"))
    write_manifest(root / "train.jsonl", utts)
    return read_manifest(root / "train.jsonl", check_audio=True)


def train_config(**overrides: object) -> TrainConfig:
    base: dict[str, object] = {
        "lr": 5e-3,
        "warmup_steps": 1,
        "epochs": 3,
        "precision": "fp32",
        "checkpoint_every": 2,
        "workers": 0,
        "augment": True,
        "norm_utterances": 8,
    }
    return TrainConfig(**{**base, **overrides})  # type: ignore[arg-type]


def parameters(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


class Recording(Trainer):
    """Remembers every step's loss; raises `Killed` instead of taking step `kill_at` + 1."""

    kill_at: int | None = None

    def train_step(self, batch: Batch) -> float:
        if self.kill_at is not None and self.progress.step >= self.kill_at:
            raise Killed(self.progress.step)
        loss = super().train_step(batch)
        self.losses = [*getattr(self, "losses", []), loss]
        return loss


class Killed(Exception):
    pass


def assert_the_checkpoint_keeps_its_head(
    kind: type[Trainer], cfg: TrainConfig, utts: list[Utterance], run: Path, refused: str
) -> None:
    """A run with an extra loss's training-only head (distillation's projection) stopped at
    12 steps: resuming without the head is refused with `refused` in the reason, not dropped;
    resuming with it carries on to step 14."""
    plain = train_config(epochs=100, max_steps=14, augment=False)
    with pytest.raises(ValueError, match=refused):
        Trainer(MODEL, plain, BatchConfig(batch_size=4), utts, [], run).fit()
    longer = dataclasses.replace(cfg, max_steps=14)
    assert kind(MODEL, longer, BatchConfig(batch_size=4), utts, [], run).fit().step == 14


@pytest.fixture(autouse=True)
def _one_thread() -> object:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_few_steps_lower_the_loss(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 4)
    cfg = train_config(epochs=100, max_steps=12, augment=False, checkpoint_every=100)
    trainer = Recording(MODEL, cfg, BatchConfig(batch_size=4), utts, [], tmp_path / "run")
    progress = trainer.fit()
    assert progress.step == 12 and len(trainer.losses) == 12
    assert all(np.isfinite(trainer.losses))
    # Every step sees the same four utterances, so the loss falls steadily.
    losses = trainer.losses
    assert losses[-1] < 0.7 * losses[0], losses
    assert np.mean(losses[6:]) < np.mean(losses[:6]), losses


class Overflowing(Recording):
    """Step `bad_step` (1-based) overflows: its features become infinite, as a bf16 forward
    pass that overflows would make them."""

    bad_step = 3

    def train_step(self, batch: Batch) -> float:
        if self.progress.step + 1 == self.bad_step:
            batch = batch._replace(feats=batch.feats * float("inf"))
        return super().train_step(batch)


def test_a_step_that_is_not_finite_is_skipped_and_named(tmp_path: Path) -> None:
    """One step with a non-finite loss must not reach the weights, the BatchNorm statistics
    or their average: through Adam it would make every weight NaN for the rest of the run."""
    utts = make_corpus(tmp_path, 4)
    cfg = train_config(epochs=100, max_steps=8, augment=False, checkpoint_every=100)
    trainer = Overflowing(MODEL, cfg, BatchConfig(batch_size=2), utts, [], tmp_path / "run")
    start = parameters(trainer)
    progress = trainer.fit()
    assert progress.step == 8 and progress.skipped_steps == 1
    assert np.isnan(trainer.losses[2]) and np.isfinite(np.delete(trainer.losses, 2)).all()
    after = parameters(trainer)
    assert all(torch.isfinite(v).all() for v in after.values() if v.is_floating_point())
    assert any(not torch.equal(start[k], after[k]) for k in start)  # the other steps trained
    assert all(torch.isfinite(v).all() for v in trainer.final_model.state_dict().values())
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    skips = [r for r in log if "skipped" in r]
    assert len(skips) == 1 and skips[0]["step"] == 3
    assert skips[0]["skipped"] == "non-finite loss" and len(skips[0]["audio"]) == 2
    assert set(skips[0]["audio"]) <= {str(u.audio) for u in utts}


class PausedOnce(Trainer):
    """Stops itself with SIGTSTP before step 3, as `kill -TSTP` would; a helper process sends
    SIGCONT `pause_s` later."""

    pause_s = 1.5

    def train_step(self, batch: Batch) -> float:
        if self.progress.step == 2:
            waker = f"import os, signal, time; time.sleep({self.pause_s}); os.kill({os.getpid()}, signal.SIGCONT)"
            subprocess.Popen([sys.executable, "-c", waker])
            os.kill(os.getpid(), signal.SIGTSTP)
        return super().train_step(batch)


@pytest.mark.skipif(not hasattr(signal, "SIGTSTP"), reason="needs POSIX job-control signals")
def test_a_paused_run_does_not_count_the_pause_as_training_time(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 4)
    cfg = train_config(epochs=100, max_steps=5, augment=False, checkpoint_every=100)
    trainer = PausedOnce(MODEL, cfg, BatchConfig(batch_size=4), utts, [], tmp_path / "run")
    start = time.perf_counter()
    progress = trainer.fit()
    wall = time.perf_counter() - start
    assert progress.step == 5
    assert wall >= PausedOnce.pause_s  # it really was stopped
    assert progress.train_seconds < wall - 0.8 * PausedOnce.pause_s, (wall, progress.train_seconds)
    assert signal.getsignal(signal.SIGTSTP) == signal.SIG_DFL  # the shell's ^Z works again after


def test_killed_and_resumed_run_ends_exactly_where_an_uninterrupted_one_does(
    tmp_path: Path,
) -> None:
    utts = make_corpus(tmp_path, 6)
    batches = BatchConfig(strategy="random", batch_size=2, sortagrad=True)
    cfg = train_config()  # 3 epochs of 3 steps; checkpoints at steps 2, 3 (epoch end), 4, 6...

    whole = Recording(MODEL, cfg, batches, utts, [], tmp_path / "whole")
    assert whole.fit().step == 9

    killed = Recording(MODEL, cfg, batches, utts, [], tmp_path / "killed")
    killed.kill_at = 5  # dies while taking step 6, in epoch 1; its last checkpoint is step 4
    with pytest.raises(Killed):
        killed.fit()
    resumed = Recording(MODEL, cfg, batches, utts, [], tmp_path / "killed")
    progress = resumed.fit()
    assert resumed.losses == whole.losses[4:]  # redid step 5, then went on as before
    assert (progress.step, progress.epoch) == (9, 3)
    want, got = parameters(whole), parameters(resumed)
    assert want.keys() == got.keys()
    for name in want:
        assert torch.equal(want[name], got[name]), name


def test_the_bundle_reports_the_latest_dev_score_even_across_a_resume(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 6)
    # 3 steps an epoch; dev scored at steps 2 and 4 and at the end of epoch 0 (step 3)
    cfg = train_config(epochs=100, max_steps=5, augment=False, checkpoint_every=2, dev_every=2)
    batches = BatchConfig(strategy="random", batch_size=2)
    killed = Recording(MODEL, cfg, batches, utts, utts[:2], tmp_path / "run")
    killed.kill_at = 4  # dies while taking step 5; its last checkpoint is step 4's
    with pytest.raises(Killed):
        killed.fit()
    resumed = Recording(MODEL, cfg, batches, utts, utts[:2], tmp_path / "run")
    assert resumed.fit().step == 5  # stops mid-epoch: no epoch-end score after step 4
    provenance = load_bundle(export(resumed, tmp_path / "bundle", "train.jsonl")).provenance
    assert provenance["dev_greedy_at_step"] == 4
    assert provenance["dev_greedy_cer"] is not None


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (["--ema-decay", "1.5"], "ema_decay must be in [0, 1)"),
        (["--batch-size", "0"], "batch_size and bins must be >= 1"),
        (["--rnn-hidden", "0"], "rnn_hidden and conv_channels >= 1"),
        (["--lr", "-1"], "lr and grad_clip must be > 0"),
        (
            ["--augment-preset", "heavy"],
            "augment_preset must be one of ['formant', 'full', 'light']",
        ),
        (["--precision", "fp8"], "precision must be one of auto, bf16, fp16, fp32"),
    ],
)
def test_bad_training_flags_are_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], reason: str
) -> None:
    make_corpus(tmp_path, 2)
    out = tmp_path / "run"
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--out", str(out), *flags]
    assert harken_cli.main(argv) == 2
    assert reason in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("flags", "precision"),
    [
        ({"avx2", "fma"}, "fp32"),  # AVX2 only: bf16 has no kernels, about 20x slower to train
        ({"avx2", "avx512_bf16"}, "bf16"),  # AMD Zen 4 and 5
        ({"avx2", "amx_bf16", "avx512_bf16"}, "bf16"),  # Intel with AMX
        (set(), "fp32"),  # flags unreadable (not Linux)
    ],
)
def test_auto_precision_trains_in_bf16_only_where_the_cpu_runs_it_natively(
    flags: set[str], precision: str
) -> None:
    assert training_precision("auto", "cpu", frozenset(flags)) == precision
    assert training_precision("bf16", "cpu", frozenset({"avx2"})) == "bf16"  # asked for: kept


def test_a_run_records_the_precision_it_trained_in(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 2)
    out = tmp_path / "run"
    cfg = train_config(precision="auto", epochs=1)
    trainer = Trainer(MODEL, cfg, BatchConfig(batch_size=2), utts, [], out)
    assert trainer.cfg.precision == training_precision("auto", "cpu")
    assert trainer.cfg.precision in ("bf16", "fp32")


# -- weight averaging -----------------------------------------------------------------------


class Snapshots(Recording):
    """Also keeps the weights (state dict) before the first step and after every step."""

    def train_step(self, batch: Batch) -> float:
        if not hasattr(self, "before"):
            self.before = parameters(self)
        loss = super().train_step(batch)
        self.after = [*getattr(self, "after", []), parameters(self)]
        return loss


def _by_hand(trainer: Snapshots, decay: float) -> Params:
    avg = {k: v.clone() for k, v in trainer.before.items()}
    for step, live in enumerate(trainer.after):
        d = ema_rate(decay, step)
        for k, v in live.items():
            avg[k] = d * avg[k] + (1 - d) * v if v.is_floating_point() else v.clone()
    return avg


def _outputs(model: torch.nn.Module) -> torch.Tensor:
    x = torch.from_numpy(np.random.default_rng(2).standard_normal((1, 30, 161)).astype(np.float32))
    with torch.no_grad():
        return model(x, torch.tensor([30]))[0]


def test_averaging_exports_and_scores_the_moving_average(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 6)
    dev = utts[:3]
    cfg = train_config(epochs=100, max_steps=6, augment=False, ema_decay=0.5, checkpoint_every=100)
    trainer = Snapshots(MODEL, cfg, BatchConfig(batch_size=3), utts, dev, tmp_path / "run")
    trainer.fit()
    assert trainer.ema is not None and len(trainer.after) == 6
    got = trainer.ema.state_dict()
    for name, want in _by_hand(trainer, 0.5).items():
        torch.testing.assert_close(got[name], want, atol=1e-6, rtol=0, msg=name)

    bundle = load_bundle(export(trainer, tmp_path / "bundle", "train.jsonl"))
    assert bundle.provenance["weight_averaging"] == "moving average, decay 0.5"
    average = load_bundle(save_bundle(trainer.ema, tmp_path / "average"))
    live = load_bundle(save_bundle(trainer.model, tmp_path / "live"))
    torch.testing.assert_close(_outputs(bundle), _outputs(average))
    assert not torch.allclose(_outputs(bundle), _outputs(live), atol=1e-4)
    assert trainer.progress.history[-1]["step"] == 6  # the limit met on an epoch's last batch
    # the dev score in the history, which the card reports, is the exported model's
    hyps = transcribe_greedy(bundle, dev, torch.device("cpu"))
    assert trainer.progress.history[-1]["cer"] == error_rates([u.text for u in dev], hyps)["cer"]


def test_a_resumed_run_keeps_its_average(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 6)
    batches = BatchConfig(strategy="random", batch_size=2)
    cfg = train_config(ema_decay=0.7)  # 3 epochs of 3 steps; checkpoints at 2, 3, 4, 6...
    whole = Recording(MODEL, cfg, batches, utts, [], tmp_path / "whole")
    whole.fit()
    killed = Recording(MODEL, cfg, batches, utts, [], tmp_path / "killed")
    killed.kill_at = 5
    with pytest.raises(Killed):
        killed.fit()
    resumed = Recording(MODEL, cfg, batches, utts, [], tmp_path / "killed")
    resumed.fit()
    assert whole.ema is not None and resumed.ema is not None
    want, got = whole.ema.state_dict(), resumed.ema.state_dict()
    for name in want:
        assert torch.equal(want[name], got[name]), name


def test_a_killed_run_exports_its_checkpoint_without_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    utts = make_corpus(tmp_path, 6)
    cfg = train_config(epochs=100, augment=False, checkpoint_every=2, ema_decay=0.5)
    killed = Recording(
        MODEL, cfg, BatchConfig(strategy="random", batch_size=2), utts, [], tmp_path / "run"
    )
    killed.kill_at = 4  # 3 steps an epoch: dies in epoch 1, after step 4's checkpoint
    with pytest.raises(Killed):
        killed.fit()
    assert killed.ema is not None
    checkpoint = (tmp_path / "run" / "checkpoint.pt").read_bytes()
    net = tmp_path / "net.json"
    net.write_text(json.dumps(MODEL.to_dict()))
    argv = ["train", "--train", str(tmp_path / "train.jsonl"), "--model-config", str(net)]
    argv += ["--ema-decay", "0.5", "--export-only", "true", "--export", str(tmp_path / "bundle")]

    assert harken_cli.main([*argv, "--out", str(tmp_path / "run")]) == 0
    bundle = load_bundle(tmp_path / "bundle")
    assert bundle.provenance["steps"] == 4
    want = load_bundle(save_bundle(killed.ema, tmp_path / "average"))
    torch.testing.assert_close(_outputs(bundle), _outputs(want))
    assert (tmp_path / "run" / "checkpoint.pt").read_bytes() == checkpoint  # nothing trained

    assert harken_cli.main([*argv, "--out", str(tmp_path / "nothing")]) == 2
    assert "no checkpoint in" in capsys.readouterr().err

    # without --ema-decay it would export the live weights, not the average: refused, saying how
    plain = [a for a in argv if a not in ("--ema-decay", "0.5")]
    assert harken_cli.main([*plain, "--out", str(tmp_path / "run")]) == 2
    assert "with --ema-decay 0.5" in capsys.readouterr().err
    assert (tmp_path / "run" / "checkpoint.pt").read_bytes() == checkpoint


# -- data parallel ------------------------------------------------------------------------------

# (name, global batch size, steps): 8 utterances in batches of 4 split 2 + 2 over the replicas,
# for 3 steps across an epoch boundary; in batches of 5 the first splits 3 + 2.
RUNS = [("even", 4, 3), ("uneven", 5, 1)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ddp_config(steps: int) -> TrainConfig:
    # SGD, not AdamW: Adam's first steps move every weight by about lr * sign(gradient), so
    # gradients within rounding of zero would turn 1e-9 differences into 1e-4 ones.
    return train_config(epochs=100, max_steps=steps, checkpoint_every=1000, optimizer="sgd")


def _replica(rank: int, world: int, run: tuple[str, int, int], port: int, root: str) -> None:
    """One torchrun-style process: the environment torchrun would set, then the trainer."""
    torch.set_num_threads(1)
    utts = read_manifest(Path(root) / "train.jsonl")
    name, batch_size, steps = run
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world),
    )
    out = Path(root) / name
    trainer = Trainer(MODEL, _ddp_config(steps), BatchConfig(batch_size=batch_size), utts, [], out)
    trainer.fit()
    out.mkdir(parents=True, exist_ok=True)  # only rank 0 writes the run directory
    tmp = out / f"rank{rank}.tmp"
    torch.save(parameters(trainer), tmp)
    os.replace(tmp, out / f"rank{rank}.pt")  # whole or absent: the parent polls for it
    torch.distributed.barrier()  # as harken train does: all ranks done before teardown
    torch.distributed.destroy_process_group()


REPLICA_DEADLINE_S = 600.0
TEARDOWN_GRACE_S = 60.0


def _train_replicas(root: Path, run: tuple[str, int, int]) -> None:
    """Train one run of RUNS on 2 gloo processes and wait for both ranks' parameters.

    gloo's teardown can hang now and then after all the work is done (pytorch/pytorch#75097;
    it hung here once with both results saved). What this test checks is then on disk, so
    a teardown still running TEARDOWN_GRACE_S after both ranks saved is ended, with a
    warning, rather than holding CI until its limit; anything else that stalls fails."""
    ctx = spawn(_replica, (2, run, _free_port(), str(root)), nprocs=2, join=False)
    results = [root / run[0] / f"rank{r}.pt" for r in range(2)]
    start = time.monotonic()
    saved_at: float | None = None
    while not ctx.join(timeout=1):
        now = time.monotonic()
        if saved_at is None and all(p.exists() for p in results):
            saved_at = now
        hung_teardown = saved_at is not None and now - saved_at > TEARDOWN_GRACE_S
        if hung_teardown or now - start > REPLICA_DEADLINE_S:
            for proc in ctx.processes:
                proc.kill()
                proc.join()
            if not hung_teardown:
                pytest.fail(f"the {run[0]} replicas did not finish in {REPLICA_DEADLINE_S:.0f} s")
            warnings.warn(
                f"{run[0]}: gloo teardown hung after both ranks saved; ended it", stacklevel=2
            )
            return


Params = dict[str, torch.Tensor]


@pytest.fixture(scope="module")
def data_parallel(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, tuple[list[Params], Params]]:
    """Per run of RUNS: the parameters of the 2 gloo replicas, and of one process that trains
    on the same global batches."""
    root = tmp_path_factory.mktemp("ddp")
    utts = make_corpus(root, 8)
    for run in RUNS:
        _train_replicas(root, run)
    out = {}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    for name, batch_size, steps in RUNS:
        replicas = [torch.load(root / name / f"rank{r}.pt") for r in range(2)]
        single = Trainer(
            MODEL,
            _ddp_config(steps),
            BatchConfig(batch_size=batch_size),
            utts,
            [],
            root / f"{name}-single",
        )
        initial = parameters(single)
        single.fit()
        trained = parameters(single)
        assert any(  # the comparison below is not vacuous: training moved the weights
            (trained[k] - initial[k]).abs().max() > 1e-4 for k in trained if "weight" in k
        )
        out[name] = (replicas, trained)
    torch.set_num_threads(threads)
    return out


def assert_close(a: Params, b: Params, atol: float) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=atol, rtol=0, msg=name)


@pytest.mark.slow
@pytest.mark.parametrize("run", ["even", "uneven"])
def test_two_gloo_replicas_stay_identical_and_match_one_process(
    data_parallel: dict[str, tuple[list[Params], Params]], run: str
) -> None:
    replicas, single = data_parallel[run]
    for name in replicas[0]:
        assert torch.equal(replicas[0][name], replicas[1][name]), name
    assert_close(single, replicas[0], atol=1e-5)


def assert_starts_as_bundle(tuned: Trainer, bundle: Path) -> None:
    """The trainer's model, before any step, computes what the bundle computes."""
    x = torch.from_numpy(np.random.default_rng(1).standard_normal((2, 40, 161)).astype(np.float32))
    lengths = torch.tensor([40, 22])
    with torch.no_grad():
        want, _ = load_bundle(bundle)(x, lengths)
        got, _ = tuned.model.eval()(x, lengths)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def trained_bundle(tmp_path: Path, utts: list[Utterance], steps: int) -> Path:
    """MODEL trained a few steps from scratch and exported: the bundle a fine-tuning test starts from."""
    cfg = train_config(epochs=100, max_steps=steps, augment=False, checkpoint_every=100)
    base = Trainer(MODEL, cfg, BatchConfig(batch_size=3), utts, [], tmp_path / "base")
    base.fit()
    return export(base, tmp_path / "bundle", "train.jsonl")


def fine_tuned(tmp_path: Path, model: ModelConfig, bundle: Path, utts: list[Utterance]) -> DS2:
    """A run of another shape from the bundle: it starts as the bundle's function, trains, and
    returns the bundle it exports."""
    tune_cfg = train_config(init_from=str(bundle), calibration_utterances=6, augment=False)
    tuned = Trainer(model, tune_cfg, BatchConfig(batch_size=3), utts, [], tmp_path / "tuned")
    tuned.init_from_bundle(bundle)
    assert_starts_as_bundle(tuned, bundle)
    tuned.fit()
    return load_bundle(export(tuned, tmp_path / "tuned_bundle", "train.jsonl"))


def test_fine_tuning_starts_from_the_bundle(tmp_path: Path) -> None:
    utts = make_corpus(tmp_path, 6)
    bundle = trained_bundle(tmp_path, utts, steps=4)
    write_warp(bundle, (0.8, 1.0), 50)  # inference-only settings never block a fine-tune
    tuned = Trainer(
        MODEL,
        train_config(init_from=str(bundle), calibration_utterances=6, augment=False),
        BatchConfig(batch_size=3),
        utts,
        [],
        tmp_path / "tuned",
    )
    tuned.init_from_bundle(bundle)
    assert_starts_as_bundle(tuned, bundle)
    tuned.fit()
    provenance = load_bundle(export(tuned, tmp_path / "tuned_bundle", "train.jsonl")).provenance
    assert provenance["fine_tuned_from"] == str(bundle)
    stages: Any = provenance["earlier_stages"]
    assert [s["steps"] for s in stages] == [4]
    assert provenance["total_train_time_hours"] == pytest.approx(
        provenance["train_time_hours"] + stages[0]["train_time_hours"]
    )
    assert provenance["steps"] == 6 and provenance["augmentation"] == "none"  # 3 epochs x 2
    # the fine-tuned model is another model: its warp is tuned afresh, not inherited
    assert load_bundle(tmp_path / "tuned_bundle").config.warp_factors == ()

    deeper = dataclasses.replace(MODEL, rnn_layers=3)
    narrower = dataclasses.replace(MODEL, rnn_hidden=MODEL.rnn_hidden // 2)
    shorter = dataclasses.replace(MODEL, row_conv_tau=MODEL.row_conv_tau - 1)
    for other, field in (
        (deeper, "rnn_layers"),
        (narrower, "rnn_hidden"),
        (shorter, "row_conv_tau"),
    ):
        wrong = Trainer(
            other,
            train_config(augment=False),
            BatchConfig(batch_size=3),
            utts,
            [],
            tmp_path / "wrong",
        )
        with pytest.raises(BundleError, match=field):
            wrong.init_from_bundle(bundle)


def test_a_fine_tune_exports_the_lm_and_search_settings_of_its_bundle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundle without an LM exports without one, and its card says so. `--init-from` a
    bundle with one: the export carries its decoder.json and every file that names (the
    general LM mixed in, and its licence), says so, and is served with them. An ensemble's
    search settings, tuned for its networks together, give way to those its own network
    keeps for itself alone: the export is that network alone."""
    default = Path(__file__).resolve().parents[2] / "models" / "default"
    if not (default / "decoder.json").is_file():
        pytest.skip("models/default has no LM yet")
    utts = make_corpus(tmp_path, 6)
    bundle = trained_bundle(tmp_path, utts, steps=2)
    assert "- language model: none" in (bundle / "CARD.md").read_text()
    names = decoder_files(default)
    assert {"lm.binary", "general.binary", "general.LICENSE"} <= set(names)
    for name in names:
        shutil.copy(default / name, bundle / name)
    punctuator = [n for n in PUNCTUATION_FILES if (default / n).is_file()]
    for name in punctuator:  # the punctuator travels with the LM
        shutil.copy(default / name, bundle / name)
    add_member(bundle, save_bundle(DS2(MODEL).eval(), tmp_path / "member"), 0.4, "member")
    pair = json.loads((default / "decoder.json").read_text())
    pair["config"].update(alpha=0.5, blank_penalty=2.0)  # as tune-lm would tune the pair
    (bundle / "decoder.json").write_text(json.dumps(pair))

    cfg = train_config(init_from=str(bundle), calibration_utterances=6, augment=False)
    tuned = Trainer(MODEL, cfg, BatchConfig(batch_size=3), utts, [], tmp_path / "tuned")
    tuned.fit()
    out = export(tuned, tmp_path / "tuned_bundle", "train.jsonl")

    assert decoder_files(out) == names
    for name in [*names[1:], *punctuator]:
        assert (out / name).read_bytes() == (default / name).read_bytes(), name
    assert json.loads((out / "decoder.json").read_text()) == json.loads(
        (default / "decoder.json").read_text()
    )  # the own network's alpha and blank penalty, not the pair's
    said = capsys.readouterr().out
    assert f"general.LICENSE, {', '.join(punctuator)}" in said or not punctuator
    assert f"carried over from {bundle}" in said and "blank_penalty 1.25" in said
    assert "carried over" in str(load_bundle(out).provenance["language_model"])
    assert (
        "- language model: lm.binary, unigrams.txt, general.binary" in (out / "CARD.md").read_text()
    )
    lm = build_decoder(out, load_bundle(out).config).lm  # type: ignore[attr-defined]
    assert isinstance(lm, InterpolatedLM)


def test_an_augmented_fine_tune_starts_from_the_bundle_on_the_batches_it_trains_on(
    tmp_path: Path,
) -> None:
    """In training mode BatchNorm normalises by each batch's own statistics, and its running
    averages follow them. Unfolded with those of the run's augmented examples, the first
    steps compute what the bundle computes; unfolded with clean audio's, they did not, and
    150 steps at a rate of 1e-12 cost gpu4 6.6 points of dev CER."""
    utts = make_corpus(tmp_path, 6)
    bundle = trained_bundle(tmp_path, utts, steps=20)
    tune_cfg = train_config(init_from=str(bundle), calibration_utterances=6)
    tuned = Trainer(MODEL, tune_cfg, BatchConfig(batch_size=3), utts, [], tmp_path / "tuned")
    tuned.init_from_bundle(bundle)
    # a batch of every calibration utterance, augmented as in the first epoch: its
    # statistics are exactly the calibration's
    batch = collate([tuned.train_set[i] for i in range(len(utts))])
    with torch.no_grad():
        want, n = load_bundle(bundle)(batch.feats, batch.feat_lengths)
        got, _ = tuned.model.train()(batch.feats, batch.feat_lengths)
    mask = torch.arange(want.shape[1])[None, :] < n[:, None]
    torch.testing.assert_close(got[mask], want[mask], atol=1e-3, rtol=0)


def test_fine_tuning_can_widen_the_bundle(tmp_path: Path) -> None:
    """A run with more recurrent units starts from a narrower bundle as the same function,
    trains, and exports a bundle of its own width."""
    utts = make_corpus(tmp_path, 6)
    bundle = trained_bundle(tmp_path, utts, steps=3)
    wide = dataclasses.replace(MODEL, rnn_hidden=MODEL.rnn_hidden * 2)
    out = fine_tuned(tmp_path, wide, bundle, utts)
    assert out.config.rnn_hidden == MODEL.rnn_hidden * 2
    assert out.provenance["fine_tuned_from"] == str(bundle)


def test_fine_tuning_can_switch_on_the_lifter(tmp_path: Path) -> None:
    """A bundle trained on raw spectra fine-tunes with liftered features: the run measures
    the new features' normalisation, exports them in its bundle, and a change of feature
    size is refused with the reason."""
    utts = make_corpus(tmp_path, 6)
    bundle = trained_bundle(tmp_path, utts, steps=2)
    lifted = dataclasses.replace(
        MODEL, features=dataclasses.replace(MODEL.features, cepstral_lifter=48)
    )
    tune_cfg = train_config(
        init_from=str(bundle), calibration_utterances=6, augment=False, max_steps=4
    )
    tuned = Trainer(lifted, tune_cfg, BatchConfig(batch_size=3), utts, [], tmp_path / "tuned")
    tuned.init_from_bundle(bundle)
    assert not torch.allclose(tuned.model.feat_mean, load_bundle(bundle).feat_mean)
    tuned.fit()
    out = load_bundle(export(tuned, tmp_path / "tuned_bundle", "train.jsonl"))
    assert out.config.features.cepstral_lifter == 48

    wider = dataclasses.replace(MODEL, features=dataclasses.replace(MODEL.features, window_ms=25.0))
    wrong = Trainer(
        wider, train_config(augment=False), BatchConfig(batch_size=3), utts, [], tmp_path / "wrong"
    )
    with pytest.raises(BundleError, match="feature bins"):
        wrong.init_from_bundle(bundle)


def test_a_chain_of_fine_tunes_keeps_every_stage() -> None:
    """Bundles from before stages were kept name one earlier stage as base_* keys."""
    legacy = {
        "steps": 3999,
        "train_time_hours": 2.0,
        "base_steps": 2539,
        "base_train_time_hours": 1.36,
    }
    stages = lineage(legacy)
    assert [(s["steps"], s["train_time_hours"]) for s in stages] == [(2539, 1.36), (3999, 2.0)]
    newer = {"steps": 10, "train_time_hours": 0.5, "earlier_stages": stages}
    assert [s["steps"] for s in lineage(newer)] == [2539, 3999, 10]
    assert lineage({"steps": 5})[0]["train_time_hours"] == "not recorded"
    # which stages learnt from a teacher shows in the chain too
    teacher = "whisper-tiny.en, cosine on the row-conv output, weight 0.5"
    assert lineage({"steps": 5, "distillation": teacher})[-1]["distillation"] == teacher
    assert lineage({"steps": 5})[-1]["distillation"] == "none"


def test_a_checkpoint_from_before_the_consolidation_resumes_unless_a_removed_technique_was_on(
    tmp_path: Path,
) -> None:
    """A checkpoint's train_config from before the removed techniques went (REMOVED) resumes
    where each holds its neutral value; one that was on is refused, naming it and the commit
    that still has its code, rather than silently continuing without it."""
    utts = make_corpus(tmp_path, 6)
    cfg = train_config(epochs=100, max_steps=2, augment=False, checkpoint_every=1)
    run = tmp_path / "run"
    Trainer(MODEL, cfg, BatchConfig(batch_size=3), utts, [], run).fit()
    path = run / "checkpoint.pt"
    state = torch.load(path, weights_only=False)
    neutral = {k: v for k, (v, _) in REMOVED.items() if v is not None}
    old = {**state["train_config"], **neutral, "phone_layer": 1, "phone_head_lr": 30.0}
    state["train_config"] = old
    state["optimizer"]["param_groups"][0]["rate_scale"] = 1.0  # the old trainer's groups
    state.update(projection=None, adversary=None, adversary_voices=None, phones=None)
    torch.save(state, path)
    assert TrainConfig.from_dict(old) == TrainConfig.from_dict(state["train_config"])
    assert TrainConfig.from_dict(old).max_steps == 2
    longer = dataclasses.replace(cfg, max_steps=3)
    assert Trainer(MODEL, longer, BatchConfig(batch_size=3), utts, [], run).fit().step == 3

    for removed, on in (("dropout", 0.1), ("soft_teacher", "pair"), ("row_conv_lr", 10.0)):
        state["train_config"] = {**old, removed: on}
        torch.save(state, path)
        resumed = Trainer(MODEL, longer, BatchConfig(batch_size=3), utts, [], run)
        with pytest.raises(ValueError, match=f"{removed}=.* no longer has .* 13cc3b3"):
            resumed.resume()
        with pytest.raises(ValueError, match=removed):
            TrainConfig.from_dict(state["train_config"])
    state.update(train_config=old, phones={"weight": torch.zeros(1)})
    torch.save(state, path)
    with pytest.raises(ValueError, match=r"training-only heads \(phones\)"):
        Trainer(MODEL, longer, BatchConfig(batch_size=3), utts, [], run).resume()
    with pytest.raises(ValueError, match="fields this trainer lacks: \\['typo'\\]"):
        TrainConfig.from_dict({"typo": 1})


def test_several_training_manifests_join_with_repeat_counts(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = make_corpus(tmp_path / "a", 3), make_corpus(tmp_path / "b", 2)
    joined = read_training_manifests(
        [str(tmp_path / "a/train.jsonl"), f"{tmp_path}/b/train.jsonl*3"]
    )
    assert [u.audio for u in joined] == [u.audio for u in a + b * 3]
    with pytest.raises(ValueError, match="repeat count"):
        read_training_manifests([f"{tmp_path}/b/train.jsonl*0"])


def test_a_bad_repeat_count_is_refused_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_corpus(tmp_path, 2)
    argv = ["train", "--train", f"{tmp_path}/train.jsonl*x", "--out", str(tmp_path / "run")]
    assert harken_cli.main(argv) == 2
    assert "the repeat count after '*' must be 1 or more" in capsys.readouterr().err


def _scored_every_step(root: Path, *flags: str) -> list[str]:
    """`harken train` argv for the tiny model on ROOT's corpus, dev scored at every step."""
    net = root / "net.json"
    net.write_text(json.dumps(MODEL.to_dict()))
    argv = ["train", "--train", str(root / "train.jsonl"), "--dev", str(root / "dev.jsonl")]
    argv += ["--model-config", str(net), "--out", str(root / "run"), "--device", "cpu"]
    argv += ["--epochs", "100", "--dev-every", "1", "--strategy", "random", "--workers", "0"]
    return [*argv, "--threads", "1", "--augment", "false", *flags]


def test_a_run_keeps_the_weights_of_its_best_dev_score_beside_its_latest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Dev scores that fall, then rise (scripted, so the test does not depend on how a tiny
    model learns): `OUT/best` holds the weights that scored lowest, `OUT/bundle` the last."""
    utts = make_corpus(tmp_path, 6)  # 3 steps an epoch at batch 2; scored at every step and
    write_manifest(tmp_path / "dev.jsonl", utts[:2])  # at each epoch's end: 8 scores in all
    script = iter([0.9, 0.4, 0.7, 0.7, 0.6, 0.5, 0.8, 0.8])
    scored: list[Path] = []

    def scripted(self: Trainer) -> dict[str, float]:
        scored.append(save_bundle(self.final_model, tmp_path / f"scored{len(scored)}"))
        cer = next(script)
        return {"wer": cer, "cer": cer}

    monkeypatch.setattr(Trainer, "evaluate", scripted)
    argv = _scored_every_step(tmp_path, "--max-steps", "6", "--batch-size", "2")
    assert harken_cli.main(argv) == 0
    assert len(scored) == 8

    best, latest = tmp_path / "run" / "best", tmp_path / "run" / "bundle"
    provenance = load_bundle(best).provenance
    assert (provenance["dev_greedy_cer"], provenance["dev_greedy_at_step"]) == (0.4, 2)
    assert load_bundle(latest).provenance["steps"] == 6
    # the weights kept are the ones scored 0.4 (the second score), not the later 0.5's
    weights = (best / "model.safetensors").read_bytes()
    assert weights == (scored[1] / "model.safetensors").read_bytes()
    assert weights != (scored[5] / "model.safetensors").read_bytes()
    assert weights != (latest / "model.safetensors").read_bytes()


def test_a_resumed_run_does_not_replace_a_better_best_kept_after_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Killed after keeping a best that its last checkpoint does not know of: the resumed run
    scores the redone step worse than that best, and `OUT/best` stays."""
    utts = make_corpus(tmp_path, 6)  # batch 1: 6 steps an epoch, so no epoch ends here
    write_manifest(tmp_path / "dev.jsonl", utts[:2])
    script = iter([0.9, 0.8, 0.3, 0.5, 0.6, 0.7])  # steps 1, 2, 3 | resumed: 3, 4, 5
    monkeypatch.setattr(
        Trainer, "evaluate", lambda self: dict.fromkeys(("wer", "cer"), next(script))
    )
    argv = _scored_every_step(tmp_path, "--max-steps", "5", "--batch-size", "1")
    argv += ["--checkpoint-every", "2"]
    step = Trainer.train_step

    def dies_at_step_4(self: Trainer, batch: Batch) -> float:
        if self.progress.step >= 3:
            raise Killed(self.progress.step)
        return step(self, batch)

    monkeypatch.setattr(Trainer, "train_step", dies_at_step_4)
    with pytest.raises(Killed):
        harken_cli.main(argv)  # kept best 0.3 at step 3; its checkpoint is step 2's (best 0.8)
    best = tmp_path / "run" / "best"
    kept = (best / "model.safetensors").read_bytes()
    monkeypatch.setattr(Trainer, "train_step", step)
    assert harken_cli.main(argv) == 0  # redoes step 3 and scores it 0.5: better than 0.8 only
    provenance = load_bundle(best).provenance
    assert (provenance["dev_greedy_cer"], provenance["dev_greedy_at_step"]) == (0.3, 3)
    assert (best / "model.safetensors").read_bytes() == kept
