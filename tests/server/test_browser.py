"""The demo page in headless Chromium: a WAV file as the microphone, the bundled default
model behind it, and the spoken words on the page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from server.config import DEFAULT_BUNDLE, ServerConfig
from tests.server.browser import open_page
from tests.server.serving import reference_text, running, speak

SENTENCE = "the weather is nice today so we will go for a long walk"
# the finals shown while the page still listens (the pause after the sentence ends a
# segment), or 'closed' if none came before Stop
FINAL_WHILE_LISTENING = (
    "document.body.dataset.state === 'closed' ? 'closed' : "
    "document.getElementById('status').textContent.startsWith('listening') && "
    "document.getElementById('final').textContent"
)


@pytest.fixture(scope="module")
def spoken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SENTENCE read by espeak-ng at 16 kHz, with a second of silence after it."""
    path = tmp_path_factory.mktemp("mic") / "sentence.wav"
    silence = np.zeros(16000, np.float32)
    audio = np.concatenate([silence[:4000], speak(SENTENCE), silence])
    sf.write(path, audio, 16000, subtype="PCM_16")
    return path


def test_the_page_streams_the_microphone_and_shows_the_words(spoken: Path) -> None:
    audio, _ = sf.read(spoken, dtype="float32")
    offline = reference_text(Path(DEFAULT_BUNDLE), audio).split()
    assert len(set(offline) & set(SENTENCE.split())) >= 6, f"the model heard {offline}"
    with running(ServerConfig(dtype="fp32", bundle=DEFAULT_BUNDLE)) as server:
        seconds = len(audio) / 16000 + 2.0
        with open_page(f"{server.url}/?autostart=1&seconds={seconds:.1f}", spoken) as page:
            live = page.wait_for(FINAL_WHILE_LISTENING, timeout=seconds + 40)
            assert live != "closed", "no final came while the page listened: only Stop sent one"
            status = page.wait_for(
                "document.body.dataset.state === 'closed' && "
                "document.getElementById('status').textContent",
                timeout=seconds + 40,
            )
            shown = page.evaluate("document.getElementById('final').textContent").split()
    assert status == "done"
    assert shown[: len(live.split())] == live.split()  # later finals add to it
    # Chromium captures at its own rate (resampled again by the server) and starts a little
    # late, so the page's words may differ at the edges from the offline transcript.
    common = set(shown) & set(offline)
    assert len(common) >= 0.7 * len(set(offline)), f"page {shown}, offline {offline}"
