"""Which stage of serving a sampled server stack belongs to.

Input: py-spy's raw (collapsed) output, one line per distinct stack with its sample count,
recorded with `--subprocesses --threads`:

    process 812:"python -m harken_cli serve";thread (815): model_0;Thread._bootstrap
    (threading.py:1002);...;ModelRunner.run_sync (server/runner.py:122);... 15

(one line in the file; frames outermost first, `Class.function (file:line)`, files shortened
by py-spy to their package path). A decoder process's lines carry a second `process` token.

Classification: an ordered rule list, first match wins. A rule names a stage and frame
patterns (file glob, function glob); it matches a stack when any frame matches one of them
(the `idle` rule looks at the innermost frame only), and some rules match a thread name
instead. The order runs from the most specific to the least: a decoder call's pipe traffic
is IPC before it is that call; the model thread is the model step whatever it calls
(torch, or handing the result back to the loop); building and sending a message is
`send` even though it runs inside the WebSocket handler that also receives. What no rule
claims is `other` (the event loop's own scheduling, starlette/uvicorn glue, session
bookkeeping, Batch Dispatch, handing work to the decoder threads, a decoder stream's start,
metrics, HTTP: handshakes and /metrics, which arrive by the same socket reads).

Idle: py-spy leaves out threads the OS reports sleeping (an idle server gives no samples at
all), but a thread is still sampled at a blocking call when it is runnable there: just woken
and waiting for a core (on 2 busy cores, often), or about to block (`--nonblocking` reads a
thread's state and its stack at slightly different moments). Such stacks (innermost frame
`select`, a pipe read, a queue or condition wait) are `idle`, excluded from the CPU totals.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

IDLE, OTHER = "idle", "other"


@dataclass(frozen=True)
class Frame:
    function: str  # qualified where py-spy gives it, e.g. "ModelRunner.run_sync"
    file: str  # as py-spy shortens it, e.g. "server/runner.py", "asyncio/base_events.py"
    line: int | None = None


@dataclass(frozen=True)
class Stack:
    frames: tuple[Frame, ...]  # outermost first
    count: int  # samples of exactly this stack
    process: str = ""  # the innermost `process PID:"cmdline"` token, without "process "
    thread: str = ""  # the thread's name (or id when py-spy gives no name)
    child: bool = False  # sampled in a child process of the server (a decoder process)


@dataclass(frozen=True)
class Rule:
    stage: str
    frames: tuple[tuple[str, str], ...] = ()  # (file glob, function glob)
    thread: str = ""  # thread-name glob; the rule then matches any stack of that thread
    innermost: bool = False  # match the innermost frame only

    def matches(self, stack: Stack) -> bool:
        if self.thread:
            return not stack.child and fnmatchcase(stack.thread, self.thread)
        frames = stack.frames[-1:] if self.innermost else stack.frames
        return any(_frame_matches(f, file, fn) for f in frames for file, fn in self.frames)


def _frame_matches(frame: Frame, file_glob: str, function_glob: str) -> bool:
    """A file glob matches the shortened path (an absolute one, where py-spy gives it: its
    tail); a function glob with a '.' matches the qualified name, one without the bare name."""
    file_ok = fnmatchcase(frame.file, file_glob) or (
        frame.file.startswith("/") and fnmatchcase(frame.file, "*/" + file_glob)
    )
    name = frame.function if "." in function_glob else frame.function.rsplit(".", 1)[-1]
    return file_ok and fnmatchcase(name, function_glob)


# stage -> what it covers, in report order
STAGES: dict[str, str] = {
    "ws_receive": "WebSocket receive and frame decode, protocol messages parsed",
    "audio_features": "PCM decode, resampling, features (server/audio.py, models/features.py)",
    "model_step": "the model thread (runner, streaming step, torch) and the hand-off to it",
    "decoder_advance": "beam search advance over a chunk's log-probs",
    "decoder_partial": "the best hypothesis for a partial",
    "decoder_finalize": "n-best and word times at the end of a segment",
    "decoder_ipc": "pickling and pipe I/O between the server and its decoder processes",
    "send": "building partials/finals, JSON encode, WebSocket send and socket write",
    OTHER: "event loop, ASGI glue, session and dispatch bookkeeping, decoder start, HTTP",
    IDLE: "sampled at a blocking wait (just woken, or about to block); not CPU work",
}

_DECODER = ("decoder/*", "server/decoder_procs.py")

RULES: tuple[Rule, ...] = (
    Rule(
        IDLE,
        (
            ("selectors.py", "select"),
            ("multiprocessing/connection.py", "_recv"),
            ("multiprocessing/connection.py", "_poll"),
            ("multiprocessing/connection.py", "wait"),
            ("threading.py", "wait"),
            ("queue.py", "get"),
            ("concurrent/futures/thread.py", "_worker"),  # innermost: blocked in queue.get
        ),
        innermost=True,
    ),
    Rule(
        "decoder_ipc",
        (
            ("multiprocessing/connection.py", "*"),
            ("multiprocessing/reduction.py", "*"),
            ("pickle.py", "*"),
        ),
    ),
    Rule("decoder_finalize", tuple((f, "finalize") for f in _DECODER)),
    Rule("decoder_partial", tuple((f, "partial") for f in _DECODER)),
    Rule("decoder_advance", tuple((f, "advance") for f in _DECODER)),
    Rule(
        "model_step",
        (
            ("server/runner.py", "*"),
            ("models/streaming.py", "*"),
            ("models/ds2.py", "*"),
            ("models/warp.py", "*"),
            ("torch/*", "*"),
        ),
    ),
    Rule("model_step", thread="model_*"),  # its thread's remainder: queue, result hand-off
    Rule(
        "audio_features",
        (
            ("server/audio.py", "*"),
            ("models/features.py", "*"),
            ("models/onset.py", "*"),
            ("soxr/*", "*"),
            ("server/session.py", "Session._add_frames"),
            ("server/transport.py", "audio_frame"),
        ),
    ),
    Rule(
        "send",
        (
            ("server/session.py", "Session._final"),
            ("server/session.py", "Session._alternative"),
            ("server/session.py", "_words"),
            ("pydantic/main.py", "BaseModel.__init__"),
            ("pydantic/main.py", "BaseModel.model_dump*"),
            ("json/encoder.py", "*"),
            ("json/__init__.py", "dumps"),
            ("starlette/websockets.py", "WebSocket.send*"),
            ("uvicorn/protocols/websockets/*", "*.send"),
            ("server/ws_frames.py", "*.send"),
            ("server/ws_frames.py", "*._wait_for_reader"),
            ("websockets/protocol.py", "*.send_*"),
            ("websockets/protocol.py", "*.data_to_send"),
            ("websockets/frames.py", "*.serialize"),
            ("asyncio/selector_events.py", "*Transport.write"),
            ("asyncio/selector_events.py", "*Transport._write_*"),
        ),
    ),
    # HTTP (WebSocket handshakes, /metrics) before the socket reads that carry it
    Rule(OTHER, (("uvicorn/protocols/http/*", "*"), ("h11/*", "*"), ("httptools/*", "*"))),
    Rule(
        "ws_receive",
        (
            ("server/transport.py", "receive"),
            ("server/protocol.py", "*"),
            ("server/ws_frames.py", "*"),
            ("starlette/websockets.py", "WebSocket.receive*"),
            # not every uvicorn frame: its `run_asgi` is the outermost frame of the whole app
            ("uvicorn/protocols/websockets/*", "data_received"),
            ("uvicorn/protocols/websockets/*", "handle_*"),
            ("uvicorn/protocols/websockets/*", "send_receive_event_to_app"),
            ("uvicorn/protocols/websockets/*", "receive"),
            ("websockets/*", "*"),
            ("asyncio/selector_events.py", "*Transport._read_*"),
            ("json/decoder.py", "*"),
        ),
    ),
)

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
_THREAD = re.compile(r"^thread \((?P<id>[^)]*)\)(?::\s*(?P<name>.*))?$")


def parse_line(line: str) -> Stack | None:
    """One raw line -> a Stack; None for a blank or malformed line."""
    body, _, count = line.strip().rpartition(" ")
    if not body or not count.isdigit():
        return None
    frames, process, thread, processes = [], "", "", 0
    for token in _tokens(body):
        if token.startswith("process "):
            process, processes = token[len("process ") :], processes + 1
        elif m := _THREAD.match(token):
            thread = (m["name"] or m["id"]).strip()
        elif m := _FRAME.match(token):
            frames.append(Frame(m["function"], m["file"], int(m["line"]) if m["line"] else None))
        else:
            frames.append(Frame(token, ""))
    return Stack(tuple(frames), int(count), process, thread, child=processes > 1)


def _tokens(body: str) -> list[str]:
    """Split at ';', except inside a process token's quoted command line (which may hold
    one, as a multiprocessing child's `-c "...; spawn_main(...)"` does)."""
    tokens: list[str] = []
    for piece in body.split(";"):
        if tokens and tokens[-1].startswith("process ") and tokens[-1].count('"') % 2:
            tokens[-1] += ";" + piece
        else:
            tokens.append(piece)
    return tokens


