"""/vosk with messages shaped exactly as vosk-server's own clients send them (its
websocket/test_alternatives.py, test_words.py, and `{"reset" : 1}`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from models.punctuation import Punctuator, join, write_all
from tests.server.serving import AUDIO_PCM, Running, receive_all

FRAME = 6400  # bytes: 0.2 s of 16 kHz PCM16, as Vosk's sample clients send
EOF = '{"eof" : 1}'
RESET = '{"reset" : 1}'
ALTERNATIVES = '{"config" : { "max_alternatives" : 20, "sample_rate" : 16000 } }'


def send_audio(ws: ClientConnection, audio: bytes) -> list[Any]:
    """Frames, each answered by one reply; the replies."""
    replies = []
    for i in range(0, len(audio), FRAME):
        ws.send(audio[i : i + FRAME])
        replies.append(json.loads(ws.recv()))
    return replies


def session(server: Running, config: str) -> dict[str, Any]:
    """Config, the test audio, eof: the last result."""
    with connect(f"{server.ws}/vosk") as ws:
        ws.send(config)
        assert all("partial" in r for r in send_audio(ws, AUDIO_PCM))
        ws.send(EOF)
        result = json.loads(ws.recv())
    return dict(result)


def test_max_alternatives_gives_vosks_n_best(server: Running, expected: str) -> None:
    result = session(server, ALTERNATIVES)
    assert set(result) == {"alternatives"}
    best, *others = result["alternatives"]
    assert best["text"] == expected and others
    texts = [a["text"] for a in result["alternatives"]]
    assert len(set(texts)) == len(texts)
    confidences = [a["confidence"] for a in result["alternatives"]]
    assert confidences == sorted(confidences, reverse=True)
    assert [w["word"] for w in best["result"]] == expected.split()
    for alternative in result["alternatives"]:
        assert set(alternative) <= {"text", "confidence", "result"}
        assert [w["word"] for w in alternative.get("result", [])] == alternative["text"].split()
        assert all(set(w) == {"word", "start", "end"} for w in alternative.get("result", []))


def test_phrase_list_favours_its_phrases(server: Running) -> None:
    runner_up = session(server, ALTERNATIVES)["alternatives"][1]["text"]
    config = {"phrase_list": [runner_up, "[unk]"], "sample_rate": 16000, "words": 0}
    result = session(server, json.dumps({"config": config}, indent=1))  # test_words.py's shape
    assert result == {"text": runner_up}  # favoured into first place; no words asked for


def test_phrases_are_normalised_and_one_with_nothing_to_spell_is_left_out(
    server: Running,
) -> None:
    """A phrase written as people write it is favoured as its transcript text; one with
    nothing to spell ("?!") is left out alone, and the stream goes on."""
    runner_up = session(server, ALTERNATIVES)["alternatives"][1]["text"]
    written = f"{runner_up.upper()}!"  # capitals and punctuation: normalised to runner_up
    config = {"phrase_list": ["?!", written], "sample_rate": 16000, "words": 0}
    assert session(server, json.dumps({"config": config})) == {"text": runner_up}


def test_reset_ends_the_utterance_and_keeps_listening(server: Running, expected: str) -> None:
    with connect(f"{server.ws}/vosk") as ws:
        ws.send('{ "config" : { "sample_rate" : 16000 } }')
        send_audio(ws, AUDIO_PCM)
        ws.send(RESET)
        first = json.loads(ws.recv())
        again = send_audio(ws, AUDIO_PCM)
        ws.send(EOF)
        second = json.loads(ws.recv())
        assert receive_all(ws) == [] and ws.close_code == 1000
    assert set(first) == {"result", "text"} and first["text"] == expected
    assert all("partial" in r for r in again)  # a new utterance, still answered frame by frame
    assert second["text"] and all(w["start"] >= 1.5 - 0.05 for w in second["result"])  # stream time
    assert all(w["end"] <= 1.5 + 0.05 for w in first["result"])


def test_reset_and_eof_before_any_audio_answer_empty_results(server: Running) -> None:
    with connect(f"{server.ws}/vosk") as ws:
        ws.send('{ "config" : { "sample_rate" : 16000 } }')
        ws.send(RESET)
        assert json.loads(ws.recv()) == {"text": ""}
        ws.send(EOF)
        assert json.loads(ws.recv()) == {"text": ""}
        assert receive_all(ws) == [] and ws.close_code == 1000


def test_results_are_plain_words_unless_punctuate_asks_each_utterance_written(
    punctuated_server: Running, punctuated_bundle: Path, expected: str
) -> None:
    """Vosk's clients expect plain words, so a server with a punctuator sends them unless
    the config asks for written text; then each utterance (ended by reset here) is written
    as its own sentence, its words in their written case."""
    punctuator = Punctuator.load(punctuated_bundle)
    assert punctuator is not None
    assert session(punctuated_server, '{ "config" : { "sample_rate" : 16000 } }') == session(
        punctuated_server, json.dumps({"config": {"sample_rate": 16000, "punctuate": False}})
    )
    assert session(punctuated_server, ALTERNATIVES)["alternatives"][0]["text"] == expected
    results = []
    with connect(f"{punctuated_server.ws}/vosk") as ws:
        ws.send(json.dumps({"config": {"sample_rate": 16000, "punctuate": True}}))
        for control in (RESET, EOF):
            partials = [r["partial"] for r in send_audio(ws, AUDIO_PCM)]
            assert any(p and p != p.lower() for p in partials), partials  # written as it comes
            ws.send(control)
            results.append(json.loads(ws.recv()))
    for result in results:
        words = [w["word"].lower() for w in result["result"]]
        assert result["text"] == join(write_all(punctuator, words)) != " ".join(words)
        assert [w["word"] for w in result["result"]] == [
            t.rstrip(",.?") for t in result["text"].split()
        ]
    assert " ".join(w["word"] for w in results[0]["result"]).lower() == expected
