"""A general LM interpolated with a bundle's own: the mixture's scores, `harken mix-lm`, and
PocketSphinx's trie format read into ARPA (real pocketsphinx and KenLM throughout)."""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

import kenlm
import numpy as np
import pytest

from decoder import mix, sphinx_lm
from decoder.beam import DecoderConfig
from decoder.kenlm_tools import cached_tools
from decoder.lm import InterpolatedLM, KenLM, unigram_log_probs
from decoder.loading import load_decoder, write_decoder_json
from decoder.sphinx_lm import LOG10_OF_UNIT, read_sphinx_trie
from tests.decoder.conftest import TINY, WORD_BIGRAMS, WORDS, spell, write_arpa

# the general LM: knows "bb", which the bundle's LM (conftest's WORDS) does not
GENERAL = """\\data\\
ngram 1=6
ngram 2=4
ngram 3=2

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.5
-0.7\ta\t-0.3
-0.9\tb\t-0.2
-0.4\tbb\t-0.4
-1.5\tab\t-0.1

\\2-grams:
-0.2\t<s> bb\t-0.1
-0.3\tbb a\t-0.2
-0.4\t<s> a\t-0.2
-0.5\ta b\t-0.1

\\3-grams:
-0.05\t<s> bb a
-0.15\t<s> a b

\\end\\
"""


@pytest.fixture
def general(tmp_path: Path) -> Path:
    path = tmp_path / "general.arpa"
    path.write_text(GENERAL)
    return path


def _bundle(directory: Path) -> Path:
    directory.mkdir()
    write_arpa(directory / "lm.binary", WORDS, WORD_BIGRAMS)  # KenLM reads ARPA by content
    words = sorted(w for w in WORDS if not w.startswith("<"))
    (directory / "unigrams.txt").write_text("".join(w + "\n" for w in words))
    config = DecoderConfig(alpha=1.0, beta=0.5, beam_width=16)
    write_decoder_json(directory, config, "word", 2, "lm.binary", "unigrams.txt")
    return directory


