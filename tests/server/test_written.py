"""Written transcripts (server/written.py): punctuation and capitals on partials and finals.

What clients rely on: the written stable text only grows and is a prefix of the text and of
the final (REST's and Realtime's deltas are cut from it); a stream's written final is its
transcript written at once; only case and marks change (the words, their count and their
times stay); a hotword keeps its capitals; REST writes by default and /v1/stream when asked;
a bundle without a punctuator serves plain words, and a broken one is named at start. The
punctuator's weights are random here: these properties hold for any; the last test reads
real speech with the shipped model's punctuator, where it has one."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
import soundfile
from websockets.sync.client import connect

from models.bundle import BundleError
from models.punctuation import META, WEIGHTS, Punctuator, join, write_all
from models.text import normalise_loose
from server import cli_serve, cli_transcribe
from server.config import DEFAULT_BUNDLE, ServerConfig, from_args
from server.engine import punctuator_for, running_engine
from server.hotwords import normalise_hotwords, prompt_hotwords
from server.protocol import Alternative, Final, Partial, Word
from server.recording import transcribe
from server.written import SegmentWriter, load_punctuator
from tests.server.serving import (
    AUDIO_PCM,
    Running,
    make_audio,
    pcm16,
    random_punctuator,
    receive_all,
    speak,
)

VOCAB = ["the", "smith", "iphone", "a", "of", "p", "y", "go", "to", "went"]
LONG_PCM = pcm16(make_audio(3.0, seed=3))  # some 35 words of the tiny model


def plain(text: str) -> list[str]:
    """Written text's words as recognised: marks off, lower case."""
    return [w.rstrip(",.?").lower() for w in text.split()]


def beam_partials(words: list[str], rng: np.random.Generator) -> list[Partial]:
    """Partials as the beam search sends them while `words` are heard: its stable prefix
    (whole words) only grows, and the words after it may read otherwise, or be fewer, until
    they are stable."""
    partials, stable = [], 0
    for n in range(1, len(words) + 1):
        stable = int(rng.integers(stable, n + 1))
        heard = words[stable : int(rng.integers(stable, n + 1))]
        tail = [w if rng.random() < 0.6 else str(rng.choice(VOCAB)) for w in heard]
        text = " ".join(words[:stable] + tail)
        partials.append(Partial(text=text, stable=" ".join(words[:stable])))
    return partials


def greedy_partials(words: list[str]) -> list[Partial]:
    """Partials as the greedy decoder sends them: all of the text stable, its last word
    growing a letter at a time."""
    partials = []
    for n, word in enumerate(words):
        for j in range(1, len(word) + 1):
            text = " ".join([*words[:n], word[:j]])
            partials.append(Partial(text=text, stable=text))
    return partials


def final_of(words: list[str], other: list[str]) -> Final:
    timed = [Word(word=w, start=i / 2, end=i / 2 + 0.3, conf=0.9) for i, w in enumerate(words)]
    alternative = Alternative(
        text=" ".join(other),
        score=-2.0,
        words=[Word(word=w, start=0, end=1, conf=1) for w in other],
    )
    return Final(text=" ".join(words), words=timed, alternatives=[alternative], duration=9.0)


@pytest.mark.parametrize("lookahead", [0, 1, 3])
@pytest.mark.parametrize("greedy", [False, True], ids=["beam", "greedy"])
def test_written_stable_text_only_grows_and_the_final_is_the_transcript_written_at_once(
    lookahead: int, greedy: bool
) -> None:
    punctuator = random_punctuator(VOCAB, lookahead=lookahead)
    rng = np.random.default_rng(lookahead)
    longest = 0  # words of a written stable text
    for _ in range(15):
        words = [str(w) for w in rng.choice(VOCAB, int(rng.integers(1, 30)))]
        writer = SegmentWriter(punctuator, {})
        stables = [""]
        for partial in greedy_partials(words) if greedy else beam_partials(words, rng):
            written = writer.partial(partial)
            assert written.text.startswith(written.stable)
            assert written.stable.startswith(stables[-1]), (stables[-1], written.stable)
            assert plain(written.text) == partial.text.split()
            stables.append(written.stable)
            longest = max(longest, len(written.stable.split()))
        other = [str(w) for w in rng.choice(VOCAB, 5)]
        given = final_of(words, other)
        final = writer.final(given)
        assert final.text == join(write_all(punctuator, words))
        assert final.text.startswith(stables[-1]) and final.text[-1] in ".?"
        assert plain(final.text) == words
        assert [w.word for w in final.words] == [t.rstrip(",.?") for t in final.text.split()]
        times = [(w.start, w.end, w.conf) for w in final.words]
        assert times == [(w.start, w.end, w.conf) for w in given.words]
        [alternative] = final.alternatives
        assert alternative.text == join(write_all(punctuator, other))
        assert alternative.words is not None
        assert [w.word.lower() for w in alternative.words] == other
    assert longest > 5, "stable text was written as it came"