def parse(text: str) -> list[Stack]:
    return [s for line in text.splitlines() if (s := parse_line(line)) is not None]


def classify(stack: Stack, rules: Sequence[Rule] = RULES) -> str:
    """The stage of the first rule that matches; `other` when none does."""
    for rule in rules:
        if rule.matches(stack):
            return rule.stage
    return OTHER


def tally(stacks: Iterable[Stack]) -> dict[str, int]:
    """Samples per stage, every stage of STAGES present (0 where none fell)."""
    counts = Counter({stage: 0 for stage in STAGES})
    for stack in stacks:
        counts[classify(stack)] += stack.count
    return {stage: counts[stage] for stage in STAGES}


def role(stack: Stack) -> str:
    """Which of the server's workers the stack ran on."""
    if stack.child:
        return "decoder processes"
    if stack.thread == "MainThread":
        return "event loop"
    if stack.thread.startswith("model"):
        return "model thread"
    if stack.thread.startswith("decoder"):
        return "decoder threads"
    return "other threads"


def by_role(stacks: Iterable[Stack]) -> dict[str, int]:
    """Non-idle samples per worker (event loop, model thread, decoder threads/processes)."""
    counts: Counter[str] = Counter()
    for stack in stacks:
        if classify(stack) != IDLE:
            counts[role(stack)] += stack.count
    return dict(counts.most_common())


def top_frames(stacks: Iterable[Stack], per_stage: int = 5) -> dict[str, list[tuple[str, int]]]:
    """Per stage, the innermost frames (`function (file)`) with the most samples."""
    counters: dict[str, Counter[str]] = {stage: Counter() for stage in STAGES}
    for stack in stacks:
        if stack.frames:
            last = stack.frames[-1]
            counters[classify(stack)][f"{last.function} ({last.file})"] += stack.count
    return {stage: c.most_common(per_stage) for stage, c in counters.items() if c}