def _run(**kwargs: object) -> int:
    parser = argparse.ArgumentParser()
    mix.add_arguments(parser)
    argv = [x for k, v in kwargs.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    return mix.main(parser.parse_args(argv))


def test_the_mixture_adds_probabilities_at_the_weights(general: Path) -> None:
    own = KenLM(write_arpa(general.with_name("own.arpa"), WORDS, WORD_BIGRAMS), "word")
    gen = KenLM(general, "word")
    mixed = InterpolatedLM([own, gen], [0.3, 0.7])
    state, own_state, gen_state = mixed.begin(), own.begin(), gen.begin()
    for word in ("bb", "a", "ab", "zz"):
        ln, state, known = mixed.score(state, word)
        a, own_state, known_a = own.score(own_state, word)
        b, gen_state, known_b = gen.score(gen_state, word)
        assert ln == pytest.approx(math.log(0.3 * math.exp(a) + 0.7 * math.exp(b)))
        assert known == (known_a or known_b)
        assert known == (word != "zz")
    end = math.log(0.3 * math.exp(own.finish(own_state)) + 0.7 * math.exp(gen.finish(gen_state)))
    assert mixed.finish(state) == pytest.approx(end)


def test_bad_mixtures_are_refused_with_a_reason(word_lm: KenLM, char_lm: KenLM) -> None:
    with pytest.raises(ValueError, match="sum to 1"):
        InterpolatedLM([word_lm, word_lm], [0.5, 0.6])
    with pytest.raises(ValueError, match="two or more"):
        InterpolatedLM([word_lm], [1.0])
    with pytest.raises(ValueError, match="different units"):
        InterpolatedLM([word_lm, char_lm], [0.5, 0.5])


@pytest.mark.skipif(cached_tools() is None, reason="KenLM's build_binary is not built")
def test_mix_lm_lets_the_search_hear_a_word_only_the_general_lm_knows(
    tmp_path: Path, general: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bundle = _bundle(tmp_path / "bundle")
    # clearly "bb a"; the bundle's LM has no "bb", so its search settles for words it knows
    log_probs = spell("b_b a", TINY, p=0.99)
    alone = load_decoder(bundle, TINY, 0.02).decode(log_probs)[0].text
    assert alone != "bb a"

    assert _run(bundle=bundle, lm=general, weight=0.7) == 0
    assert "mixed in at 0.7" in capsys.readouterr().out
    doc = json.loads((bundle / "decoder.json").read_text())
    (entry,) = doc["mix"]
    assert entry["weight"] == 0.7 and entry["order"] == 3 and entry["ngrams"] == [6, 4, 2]
    assert "bb" in (bundle / entry["unigrams"]).read_text().split()
    mixed = load_decoder(bundle, TINY, 0.02)
    assert isinstance(mixed.lm, InterpolatedLM)
    assert mixed.decode(log_probs)[0].text == "bb a"
    # what `harken bench-decoder` reads, to compare searches on one LM: the bundle's own
    own = load_decoder(bundle, TINY, 0.02, mix=False)
    assert isinstance(own.lm, KenLM) and own.decode(log_probs)[0].text == alone

    # and out again: the bundle decodes as before
    assert _run(bundle=bundle, remove="general") == 0
    assert "mix" not in json.loads((bundle / "decoder.json").read_text())
    assert not (bundle / "general.binary").exists()
    assert load_decoder(bundle, TINY, 0.02).decode(log_probs)[0].text == alone


@pytest.mark.skipif(cached_tools() is None, reason="KenLM's build_binary is not built")
def test_mix_lm_refuses_bad_requests_with_a_reason(tmp_path: Path, general: Path) -> None:
    bundle = _bundle(tmp_path / "bundle")
    before = (bundle / "decoder.json").read_text()
    with pytest.raises(SystemExit, match="must leave the bundle's own LM a share"):
        _run(bundle=bundle, lm=general, weight=1.0)
    with pytest.raises(SystemExit, match="does not exist"):
        _run(bundle=bundle, lm=tmp_path / "missing.arpa", weight=0.5)
    text = tmp_path / "notes.txt"
    text.write_text("just some words\n")
    with pytest.raises(SystemExit, match="neither an ARPA file nor a PocketSphinx"):
        _run(bundle=bundle, lm=text, weight=0.5)
    with pytest.raises(SystemExit, match="no mixed LM 'general'"):
        _run(bundle=bundle, remove="general")
    with pytest.raises(SystemExit, match="no decoder.json"):
        _run(bundle=tmp_path, lm=general, weight=0.5)
    assert (bundle / "decoder.json").read_text() == before  # nothing half-written
    assert not (bundle / "general.binary").exists()


@pytest.mark.parametrize("order", [2, 3])
def test_a_pocketsphinx_trie_reads_back_as_the_arpa_it_was_built_from(
    tmp_path: Path, order: int
) -> None:
    ps = pytest.importorskip("pocketsphinx")
    arpa = tmp_path / "general.arpa"
    if order == 3:
        arpa.write_text(GENERAL)
    else:
        write_arpa(arpa, WORDS, WORD_BIGRAMS)
    logmath = ps.LogMath()  # held: the model keeps a pointer to it
    model = ps.NGramModel(ps.Config(), logmath, str(arpa))
    model.write(str(tmp_path / "general.bin"), ps.NGramModel.str_to_type("bin"))
    del model
    back = tmp_path / "back.arpa"
    sphinx_lm.write_arpa(read_sphinx_trie(tmp_path / "general.bin"), back)
    original, read = kenlm.Model(str(arpa)), kenlm.Model(str(back))
    for sentence in ("bb a", "a b", "bb a b ab", "ab bb", "a a a", "ab ba", "zz a"):
        assert read.score(sentence) == pytest.approx(original.score(sentence), abs=1e-3)


def test_the_pocketsphinx_english_lm_reads_whole_and_agrees_with_pocketsphinx() -> None:
    ps = pytest.importorskip("pocketsphinx")
    path = Path(ps.get_model_path()) / "en-us" / "en-us.lm.bin"
    lm = read_sphinx_trie(path)
    # the header counts 2,051,547 bigrams; the trie holds 2,051,541 (its writer trusts the header)
    assert [len(o.prob) for o in lm.orders] == [72547, 2051541, 1669625]
    logmath = ps.LogMath()
    model = ps.NGramModel(ps.Config(), logmath, str(path))
    rng = random.Random(0)
    for order in lm.orders[1:]:
        for i in rng.sample(range(len(order.prob)), 50):
            words = [lm.vocabulary[w] for w in order.words[i]]
            expected = model.prob(list(reversed(words))) * LOG10_OF_UNIT
            assert order.prob[i] == pytest.approx(expected, abs=2e-4), words
    assert np.all(lm.orders[2].prob <= 0)


def test_something_else_is_not_taken_for_a_pocketsphinx_lm(tmp_path: Path) -> None:
    path = tmp_path / "lm.arpa"
    path.write_text(GENERAL)
    with pytest.raises(ValueError, match="not a PocketSphinx trie LM"):
        read_sphinx_trie(path)


def test_a_bundle_with_a_bad_mixture_names_its_file(tmp_path: Path, general: Path) -> None:
    bundle = _bundle(tmp_path / "bundle")
    doc = json.loads((bundle / "decoder.json").read_text())
    doc["mix"] = [{"lm": general.name, "weight": 1.5}]
    (bundle / general.name).write_text(GENERAL)
    (bundle / "decoder.json").write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"decoder.json: bad mix .*sum to 1"):
        load_decoder(bundle, TINY, 0.02)


def test_unigram_scores_ignore_history(tmp_path: Path) -> None:
    """A word's look-ahead estimate is its probability with no history: KenLM's null
    context for one model, the weighted sum of those for a mixture."""
    one = KenLM(write_arpa(tmp_path / "one.arpa", WORDS, WORD_BIGRAMS))
    other = KenLM(write_arpa(tmp_path / "two.arpa", {**WORDS, "a": -0.2, "ba": -2.0}, {}))
    words = ["a", "ab", "ba", "zz"]
    got = unigram_log_probs(one, words)
    want = [WORDS[w] if w in WORDS else WORDS["<unk>"] for w in words]
    np.testing.assert_allclose(got, np.array(want) * math.log(10), rtol=1e-6)
    mixed = unigram_log_probs(InterpolatedLM([one, other], [0.3, 0.7]), words)
    p2 = np.exp(unigram_log_probs(other, words))
    np.testing.assert_allclose(mixed, np.log(0.3 * np.exp(got) + 0.7 * p2), rtol=1e-6)
