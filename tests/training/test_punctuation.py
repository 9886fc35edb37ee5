"""The punctuation model's labels, its training, and the numpy network it exports."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import torch

from models.punctuation import (
    CASES,
    MARKS,
    PunctuationConfig,
    Punctuator,
    Reading,
    write_all,
)
from training.punctuation import Net, TrainSettings, _batch, build_vocab, score, train
from training.punctuation_data import Document, TextStats, label_sentence, read_documents


def _labels(raw: str) -> list[tuple[str, str, str]]:
    return [(w.word, MARKS[w.mark], CASES[w.case]) for w in label_sentence(raw, TextStats())]


def test_a_sentence_becomes_the_recognisers_words_with_their_marks_and_case() -> None:
    assert _labels('Mr. Smith said, "Is it 1961?"') == [
        ("mister", "", "title"),
        ("smith", "", "title"),
        ("said", ",", "lower"),
        ("is", "", "title"),
        ("it", "", "lower"),
        ("nineteen", "", "lower"),
        ("sixty", "", "lower"),
        ("one", "?", "lower"),
    ]
    # '!' is written as '.', ';' and dashes as ','; an UPPER word keeps its own case label
    assert _labels("Stop -- the FBI is here; run!") == [
        ("stop", ",", "title"),
        ("the", "", "lower"),
        ("fbi", "", "upper"),
        ("is", "", "lower"),
        ("here", ",", "lower"),
        ("run", ".", "lower"),
    ]
    stats = TextStats()
    assert label_sentence("THIS IS ALL SHOUTED.", stats) == []
    assert stats.dropped["shouting"] == 1


def test_the_exported_numpy_network_computes_what_the_torch_network_trained() -> None:
    torch.manual_seed(0)
    vocab = ["<pad>", "<unk>", "<end>", "the", "jury", "said", "is", "it", "true"]
    config = PunctuationConfig(vocab=len(vocab), dim=8, hidden=12, ffn=10, lookahead=2)
    net = Net(config)
    punctuator = net.export(vocab, {})
    words = ["the", "jury", "said", "is", "it", "true", "zebra"]
    doc = Document("d", [label_sentence("The jury said, is it true zebra?", TextStats())])
    ids = {w: i for i, w in enumerate(vocab)}
    word_ids, suffixes, _, _ = _batch(doc.sentences, ids, config, 0.0, random.Random(0))
    with torch.no_grad():
        logits = net(word_ids, suffixes)[0].numpy()
    reading = Reading()
    punctuator.feed(reading, words, end=True)
    np.testing.assert_allclose(punctuator._scores(reading, 0, len(words)), logits, atol=1e-5)
    # fed in pieces, the network decides each word as fed all at once
    pieces = Reading()
    for w in words:
        punctuator.feed(pieces, [w])
    punctuator.feed(pieces, [], end=True)
    assert punctuator.write(pieces, 0, len(words)) == punctuator.write(reading, 0, len(words))


def test_training_learns_marks_and_capitals_and_the_model_survives_a_round_trip(
    tmp_path: Path,
) -> None:
    rng = random.Random(0)
    names = ["anna", "bob", "carl"]
    sentences = []
    for _ in range(400):
        name = rng.choice(names).capitalize()
        sentences.append(
            rng.choice([f"Where is {name}?", f"{name} is here.", f"Well, {name} left."])
        )
    text = tmp_path / "train.jsonl"
    text.write_text(json.dumps({"name": "toy", "sentences": sentences}) + "\n")
    stats = TextStats()
    docs = read_documents(text, stats)
    config = PunctuationConfig(vocab=0, dim=16, hidden=32, ffn=32, lookahead=2)
    settings = TrainSettings(epochs=30, batch=8, lr=2e-2, unk_rate=0.0, time_budget_s=300)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny network: more threads only wait on each other
    try:
        punctuator = train(docs, {}, config, settings)
    finally:
        torch.set_num_threads(threads)
    punctuator.save(tmp_path / "model")
    loaded = Punctuator.load(tmp_path / "model")
    assert loaded is not None
    words = ["where", "is", "bob", "well", "anna", "left", "carl", "is", "here"]
    written = " ".join(str(w) for w in write_all(loaded, words))
    assert written == "Where is Bob? Well, Anna left. Carl is here."
    scores = score(loaded, docs, settings.max_words)
    assert scores.table()["?"]["f1"] > 0.95
    assert scores.case_right / scores.words > 0.95
    assert build_vocab(docs, 100)[:3] == ["<pad>", "<unk>", "<end>"]


def test_the_command_trains_the_sizes_asked_and_writes_its_report(tmp_path: Path) -> None:
    import argparse

    from training import punctuation as cli

    text = tmp_path / "text"
    text.mkdir()
    doc = {"name": "d", "sentences": ["Where is Anna?", "Bob is here.", "Well, Carl left."] * 20}
    for name in ("train.jsonl", "held_brown.jsonl", "held_fortunes.jsonl"):
        (text / name).write_text(json.dumps(doc) + "\n")
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    argv = ["--text", text, "--out", tmp_path / "model", "--epochs", "1", "--dim", "8"]
    argv += ["--hidden", "12", "--ffn", "10", "--lookahead", "2", "--time-budget-s", "30"]
    assert cli.main(parser.parse_args([str(a) for a in argv])) == 0
    loaded = Punctuator.load(tmp_path / "model")
    assert loaded is not None
    c = loaded.config
    assert (c.dim, c.hidden, c.ffn, c.lookahead) == (8, 12, 10, 2)
    report = json.loads((tmp_path / "model" / "report.json").read_text())
    assert set(report["sets"]) == {"Brown, held-out fifth", "fortunes, one in twenty"}
    assert report["sets"]["Brown, held-out fifth"]["words"] == 20 * 9
