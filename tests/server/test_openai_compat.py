"""What OpenAI's clients expect beyond one transcription: the model list, streamed
transcripts, written text (punctuation and capitals, unless punctuate=false), refused
translations, and errors in OpenAI's shape on every /v1 path."""

from __future__ import annotations

import io
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
import soundfile

from models.bundle import load_bundle
from models.features import featurize
from models.input_adaptation import ProfileSchedule, fit_transforms
from models.punctuation import Punctuator, join, write_all
from server.config import ServerConfig
from server.profiles import encode_profile, network_digest
from tests.server.serving import AUDIO_PCM, Running, make_audio, pcm16, reference_text, running


@pytest.fixture(scope="module")
def wav() -> bytes:
    buf = io.BytesIO()
    soundfile.write(buf, np.frombuffer(AUDIO_PCM, "<i2"), 16000, format="WAV", subtype="PCM_16")
    return buf.getvalue()


def client(server: Running) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def test_models_lists_the_served_bundle_and_any_name_resolves_and_transcribes(
    server: Running, tiny_bundle: Path, expected: str, wav: bytes
) -> None:
    api = client(server)
    [card] = api.models.list().data
    assert (card.id, card.object, card.owned_by) == (tiny_bundle.name, "model", "harken")
    assert card.created == int((tiny_bundle / "config.json").stat().st_mtime)
    assert api.models.retrieve(card.id) == card
    # any name resolves, as the served bundle under that name: transcriptions take any
    whisper = api.models.retrieve("whisper-1")
    assert whisper.model_dump() == {**card.model_dump(), "id": "whisper-1"}
    for name in (card.id, "whisper-1"):
        result = api.audio.transcriptions.create(model=name, file=("a.wav", wav))
        assert result.text == expected


def test_a_prompts_phrases_become_hotwords(server: Running, expected: str, wav: bytes) -> None:
    """`prompt` names words the file holds: its phrases (between commas) are favoured as
    hotwords, normalised as transcripts are; more than a stream's 100 are refused."""
    api = client(server)
    prompted = api.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", wav), prompt="Names: H\u00e9llo, Dr. Smith; ?!"
    )
    # the tiny model spells boosted phrases at once; unprompted it never says them
    phrases = {"names", "hello", "doctor", "smith"}
    assert prompted.text and set(prompted.text.split()) <= phrases
    assert not phrases & set(expected.split())
    with pytest.raises(openai.BadRequestError, match="at most 100") as refused:
        api.audio.transcriptions.create(
            model="whisper-1", file=("a.wav", wav), prompt=", ".join(map(str, range(101)))
        )
    assert refused.value.param == "prompt"


def test_stream_true_sends_deltas_that_add_up_to_the_final_text(
    server: Running, expected: str, wav: bytes
) -> None:
    events = list(
        client(server).audio.transcriptions.create(model="harken", file=("a.wav", wav), stream=True)
    )
    *deltas, done = events
    assert deltas and all(e.type == "transcript.text.delta" for e in deltas)
    assert done.type == "transcript.text.done" and done.text == expected
    assert "".join(e.delta for e in deltas) == expected  # type: ignore[union-attr]


def test_a_long_file_streams_its_stable_words_before_the_end(tiny_bundle: Path, wav: bytes) -> None:
    long = io.BytesIO()
    soundfile.write(long, make_audio(6.0, seed=3), 16000, format="WAV", subtype="PCM_16")
    config = ServerConfig(dtype="fp32", bundle=str(tiny_bundle), max_chunk_ms=640)
    with running(config) as small_steps:
        events = list(
            client(small_steps).audio.transcriptions.create(
                model="harken", file=("a.wav", long.getvalue()), stream=True
            )
        )
    *deltas, done = events
    assert len(deltas) >= 2, "only the final's text came: the file was not streamed"
    assert "".join(e.delta for e in deltas) == done.text  # type: ignore[union-attr]