def test_hotwords_keep_their_capitals_wherever_their_words_are_written() -> None:
    hotwords = normalise_hotwords(["iPhone", "Dr. Smith", "turn on", "R2D2"])
    assert hotwords.casing == {"iphone": "iPhone", "smith": "Smith"}  # 'Dr' is not 'doctor'
    # a prompt is free text: the capital that opens a sentence says nothing of a word
    prompt = prompt_hotwords("The talk is on the iPhone. Then Dr. Smith speaks, Go")
    assert prompt.casing == {"iphone": "iPhone", "smith": "Smith"}
    punctuator = random_punctuator(VOCAB)
    rng = np.random.default_rng(7)
    words = [str(w) for w in rng.choice(VOCAB, 40)]
    writer = SegmentWriter(punctuator, hotwords.casing)
    written = [writer.partial(p).text for p in beam_partials(words, rng)]
    final = writer.final(final_of(words, ["iphone", "smith"]))
    for text in [*written, final.text, final.alternatives[0].text]:
        for token in text.split():
            if token.rstrip(",.?").lower() in ("iphone", "smith"):
                assert token.rstrip(",.?") in ("iPhone", "Smith"), text
    assert {"iPhone", "Smith"} <= {w.word for w in final.words}
    assert plain(final.text) == words


# -- through the server ----------------------------------------------------------------------


def stream(server: Running, audio: bytes, **config: Any) -> list[dict[str, Any]]:
    """`/v1/stream` with `config`: every message, the final last."""
    with connect(f"{server.ws}/v1/stream") as ws:
        ws.send(json.dumps({"type": "config", "sample_rate": 16000, **config}))
        for i in range(0, len(audio), 1280):
            ws.send(audio[i : i + 1280])
        ws.send('{"type": "eos"}')
        return receive_all(ws)


def test_a_written_stream_is_its_plain_transcript_written_append_only(
    punctuated_server: Running, punctuated_bundle: Path
) -> None:
    punctuator = Punctuator.load(punctuated_bundle)  # as served: the saved weights
    assert punctuator is not None
    *partials, final = stream(punctuated_server, LONG_PCM, punctuate=True)
    *_, as_said = stream(punctuated_server, LONG_PCM)  # punctuate is off by default
    words = as_said["text"].split()
    assert final["type"] == "final" and len(words) > 20
    assert final["text"] == join(write_all(punctuator, words)) != as_said["text"]
    assert normalise_loose(final["text"]) == as_said["text"]
    assert [w["word"].lower() for w in final["words"]] == words
    assert [w["word"] for w in final["words"]] == [t.rstrip(",.?") for t in final["text"].split()]
    times = [(w["start"], w["end"], w["conf"]) for w in final["words"]]
    assert times == [(w["start"], w["end"], w["conf"]) for w in as_said["words"]]
    stables = [p["stable"] for p in partials]
    assert len(set(stables)) > 3, "stable written text came before the end"
    for before, after in zip(["", *stables], [*stables, final["text"]], strict=True):
        assert after.startswith(before)
    assert all(p["text"].startswith(p["stable"]) for p in partials)


def test_a_wrong_punctuate_is_refused_as_other_config_fields_are(
    punctuated_server: Running,
) -> None:
    with connect(f"{punctuated_server.ws}/v1/stream") as ws:
        ws.send(json.dumps({"type": "config", "sample_rate": 16000, "punctuate": "maybe"}))
        [error] = receive_all(ws)
    assert error["type"] == "error" and error["code"] == "bad_config"
    assert "punctuate" in error["message"]


