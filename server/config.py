"""ServerConfig: every knob of `harken serve`, read once from the command line and environment.

Precedence: command-line flag, then `HARKEN_<FIELD>` in the environment, then the default.
Nothing else reads the environment; the app gets a finished, validated `ServerConfig`.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models import DEFAULT_BUNDLE as BUNDLED
from models.config import parse_bool
from server.dispatch import POLICIES, DispatchConfig

if TYPE_CHECKING:
    from models.input_adaptation import ProfileSchedule

DEVICES = ("cpu", "cuda")
DTYPES = ("auto", "fp32", "bf16", "fp16", "int8")
DECODERS = ("beam", "greedy")
WARMUPS = ("background", "all", "first")
DEFAULT_BUNDLE = str(BUNDLED)  # the default model shipped in models/default
ENV_PREFIX = "HARKEN_"


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"  # interface to listen on
    port: int = 8000  # TCP port; 0 picks a free one
    bundle: str = DEFAULT_BUNDLE  # model bundle directory (models/default by default)
    device: str = "cpu"  # cpu | cuda: where the acoustic model runs
    # auto | fp32 | bf16 | fp16 | int8: model precision. auto: fp16 on CUDA (DS2 §7.2); on a
    # CPU what was measured fastest for its kind (server/precision.py): int8 recurrent layers
    # with AMX, on AMD Zen 5 and on AVX2 CPUs without bf16 units, bf16 on AMD Zen 4, else fp32
    dtype: str = "auto"
    policy: str = "eager"  # batch dispatch policy: eager | timeout | none
    max_batch: int = 32  # most streams in one model step
    # background | all | first: the model step shapes start-up runs before /readyz answers
    # (server/runner.py: a new shape costs a compile and a buffer). background: a stream's
    # own, then while no stream is open every other one batching, backlogs and last steps
    # can make (a stream that opens meanwhile waits behind one step at most; under load a
    # shape not yet warmed compiles when first met); all: every one before ready (what load
    # tests start); first: a stream's own only (`harken transcribe`)
    warmup: str = "background"
    max_delay_ms: float = 5.0  # timeout policy: longest wait for a fuller batch
    max_streams: int = 64  # concurrent streams (WebSocket + REST); more get 1013 / 503
    chunk_ms: int = 160  # audio per model step for a live stream (a multiple of the hop)
    max_chunk_ms: int = 2560  # most audio one stream sends through one step (backlog, files)
    # while the model lags (chunks wait on average more than load_wait_ms for their step),
    # live streams step in chunks of load_chunk_ms instead: fewer, bigger steps cut what every
    # step costs besides the model (dispatch, decoder calls, partials), which is what bounds
    # the streams 2 cores hold (experiments/loadtest/ceiling). It is kept within chunk_ms..
    # max_chunk_ms; 0 (or anything <= chunk_ms) keeps chunk_ms at any load.
    load_chunk_ms: int = 320
    load_wait_ms: float = 5.0
    # while the model lags (the same signal), the beam search keeps beams within this much of
    # the best instead of decoder.json's score_threshold: the decoders share the cores with
    # the model, and a narrower search sheds their work before every stream's latency grows
    # (experiments/real_people: 60 streams on 2 cores). Only a threshold below the bundle's
    # narrows anything; 0 keeps the bundle's at any load.
    load_beam_threshold: float = 10.0
    vosk_endpoint_ms: int = 800  # /vosk: trailing silence that ends a result (0: only at eof)
    decoder_workers: int = 2  # decoder workers; one stream always on the same one
    decoder_processes: bool = True  # each worker decodes in its own process (no GIL contention)
    # intra-op threads of the model step; 0 keeps torch's default. One is fastest for the
    # small steps of live streams on CPU (a flush: 8.9 ms with one, 12.7 with two, on 2 cores)
    # and leaves the other cores to the decoder processes.
    torch_threads: int = 1
    # the bundle's speaker adaptation (models/warp.py), when it has one: off saves the extra
    # model rows each new stream runs for its first seconds, at the accuracy it buys
    speaker_adaptation: bool = True
    # an ensemble bundle's every network (models/ensemble.py); false: its own network only,
    # with the search settings kept for it alone: half a pair's model steps, for about a
    # point of WER on models/default (RESULTS.md)
    ensemble: bool = True
    # files (REST, `harken transcribe`) heard through input transforms fitted to each one
    # first (models/input_adaptation.py) unless a request says otherwise (`adapt_input`):
    # about a point of WER on unheard voices, for compute before a file's first step that
    # grows with its length (experiments/adapt.md); live streams never are, since the fit
    # needs the whole recording. Off by default for that cost. On, start-up also warms the
    # sizes adapted files step at, so it takes longer
    adapt_files: bool = False
    # the fit's gradient steps and their rate (models/input_adaptation.py AdaptConfig): fewer
    # steps at a higher rate cost less and keep most of the gain (2 at 0.1: about two thirds
    # of it for half the cost; experiments/adapt.md)
    adapt_steps: int = 5
    adapt_rate: float = 0.05
    # live streams (/v1/stream) fit a profile of their speaker from their own audio and hear
    # the rest through it, unless a stream's config says otherwise (`adapt_speaker`): unheard
    # voices read better once it is fitted, for fits on a second thread at profile_first_s,
    # twice that, ... up to profile_max_s of the stream. Off by default: the fits cost CPU,
    # and with many new speakers a minute they queue and add latency (experiments/speaker.md)
    adapt_speakers: bool = False
    profile_first_s: float = 15.0  # the stream's audio its first profile is fitted on
    profile_max_s: float = 60.0  # ... its last (refitted each time the audio has doubled)
    decoder: str = "beam"  # beam (with the bundle's LM when it has one) | greedy
    # plain words in every transcript, even where the bundle has a punctuator
    # (punctuation.json): written text is what REST and Realtime clients get by default
    # (server/written.py), at some 0.1 ms of CPU a word on the event loop
    no_punctuation: bool = False
    beam_size: int = 0  # beam width; 0 keeps the bundle's tuned decoder.json value
    # how far below the best a beam may score and stay (0 keeps decoder.json's): lower is
    # faster and loses words (experiments/beam.md)
    beam_threshold: float = 0.0
    # taken off every frame's blank log-prob before the search (decoder.json's blank_penalty):
    # a penalty keeps characters that the network gives unsure frames to the blank on unheard
    # voices (experiments/blank.md); higher keeps more, and inserts more. Negative keeps the
    # bundle's; 0 turns it off
    blank_penalty: float = -1.0
    # the share of a partial word's best unigram score it pays before it ends (decoder.json's
    # lookahead; experiments/lookahead.md): so the beam keeps a likely word before its end.
    # Negative keeps the bundle's; 0 turns it off; at most 1
    lookahead: float = -1.0
    max_upload_mb: float = 25.0  # REST upload limit (OpenAI's is 25 MB); larger gets 413
    max_stream_s: float = 600.0  # longest audio one live stream may carry, in seconds
    # longest file (REST, `harken transcribe`), in seconds: a file is decoded and heard a
    # block at a time (server/recording.py), so its audio is never held whole
    max_file_s: float = 14400.0
    idle_timeout_s: float = 30.0  # a WebSocket silent this long is closed
    # a WebSocket client that leaves results unread this long, with more than the 64 KiB
    # the server buffers per connection waiting, is dropped (close 1008, slow_reader)
    send_timeout_s: float = 10.0
    # seconds between handing freed heap memory back to the system (glibc's malloc_trim;
    # server/memory.py); 0 leaves it with the allocator, whose resident size then creeps up
    malloc_trim_s: float = 10.0
    shutdown_grace_s: float = 10.0  # on shutdown, how long streams in flight may finish
    auth_tokens: frozenset[str] = field(default_factory=frozenset)  # bearer tokens; none = open
    log_level: str = "info"  # uvicorn log level

    def __post_init__(self) -> None:
        _check(self.device in DEVICES, f"device must be one of {DEVICES}, got {self.device!r}")
        _check(self.dtype in DTYPES, f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        _check(
            not (self.dtype == "int8" and self.device != "cpu"),
            "dtype int8 runs on the CPU only (use fp16 on CUDA)",
        )
        _check(self.policy in POLICIES, f"policy must be one of {POLICIES}, got {self.policy!r}")
        _check(0 <= self.port <= 65535, f"port must be in 0..65535, got {self.port}")
        _check(self.warmup in WARMUPS, f"warmup must be one of {WARMUPS}, got {self.warmup!r}")
        _check(self.decoder in DECODERS, f"decoder must be one of {DECODERS}, got {self.decoder!r}")
        _check(self.beam_size >= 0, f"beam_size must be >= 0, got {self.beam_size}")
        _check(self.beam_threshold >= 0, f"beam_threshold must be >= 0, got {self.beam_threshold}")
        _check(
            math.isfinite(self.load_beam_threshold) and self.load_beam_threshold >= 0,
            f"load_beam_threshold must be a number >= 0 (0: off), got {self.load_beam_threshold}",
        )
        _check(
            math.isfinite(self.blank_penalty),
            f"blank_penalty must be a number, got {self.blank_penalty}",
        )
        _check(self.lookahead <= 1, f"lookahead must be a number at most 1, got {self.lookahead}")
        for name in ("max_batch", "max_streams", "decoder_workers"):
            _check(getattr(self, name) >= 1, f"{name} must be >= 1, got {getattr(self, name)}")
        _check(
            self.chunk_ms >= 10 and self.chunk_ms % 10 == 0,
            f"chunk_ms must be a positive multiple of the 10 ms hop, got {self.chunk_ms}",
        )
        _check(
            self.max_chunk_ms >= self.chunk_ms,
            f"max_chunk_ms ({self.max_chunk_ms}) must be >= chunk_ms ({self.chunk_ms})",
        )
        _check(
            self.load_chunk_ms >= 0 and self.load_chunk_ms % 10 == 0,
            f"load_chunk_ms must be 0 (off) or a multiple of the 10 ms hop, got {self.load_chunk_ms}",
        )
        _check(self.load_wait_ms >= 0, f"load_wait_ms must be >= 0, got {self.load_wait_ms}")
        for name in (
            "max_upload_mb",
            "max_stream_s",
            "max_file_s",
            "idle_timeout_s",
            "send_timeout_s",
        ):
            _check(getattr(self, name) > 0, f"{name} must be > 0, got {getattr(self, name)}")
        _check(self.torch_threads >= 0, f"torch_threads must be >= 0, got {self.torch_threads}")
        _check(self.max_delay_ms >= 0, f"max_delay_ms must be >= 0, got {self.max_delay_ms}")
        _check(self.shutdown_grace_s >= 0, "shutdown_grace_s must be >= 0")
        _check(self.malloc_trim_s >= 0, f"malloc_trim_s must be >= 0, got {self.malloc_trim_s}")
        _check(self.adapt_steps >= 1, f"adapt_steps must be >= 1, got {self.adapt_steps}")
        _check(
            math.isfinite(self.profile_max_s) and 0 < self.profile_first_s <= self.profile_max_s,
            "profile_first_s and profile_max_s need 0 < first <= max, got "
            f"{self.profile_first_s} and {self.profile_max_s}",
        )
        _check(
            math.isfinite(self.adapt_rate) and self.adapt_rate > 0,
            f"adapt_rate must be a positive number, got {self.adapt_rate}",
        )

    @property
    def profiles(self) -> ProfileSchedule:
        """When a stream that adapts to its speaker fits its profile, and how."""
        from models.input_adaptation import ProfileSchedule  # torch: not for --help

        return ProfileSchedule.of(self.profile_first_s, self.profile_max_s)

    @property
    def dispatch(self) -> DispatchConfig:
        return DispatchConfig(self.policy, self.max_batch, self.max_delay_ms / 1000)  # type: ignore[arg-type]

    @property
    def search(self) -> dict[str, float]:
        """The beam search settings these flags replace in the bundle's decoder.json, by their
        `DecoderConfig` names (empty: the bundle's own)."""
        search: dict[str, float] = {}
        if self.beam_size > 0:
            search["beam_width"] = self.beam_size
        if self.beam_threshold > 0:
            search["score_threshold"] = self.beam_threshold
        if self.blank_penalty >= 0:
            search["blank_penalty"] = self.blank_penalty
        if self.lookahead >= 0:
            search["lookahead"] = self.lookahead
        return search

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)

    def replace(self, **changes: Any) -> ServerConfig:
        return dataclasses.replace(self, **changes)


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


