"""`/vosk`: the Vosk server protocol (alphacep/vosk-server), so existing Vosk clients work
unchanged.

client                                            server
{"config": {"sample_rate": 16000,      ->         (optional, first; 16 kHz when absent)
  "words": true, "max_alternatives": 0,
  "phrase_list": ["turn on", "[unk]"]}}
<binary PCM16>*                        ->         <- one reply per frame: {"partial": "..."},
                                                     or a result where trailing silence
                                                     ended an utterance (`vosk_endpoint_ms`)
{"reset" : 1}                          ->         <- the result so far; listening goes on
{"eof" : 1}                            ->         <- the last result, then close 1000

A result is `{"result": [{"conf", "start", "end", "word"}], "text"}` (no `result` with
`"words": false`), or with `max_alternatives` N > 0 the n-best, `{"alternatives": [{"text",
"confidence", "result": [{"word", "start", "end"}]}]}`, at most N and as many as the decoder
keeps. `phrase_list` is Vosk's grammar; here its phrases become hotwords (favoured, not the
only ones allowed), normalised as transcripts are, and `[unk]` is dropped. Beyond Vosk's
fields, `"punctuate": true` asks for written text (server/written.py). Vosk has no error
message: errors close the socket with a code and a reason, and a phrase with nothing to
spell is left out with a line in the server's log, as Vosk's clients know no warning.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, WebSocket
from starlette.websockets import WebSocketDisconnect

from server.errors import BadConfig, BadMessage, SessionError
from server.hotwords import normalise_hotwords
from server.protocol import (
    Final,
    Partial,
    ProtocolError,
    VoskAlternative,
    VoskAlternatives,
    VoskConfig,
    VoskControl,
    VoskPartial,
    VoskResult,
    VoskTimedWord,
    VoskWord,
    Word,
    parse_vosk_text,
)
from server.session import Options, Session
from server.transport import (
    Resources,
    audio_frame,
    authorize,
    close_with_error,
    log,
    observe_final,
    observe_profiles,
    receive,
    resources,
)
from server.ws_frames import bound_sends

router = APIRouter()
UNKNOWN = "[unk]"  # Vosk's garbage word in grammars: nothing to favour


@router.websocket("/vosk")
async def vosk(ws: WebSocket) -> None:
    res = resources(ws)
    bound_sends(ws, res.config.send_timeout_s)
    await ws.accept()
    try:
        authorize(ws, res.config.auth_tokens)
        with res.slots.hold():
            await _serve(ws, res)
        res.metrics.streams.labels("vosk").inc()
    except SessionError as e:
        await close_with_error(ws, e, res.metrics, wire=False)
    except WebSocketDisconnect:
        log.info("client left /vosk mid-stream; its resources are freed")


async def _serve(ws: WebSocket, res: Resources) -> None:
    first: bytes | str | None = await receive(ws, res.config.idle_timeout_s)
    config = VoskConfig()
    if isinstance(first, str) and isinstance(parsed := _text(first), VoskConfig):
        config, first = parsed, None
    session = Session(
        res.engine,
        _options(config, res.config.vosk_endpoint_ms, res.config.adapt_speakers),
    )
    try:
        await _start(session)
        await _stream(ws, res, session, config, first)
    finally:
        observe_profiles(res, session)
        session.close()


async def _start(session: Session) -> None:
    try:
        await session.start()
    except BadConfig as e:  # the decoder refused a phrase as a hotword
        raise BadConfig(f"phrase_list: {e.message.removeprefix('hotwords: ')}") from None


async def _stream(
    ws: WebSocket, res: Resources, session: Session, config: VoskConfig, first: bytes | str | None
) -> None:
    """Answer each message as vosk-server does (`first`: one already received), until eof."""
    partial = ""
    while True:
        message = first if first is not None else await receive(ws, res.config.idle_timeout_s)
        first = None
        if isinstance(message, bytes):
            partial = await _audio(ws, session, config, message, partial)
            continue
        control = _control(message)
        ended_at = time.perf_counter()
        await ws.send_text(_result(await _end(session, control), config))
        if control == "eof":
            observe_final(res, session, ended_at)
            await ws.close(1000)
            return
        partial = ""


async def _audio(
    ws: WebSocket, session: Session, config: VoskConfig, data: bytes, partial: str
) -> str:
    """Feed one frame and send its one reply: the results of utterances it ended, else the
    partial. Returns the partial text now shown."""
    updates = await session.feed(audio_frame(data, "pcm_s16le"))
    finals = [u for u in updates if isinstance(u, Final)]
    for final in finals:
        await ws.send_text(_result(final, config))
        partial = ""
    partial = next((u.text for u in updates if isinstance(u, Partial)), partial)
    if not finals:
        await ws.send_text(VoskPartial(partial=partial).model_dump_json())
    return partial


async def _end(session: Session, control: VoskControl) -> Final:
    """The utterance's result at reset or eof; an empty one where no audio came at all, as
    Vosk answers."""
    if session.timing.samples == 0 and control == "eof":
        return Final(text="", words=[], alternatives=[], duration=0.0)
    return await (session.reset() if control == "reset" else session.finish())


def _result(final: Final, config: VoskConfig) -> str:
    if config.max_alternatives:
        return _alternatives(final, config.words)
    words = [VoskWord(conf=w.conf, end=w.end, start=w.start, word=w.word) for w in final.words]
    result = VoskResult(result=words if config.words and words else None, text=final.text)
    return result.model_dump_json(exclude_none=True)


def _alternatives(final: Final, words: bool) -> str:
    def timed(ws: list[Word] | None) -> list[VoskTimedWord] | None:
        if not words or not ws:
            return None
        return [VoskTimedWord(word=w.word, start=w.start, end=w.end) for w in ws]

    best = VoskAlternative(text=final.text, confidence=final.score, result=timed(final.words))
    rest = [
        VoskAlternative(text=a.text, confidence=a.score, result=timed(a.words))
        for a in final.alternatives
    ]
    return VoskAlternatives(alternatives=[best, *rest]).model_dump_json(exclude_none=True)


def _options(config: VoskConfig, endpoint_ms: int, adapt_speaker: bool) -> Options:
    """Vosk's config, and the server's settings for what it has no field for."""
    phrases = [p for p in config.phrase_list if p.strip() and p.strip() != UNKNOWN]
    hotwords = normalise_hotwords(phrases)
    for entry in hotwords.refused:
        log.warning("/vosk: %s", hotwords.refusal(entry, "phrase_list"))
    return Options(
        sample_rate=round(config.sample_rate),
        n_best=max(1, config.max_alternatives),
        word_timestamps=config.words,
        hotwords=hotwords.phrases,
        casing=hotwords.casing,
        written=config.punctuate,
        endpoint_ms=endpoint_ms,
        alternative_words=config.words,
        adapt_speaker=adapt_speaker,
    )


def _control(message: str) -> VoskControl:
    parsed = _text(message)
    if isinstance(parsed, VoskConfig):
        raise BadMessage("the config must be the first message")
    return parsed


def _text(message: str) -> VoskConfig | VoskControl:
    try:
        return parse_vosk_text(message)
    except ProtocolError as e:
        raise (BadConfig if e.code == "bad_config" else BadMessage)(str(e)) from None
