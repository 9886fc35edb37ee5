"""The model card: peers' rows beside ours with the gap stated, and further training sources."""

from __future__ import annotations

from typing import Any

from models.card import card, language_model_lines
from models.config import ModelConfig


def _row(wer: float) -> dict[str, Any]:
    return {"overall": {"wer": wer, "cer": wer / 2}}


def _meta() -> dict[str, Any]:
    return {"model": ModelConfig().to_dict(), "provenance": {}, "parameters": 1}


def test_the_card_states_the_distance_to_the_peers() -> None:
    report = {
        "utterances": 10,
        "peers": ["pocketsphinx", "whisper-tiny.en"],
        "decoders": {
            "pocketsphinx": _row(0.22),
            "whisper-tiny.en": _row(0.10),
            "greedy": _row(0.7),
            "beam": _row(0.49),
        },
    }
    text = card(_meta(), {}, {"test": report, "dev": {**report, "peers": []}})
    assert "- test (10 utterances): pocketsphinx: WER 22.0%" in text
    assert (
        "- test: harken beam WER 49.0%; pocketsphinx 22.0%, whisper-tiny.en 10.0% "
        "(39.0% behind the best peer)" in text
    )
    assert "- dev: harken" not in text  # no peers scored there
    assert "## Accuracy (`harken eval`)\n" in text  # reports that name no precision


def test_a_bundle_without_an_lm_says_so() -> None:
    report = {"utterances": 3, "decoders": {"beam": _row(0.3)}}
    text = card(_meta(), {}, {"dev": report})
    assert "## Language model\n- none: the bundle has no decoder.json" in text
    with_lm = card(_meta(), {}, {"dev": report}, language_model=["## Language model", "- x"])
    assert "- none" not in with_lm


def test_the_card_names_the_precision_its_scores_were_measured_in() -> None:
    report = {"utterances": 3, "dtype": "fp32", "decoders": {"beam": _row(0.3)}}
    text = card(_meta(), {}, {"dev": report, "test": report})
    assert "## Accuracy (`harken eval`, the network in fp32; other precisions: " in text


def test_the_card_says_what_owes_the_beams_errors() -> None:
    kinds = {
        "search": {"utterances": 2, "share": 0.05},
        "lm": {"utterances": 4, "share": 0.1},
        "network": {"utterances": 30, "share": 0.85},
    }
    beam = {"utterances": 9, "decoders": {"beam": _row(0.3)}}
    text = card(_meta(), {}, {"test": {**beam, "error_kinds": {"overall": kinds}}, "dev": beam})
    assert "## Where the beam's word errors come from" in text
    assert "- test: search 5.0%, LM 10.0%, network 85.0%" in text
    assert "- dev: search" not in text  # that report did not attribute its errors
    assert "come from" not in card(_meta(), {}, {"dev": beam})


def test_further_training_sources_are_listed() -> None:
    prepared = {
        "source": "asterisk",
        "kept": {"train": {"utterances": 293, "hours": 0.11, "voices": 1}},
    }
    synth = {"train": {"utterances": 7, "hours": 0.5, "hours_per_voice": {"kokoro:a": 0.5}}}
    text = card(_meta(), {}, {}, {"real speech": prepared, "kokoro": synth})
    assert "- real speech: train 293 utterances, 0.11 h (asterisk)" in text
    assert "- kokoro: train 7 utterances, 0.5 h; kokoro: 1 voice(s)" in text


def test_a_continued_model_keeps_the_data_its_earlier_stages_learnt() -> None:
    """The corpora of an earlier stage may be gone from the machine; its card is not."""
    before = card(
        _meta(),
        {
            "train": {"utterances": 10, "hours": 1.0, "hours_per_voice": {"flite:a": 1.0}},
            "dev": {"utterances": 3, "hours": 0.1, "hours_per_voice": {"flite:b": 0.1}},
        },
        {},
        {"kokoro": {"train": {"utterances": 7, "hours": 0.5, "hours_per_voice": {"kokoro:a": 1}}}},
    )
    now = {
        "train": {"utterances": 0, "hours": 0.0, "hours_per_voice": {}},
        "dev": {"utterances": 3, "hours": 0.1, "hours_per_voice": {"flite:b": 0.1}},
    }
    new = {"train": {"utterances": 5, "hours": 0.2, "hours_per_voice": {"pico:c": 0.2}}}
    text = card(_meta(), now, {}, {"new text": new}, None, before)
    data = text.split("## Data\n")[1].split("\n\n")[0].splitlines()
    assert data == [
        "- dev: 3 utterances, 0.1 h; flite: 1 voice(s)",
        "- new text: train 5 utterances, 0.2 h; pico: 1 voice(s)",
        "- train (learnt before this stage): 10 utterances, 1.0 h; flite: 1 voice(s)",
        "- kokoro (learnt before this stage): train 7 utterances, 0.5 h; kokoro: 1 voice(s)",
    ]
    # a third stage carries them on once, not nested
    again = card(_meta(), now, {}, {"new text": new}, None, text)
    assert again.count("learnt before this stage") == 2