_FLAGS = [f for f in dataclasses.fields(ServerConfig) if f.name != "auth_tokens"]

# each flag's line in `harken serve --help`: what it does, and what a placeholder value means
# (the field comments above say why)
HELP = {
    "host": "interface to listen on",
    "port": "TCP port to listen on; 0 picks a free one",
    "bundle": "model bundle directory to serve",
    "device": "where the acoustic model runs",
    "dtype": "model precision; auto: fp16 on CUDA, on a CPU the fastest measured for its kind",
    "policy": "Batch Dispatch: eager (a batch as soon as the last ends), timeout (wait up to "
    "--max-delay-ms for a fuller one) or none (one stream per step)",
    "max_batch": "most streams in one model step",
    "warmup": "model step shapes compiled before /readyz answers: background (a stream's own, "
    "the rest while idle), all, or first (a stream's own only)",
    "max_delay_ms": "with --policy timeout: the longest a chunk waits for a fuller batch",
    "max_streams": "concurrent streams (WebSocket and REST); more get close 1013 / 503",
    "chunk_ms": "audio per model step of a live stream (a multiple of the 10 ms hop)",
    "max_chunk_ms": "most audio one stream sends through one step (a backlog, a file)",
    "load_chunk_ms": "audio per live step while the model lags (--load-wait-ms); 0 keeps "
    "--chunk-ms at any load",
    "load_wait_ms": "mean wait of chunks for their step past which live streams step in "
    "--load-chunk-ms and search with --load-beam-threshold",
    "load_beam_threshold": "how far below the best a beam may score and stay while the model "
    "lags (--load-wait-ms), where that is below the bundle's; 0 keeps the bundle's at any load",
    "vosk_endpoint_ms": "/vosk: trailing silence that ends a result; 0: results only at eof",
    "decoder_workers": "beam search workers; a stream always decodes on the same one",
    "decoder_processes": "each decoder worker in its own process (false: threads here)",
    "torch_threads": "intra-op threads of the model step; 0 keeps torch's default",
    "speaker_adaptation": "the bundle's frequency-warp speaker adaptation, where it has one",
    "ensemble": "every network of an ensemble bundle (false: its own network alone, faster)",
    "adapt_files": "hear every file through input transforms fitted to it first (a request's "
    "adapt_input overrides)",
    "adapt_steps": "gradient steps of a file's or a speaker's input fit",
    "adapt_rate": "step rate of a file's or a speaker's input fit",
    "adapt_speakers": "live streams fit a profile of their speaker and hear the rest through "
    "it (a stream's adapt_speaker overrides)",
    "profile_first_s": "seconds of a stream its speaker's first profile is fitted on",
    "profile_max_s": "seconds of a stream its speaker's last profile is fitted on (refitted "
    "each time the audio has doubled until then)",
    "decoder": "beam (with the bundle's LM when it has one) or greedy (best symbol per frame)",
    "no_punctuation": "plain words in every transcript, without the punctuation and capitals "
    "of the bundle's punctuator (REST and Realtime write them by default)",
    "beam_size": "beams the search keeps; 0 keeps the bundle's decoder.json value",
    "beam_threshold": "how far below the best a beam may score and stay; 0 keeps the bundle's",
    "blank_penalty": "taken off every frame's blank log-prob before the search (higher keeps "
    "more characters); 0 turns it off, -1 (any negative) keeps the bundle's",
    "lookahead": "share of a partial word's best unigram score it pays before it ends, at most "
    "1; 0 turns it off, -1 (any negative) keeps the bundle's",
    "max_upload_mb": "largest REST upload, in MB (OpenAI's is 25); larger gets 413",
    "max_stream_s": "longest live stream (WebSocket), in seconds; longer is closed with too_long",
    "max_file_s": "longest file (REST, harken transcribe), in seconds; longer gets 413 too_long",
    "idle_timeout_s": "a WebSocket silent this long is closed",
    "send_timeout_s": "a WebSocket client that leaves results unread this long is dropped",
    "malloc_trim_s": "seconds between handing freed heap memory back to the system; 0: never",
    "shutdown_grace_s": "on SIGTERM, how long streams in flight may finish",
    "log_level": "uvicorn's log level (critical, error, warning, info, debug, trace)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One `--flag` per field (default: from the environment, else the field default); a
    yes-or-no flag alone means yes (`--no-punctuation`)."""
    for f in _FLAGS:
        yes_or_no = isinstance(f.default, bool)
        kind: Any = parse_bool if yes_or_no else type(f.default)
        choices = {
            "device": DEVICES,
            "dtype": DTYPES,
            "policy": POLICIES,
            "decoder": DECODERS,
            "warmup": WARMUPS,
        }.get(f.name)
        parser.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=kind,
            choices=choices,
            default=None,
            nargs="?" if yes_or_no else None,
            const=True if yes_or_no else None,
            help=f"{HELP[f.name]} (default {f.default}, or ${ENV_PREFIX}{f.name.upper()})",
        )
    parser.add_argument(
        "--auth-tokens-file",
        default=None,
        help=f"file of bearer tokens, one a line (or ${ENV_PREFIX}AUTH_TOKENS, comma-separated)",
    )


def from_args(args: argparse.Namespace, environ: Mapping[str, str] | None = None) -> ServerConfig:
    """The config from parsed flags, falling back to `HARKEN_*` variables, then defaults."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    for f in _FLAGS:
        flag = getattr(args, f.name, None)
        raw = flag if flag is not None else env.get(ENV_PREFIX + f.name.upper())
        if raw is not None:
            values[f.name] = _parse(f.name, type(f.default), raw)
    values["auth_tokens"] = _tokens(getattr(args, "auth_tokens_file", None), env)
    return ServerConfig(**values)


def _parse(name: str, kind: type, raw: object) -> object:
    try:
        return parse_bool(raw) if kind is bool else kind(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a {kind.__name__}, got {raw!r}") from None


def _tokens(path: str | None, env: Mapping[str, str]) -> frozenset[str]:
    tokens: list[str] = []
    path = path or env.get(ENV_PREFIX + "AUTH_TOKENS_FILE")
    if path:
        try:
            tokens += Path(path).read_text().split()
        except OSError as e:
            raise ValueError(f"cannot read auth tokens file {path}: {e.strerror}") from None
    tokens += [t.strip() for t in env.get(ENV_PREFIX + "AUTH_TOKENS", "").split(",")]
    return frozenset(t for t in tokens if t)