def test_rest_writes_transcripts_unless_punctuate_is_false(
    punctuated_server: Running, punctuated_bundle: Path, expected: str, wav: bytes
) -> None:
    punctuator = Punctuator.load(punctuated_bundle)
    assert punctuator is not None
    written = join(write_all(punctuator, expected.split()))
    assert written != expected
    api = client(punctuated_server)
    create = api.audio.transcriptions.create
    assert create(model="whisper-1", file=("a.wav", wav)).text == written
    assert (
        create(model="m", file=("a.wav", wav), extra_body={"punctuate": "false"}).text == expected
    )
    text = create(model="m", file=("a.wav", wav), response_format="text")
    assert str(text).strip() == written
    verbose = create(
        model="m",
        file=("a.wav", wav),
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
    )
    assert verbose.text == written and verbose.words is not None and verbose.segments
    assert [w.word for w in verbose.words] == [t.rstrip(",.?") for t in written.split()]
    assert " ".join(s.text for s in verbose.segments) == written
    srt = str(create(model="m", file=("a.wav", wav), response_format="srt"))
    assert written.split()[0] in srt and any(m in srt for m in ",.?")
    *deltas, done = create(model="m", file=("a.wav", wav), stream=True)
    assert done.type == "transcript.text.done" and done.text == written
    assert "".join(d.delta for d in deltas) == written  # type: ignore[union-attr]
    bad = httpx.post(
        f"{punctuated_server.url}/v1/audio/transcriptions",
        files={"file": ("a.wav", wav)},
        data={"model": "x", "punctuate": "maybe"},
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "punctuate"


def test_a_prompts_capitals_are_kept_in_the_written_text(
    punctuated_server: Running, wav: bytes
) -> None:
    api = client(punctuated_server)
    prompt = "Dr. Smith, iPhone"
    text = api.audio.transcriptions.create(model="m", file=("a.wav", wav), prompt=prompt).text
    said = [t.rstrip(",.?") for t in text.split()]
    # the tiny model spells boosted phrases at once
    assert {"Smith", "iPhone"} & set(said), text
    assert not {w for w in said if w.lower() in ("smith", "iphone")} - {"Smith", "iPhone"}


def test_stream_with_a_subtitle_format_is_refused(server: Running, wav: bytes) -> None:
    with pytest.raises(openai.BadRequestError, match="stream=false"):
        client(server).audio.transcriptions.create(
            model="harken", file=("a.wav", wav), stream=True, response_format="srt"
        )


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the client deprecates translations
def test_translations_say_that_only_english_transcription_is_served(
    server: Running, wav: bytes
) -> None:
    with pytest.raises(openai.BadRequestError, match="English") as raised:
        client(server).audio.translations.create(model="whisper-1", file=("a.wav", wav))
    assert raised.value.code == "unsupported"


def openai_shape(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return dict(error)


def test_unknown_paths_wrong_methods_and_bad_fields_use_openai_errors(server: Running) -> None:
    with pytest.raises(openai.NotFoundError, match="no such endpoint: GET /v1/nope"):
        client(server).get("/nope", cast_to=object)
    assert openai_shape(httpx.get(f"{server.url}/v1/nope"), 404)["code"] == "not_found"
    wrong = httpx.get(f"{server.url}/v1/audio/transcriptions")
    error = openai_shape(wrong, 405)
    assert error["code"] == "method_not_allowed" and "POST" in str(error["message"])
    assert wrong.headers["allow"] == "POST"
    bad = httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        files={"file": ("a.wav", b"RIFF")},
        data={"model": "x", "stream": "maybe"},
    )
    assert openai_shape(bad, 400)["param"] == "stream"
    assert httpx.get(f"{server.url}/nope").json() == {"detail": "Not Found"}  # not an API path


def test_a_speaker_profile_hears_a_file_through_it(server: Running, tiny_bundle: Path) -> None:
    """A token from a stream that adapted to the speaker (server/profiles.py) is heard
    through by a file too; with adapt_input=true, or not for this model, it is refused."""
    pcm = pcm16(make_audio(1.5, seed=4))
    buf = io.BytesIO()
    soundfile.write(buf, np.frombuffer(pcm, "<i2"), 16000, format="WAV", subtype="PCM_16")
    wav = buf.getvalue()
    quantised = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    model = load_bundle(tiny_bundle)
    earlier = featurize(make_audio(2.0, seed=7), model.config.features)  # the speaker before
    profile = fit_transforms(model, earlier, (), ProfileSchedule().fit)
    token = encode_profile(profile, network_digest(tiny_bundle / "model.safetensors"))
    heard = reference_text(tiny_bundle, quantised, profile=profile)
    assert heard != reference_text(tiny_bundle, quantised)  # the test can tell
    api = client(server)
    result = api.audio.transcriptions.create(
        model="harken", file=("a.wav", wav), extra_body={"speaker_profile": token}
    )
    assert result.text == heard
    events = list(
        api.audio.transcriptions.create(
            model="harken", file=("a.wav", wav), stream=True, extra_body={"speaker_profile": token}
        )
    )
    assert events[-1].type == "transcript.text.done" and events[-1].text == heard
    for data, words in (
        ({"speaker_profile": token, "adapt_input": "true"}, "send one"),
        ({"speaker_profile": token[:-12]}, "cut short"),
        ({"speaker_profile": encode_profile(profile, bytes(8))}, "another model"),
    ):
        bad = httpx.post(
            f"{server.url}/v1/audio/transcriptions",
            files={"file": ("a.wav", wav)},
            data={"model": "x", **data},
        )
        error = openai_shape(bad, 400)
        assert error["param"] == "speaker_profile" and words in str(error["message"]), error


def test_adapt_input_hears_a_file_through_transforms_fitted_to_it(
    server: Running, tiny_bundle: Path
) -> None:
    pcm = pcm16(make_audio(1.5, seed=4))
    buf = io.BytesIO()
    soundfile.write(buf, np.frombuffer(pcm, "<i2"), 16000, format="WAV", subtype="PCM_16")
    wav = buf.getvalue()
    quantised = np.frombuffer(pcm, "<i2").astype(np.float32) / 32768
    adapted = reference_text(tiny_bundle, quantised, adapt_input=True)
    expected = reference_text(tiny_bundle, quantised)
    assert adapted != expected  # this audio reads differently adapted: the test can tell
    api = client(server)
    for flag, want in (("true", adapted), ("false", expected)):
        result = api.audio.transcriptions.create(
            model="harken", file=("a.wav", wav), extra_body={"adapt_input": flag}
        )
        assert result.text == want
    events = list(
        api.audio.transcriptions.create(
            model="harken", file=("a.wav", wav), stream=True, extra_body={"adapt_input": "true"}
        )
    )
    assert events[-1].type == "transcript.text.done" and events[-1].text == adapted
    bad = httpx.post(
        f"{server.url}/v1/audio/transcriptions",
        files={"file": ("a.wav", wav)},
        data={"model": "x", "adapt_input": "perhaps"},
    )
    assert openai_shape(bad, 400)["param"] == "adapt_input"
    config = ServerConfig(dtype="fp32", bundle=str(tiny_bundle), adapt_files=True)
    with running(config) as adapting:  # every file adapted unless a request says otherwise
        for extra, want in (({}, adapted), ({"adapt_input": "false"}, expected)):
            result = client(adapting).audio.transcriptions.create(
                model="harken", file=("a.wav", wav), extra_body=extra
            )
            assert result.text == want