def test_the_language_model_and_its_texts_are_described() -> None:
    fortunes = {"file": "c/lm_text.txt", "times": 3, "sentences": 26333, "words": 294844,
                "vocabulary": 22630}  # fmt: skip
    wordnet = {"file": "lm/wordnet.txt", "times": 1, "sentences": 168253, "words": 1444238,
               "vocabulary": 52702, "held_out": ["dev.jsonl", "test.jsonl"], "ngram": 6}  # fmt: skip
    decoder = {
        "order": 4,
        "unit": "word",
        "config": {"alpha": 0.59, "beta": 1.48, "beam_width": 192},
        "texts": [fortunes, wordnet],
    }
    names = {"c/lm_text.txt": "the corpus's fortunes that dev and test do not use"}
    lines = language_model_lines(decoder, 58924, 7_516_338, names)
    text = card(_meta(), {}, {}, None, lines)
    assert "## Language model\n- KenLM 4-gram over words, 58,924 words, 7.5 MB" in text
    assert (
        "- text: the corpus's fortunes that dev and test do not use, counted 3 times, "
        "26,333 sentences, 294,844 words, 22,630 distinct\n" in text
    )
    assert (
        "- text: lm/wordnet.txt, 168,253 sentences, 1,444,238 words, 52,702 distinct "
        "(none sharing 6 words with 2 held-out manifests)" in text
    )
    assert "- weight 0.59, insertion bonus 1.48 (`harken tune-lm` on dev), beam 192" in text
    assert "blank penalty" not in text  # none set, none described
    decoder["config"]["blank_penalty"] = 0.75  # type: ignore[index]
    lines = language_model_lines(decoder, 58924, 7_516_338)
    assert any(line.startswith("- blank penalty 0.75: ") for line in lines)
    assert not any("early commit" in line for line in lines)  # none set, none described
    assert not any("look-ahead" in line for line in lines)
    decoder["config"]["lookahead"] = 0.75  # type: ignore[index]
    lines = language_model_lines(decoder, 58924, 7_516_338)
    assert any(line.startswith("- unigram look-ahead 0.75: ") for line in lines)
    decoder["config"]["commit_s"] = 1.0  # type: ignore[index]
    lines = language_model_lines(decoder, 58924, 7_516_338)
    assert any(line.startswith("- early commit 1.0 s: ") for line in lines)
    del decoder["texts"]  # an LM built before build-lm recorded them: said, not invented
    lines = language_model_lines(decoder, 58924, 7_516_338)
    assert [line for line in lines if line.startswith("- text: ")] == [
        "- text: not recorded (decoder.json was written before build-lm kept it)"
    ]


def test_a_mixed_in_general_lm_is_described_with_its_weight() -> None:
    decoder = {
        "order": 4,
        "unit": "word",
        "config": {"alpha": 0.8, "beta": 0.5, "beam_width": 768},
        "texts": [],
        "mix": [
            {"lm": "general.binary", "order": 3, "ngrams": [72547, 2051541, 1669625],
             "vocabulary": 72266, "source": "en-us.lm.bin (sha256 db21)", "weight": 0.8}
        ],
    }  # fmt: skip
    names = {"general.binary": "PocketSphinx's US English trigram"}
    lines = language_model_lines(decoder, 80000, 8_000_000, names)
    assert (
        "- interpolated at 0.8 with PocketSphinx's US English trigram: a 3-gram "
        "(72,547/2,051,541/1,669,625 n-grams), 72,266 words spelt in the alphabet "
        "(`harken mix-lm`)" in lines
    )
    unnamed = language_model_lines(decoder, 80000, 8_000_000)
    assert any("interpolated at 0.8 with en-us.lm.bin (sha256 db21)" in line for line in unnamed)
