"""A final transcript as OpenAI's verbose_json segments, SubRip and WebVTT.

A segment's text is its words as the final's text writes them (with written transcripts,
their case and marks: server/written.py); verbose_json's `words` are one entry a word
recognised, in its written case without marks, as OpenAI's are."""

from __future__ import annotations

from server.protocol import Final, Segment, TimedWord, VerboseTranscription
from server.written import tokens

PAUSE_S = 0.8  # a silence this long between words starts a new segment
MAX_WORDS = 24  # and so does a segment this long, so that subtitles stay readable


def segments(final: Final) -> list[Segment]:
    """Words grouped at pauses; one segment for the whole audio when there are no words."""
    if not final.words:
        return [Segment(id=0, start=0.0, end=final.duration, text=final.text)] if final.text else []
    words = final.words
    groups: list[list[int]] = [[0]]  # indices of the words
    for i in range(1, len(words)):
        if words[i].start - words[i - 1].end >= PAUSE_S or len(groups[-1]) >= MAX_WORDS:
            groups.append([])
        groups[-1].append(i)
    written = tokens(final)
    return [
        Segment(
            id=n,
            start=words[g[0]].start,
            end=words[g[-1]].end,
            text=" ".join(written[i] for i in g),
        )
        for n, g in enumerate(groups)
    ]


def verbose(final: Final, words: bool, segments_too: bool) -> VerboseTranscription:
    return VerboseTranscription(
        duration=round(final.duration, 3),
        text=final.text,
        segments=segments(final) if segments_too else None,
        words=[TimedWord(word=w.word, start=w.start, end=w.end) for w in final.words]
        if words
        else None,
    )


def srt(segs: list[Segment]) -> str:
    blocks = [
        f"{s.id + 1}\n{_clock(s.start, ',')} --> {_clock(s.end, ',')}\n{s.text}\n" for s in segs
    ]
    return "\n".join(blocks)


def vtt(segs: list[Segment]) -> str:
    blocks = [f"{_clock(s.start, '.')} --> {_clock(s.end, '.')}\n{s.text}\n" for s in segs]
    return "WEBVTT\n\n" + "\n".join(blocks)


def _clock(seconds: float, sep: str) -> str:
    ms = int(round(seconds * 1000))
    h, ms = divmod(ms, 3_600_000)
    m, ms = divmod(ms, 60_000)
    s, ms = divmod(ms, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"