@pytest.fixture(scope="module")
def wav() -> bytes:
    buf = io.BytesIO()
    soundfile.write(buf, np.frombuffer(AUDIO_PCM, "<i2"), 16000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def test_a_bundle_without_a_punctuator_serves_plain_words(
    server: Running, expected: str, wav: bytes
) -> None:
    assert server.resources.engine.punctuator is None
    api = openai.OpenAI(base_url=f"{server.url}/v1", api_key="-", max_retries=0)
    assert api.audio.transcriptions.create(model="m", file=("a.wav", wav)).text == expected
    assert stream(server, AUDIO_PCM, punctuate=True)[-1]["text"] == expected


# -- start-up ------------------------------------------------------------------------------


def test_no_punctuation_serves_plain_words_and_start_up_says_which(
    punctuated_bundle: Path, caplog: pytest.LogCaptureFixture
) -> None:
    parser = argparse.ArgumentParser()
    cli_serve.add_arguments(parser)
    bundle = ["--bundle", str(punctuated_bundle)]
    assert from_args(parser.parse_args([*bundle, "--no-punctuation"]), {}).no_punctuation
    off = from_args(parser.parse_args(bundle), {"HARKEN_NO_PUNCTUATION": "1"})
    on = from_args(parser.parse_args(bundle), {})
    with caplog.at_level(logging.INFO, logger="harken.server"):
        assert punctuator_for(off) is None
        assert punctuator_for(on) is not None
        assert punctuator_for(ServerConfig(bundle=DEFAULT_BUNDLE, no_punctuation=True)) is None
    lines = [r.getMessage() for r in caplog.records if "written transcripts" in r.getMessage()]
    assert "off (--no-punctuation)" in lines[0] and META in lines[1], lines


@pytest.mark.parametrize(
    ("breakage", "named"),
    [
        ("json", f"{META} does not describe"),
        ("no weights", f"{WEIGHTS} is missing"),
        ("bad weights", f"{WEIGHTS} cannot be read"),
        ("shapes", "embed should be"),
    ],
)
def test_a_broken_punctuator_is_named_at_start(
    punctuated_bundle: Path,
    tmp_path: Path,
    breakage: str,
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bundle = tmp_path / "broken"
    shutil.copytree(punctuated_bundle, bundle)
    if breakage == "json":
        (bundle / META).write_text('{"format": "harken-punctuation", ')
    elif breakage == "no weights":
        (bundle / WEIGHTS).unlink()
    elif breakage == "bad weights":
        (bundle / WEIGHTS).write_bytes((bundle / WEIGHTS).read_bytes()[:100])
    else:
        meta = json.loads((bundle / META).read_text())
        meta["config"]["dim"] = 12
        (bundle / META).write_text(json.dumps(meta))
    with pytest.raises(BundleError, match=named) as raised:
        load_punctuator(bundle)
    assert str(bundle / META) in str(raised.value) or str(bundle / WEIGHTS) in str(raised.value)
    parser = argparse.ArgumentParser()
    cli_serve.add_arguments(parser)
    assert cli_serve.main(parser.parse_args(["--bundle", str(bundle)])) == 2
    assert named in capsys.readouterr().err


def test_harken_transcribe_writes_unless_no_punctuate(
    punctuated_bundle: Path, expected: str, wav: bytes, tmp_path: Path, capsys: Any
) -> None:
    punctuator = Punctuator.load(punctuated_bundle)
    assert punctuator is not None
    path = tmp_path / "a.wav"
    path.write_bytes(wav)
    parser = argparse.ArgumentParser()
    cli_transcribe.add_arguments(parser)
    common = [str(path), "--bundle", str(punctuated_bundle), "--dtype", "fp32"]
    assert cli_transcribe.main(parser.parse_args(common)) == 0
    assert cli_transcribe.main(parser.parse_args([*common, "--no-punctuate"])) == 0
    written, as_said = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert written["text"] == join(write_all(punctuator, expected.split()))
    assert as_said["text"] == expected


# -- the shipped model ---------------------------------------------------------------------


@pytest.mark.skipif(
    not (Path(DEFAULT_BUNDLE) / META).is_file(), reason="models/default has no punctuator yet"
)
def test_the_shipped_punctuator_writes_real_speech_without_changing_its_words() -> None:
    audio = speak("the weather is nice today. shall we go for a walk by the river?")
    audio = np.concatenate([audio, np.zeros(8000, np.float32)])

    async def both() -> tuple[str, str]:
        config = ServerConfig(
            dtype="fp32", bundle=DEFAULT_BUNDLE, warmup="first", decoder_processes=False
        )
        async with running_engine(config) as engine:
            written = (await transcribe(engine, audio, written=True))[1].text
            as_said = (await transcribe(engine, audio))[1].text
        return written, as_said

    written, as_said = asyncio.run(both())
    assert normalise_loose(written) == as_said and written != as_said
    assert written[0].isupper() and written[-1] in ".?"
