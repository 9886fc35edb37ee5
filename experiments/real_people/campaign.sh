#!/usr/bin/env bash
# The real-people campaign (issue 81): the game voice packs prepared and labelled, then one
# network fine-tuned from models/default's own network with them in the mix and band
# augmentation, then read on real, narrowband and synthetic dev/test sets beside the peers.
# Every step resumes: prepare keeps its hypotheses and WAVs, train its checkpoint.
#   bash experiments/real_people/campaign.sh data    # TTS corpus, her prompts, prose, the games
#                                                    # and the five small packs (labelled from
#                                                    # hypotheses/, Whisper's hearing of each
#                                                    # clip), narrowband copy
#   bash experiments/real_people/campaign.sh stage1  # BUDGET_S of training (default 3600 s);
#       stage 2: RUN=runs/real2 INIT=runs/real1_bundle QUEEN_TIMES=1 LR=2e-4 P_LOWPASS=0.15 \
#                P_PHONE=0.1 P_8BIT=0.05 BUDGET_S=2400 ... stage1
#       stage 5: RUN=runs/real5 INIT=models/default LR=2e-4 BUDGET_S=3000 ... stage1 (with
#                data/packs/train.jsonl*PACKS_TIMES, 4, once `data` prepared it)
#       stage 6: stage 5 with Whisper's encoder as a teacher on the real clips:
#                harken teacher --manifest data/games/queen/train.jsonl data/games/sky/train.jsonl \
#                  data/packs/train.jsonl --out data/teacher_real; then stage 5's line with
#                RUN=runs/real6 TEACHER=data/teacher_real (W, the loss's weight, 0.5)
#       stage W1: the 3 x GRU 768 network (NET, the shape; models/default/wide at 4cc9070 as
#                a bundle of its own): RUN=runs/realw1 INIT=runs/wide_alone \
#                NET=scripts/net_mel_3x768.json LR=3e-4 BUDGET_S=3000 ... stage1
#   bash experiments/real_people/campaign.sh bundle  # stage1's best weights + models/default's LM
#   OUT=runs/realsoupw2 bash experiments/real_people/campaign.sh soup runs/realw2_bundle \
#       runs/wide_alone  # bundles of one shape averaged (BUNDLE*W weighs one W times); the
#                        # config, LM, search and punctuator are the first bundle's
#   bash experiments/real_people/campaign.sh eval    # every dev/test set, harken and the peers
#   bash experiments/real_people/campaign.sh decide  # CAND on real dev and TTS dev only (TAG)
#   bash experiments/real_people/campaign.sh baseline # models/default's per-utterance reports
#                                                     # (results/, not committed)
set -euo pipefail
cd "$(dirname "$0")/../.."
H=${H:-.venv/bin/harken}
E=experiments/real_people
RUN=${RUN:-runs/real1}
CAND=${CAND:-runs/real1_bundle}

narrowband() {  # a telephone copy of a manifest: 8 kHz G.711 mu-law, back at 16 kHz
  local src=$1 out=$2
  mkdir -p "$out/audio"
  .venv/bin/python - "$src" "$out" <<'PY'
import subprocess, sys
from pathlib import Path
from models.manifest import Utterance, read_manifest, write_manifest
src, out = Path(sys.argv[1]), Path(sys.argv[2])
rows = []
for u in read_manifest(src):
    dst = out / "audio" / (u.audio.stem + ".wav")
    if not dst.is_file():
        cmd = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", str(u.audio), "-af",
               "highpass=f=300,lowpass=f=3400", "-ar", "8000", "-c:a", "pcm_mulaw", "-f", "wav", "-"]
        mulaw = subprocess.run(cmd, check=True, capture_output=True).stdout
        back = ["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", "-", "-ar", "16000", "-c:a", "pcm_s16le", str(dst)]
        subprocess.run(back, input=mulaw, check=True)
    rows.append(Utterance(dst, u.text, u.duration, u.voice))
write_manifest(out / src.name, rows)
PY
}

case "${1:-}" in
  data)
    bash scripts/setup.sh --synth
    [ -f data/corpus/dev.jsonl ] || bash scripts/make_default.sh corpus
    [ -f data/asterisk/dev.jsonl ] || $H prepare asterisk --out data/asterisk
    [ -f data/prose/dev.jsonl ] || bash scripts/make_default.sh prose
    # Whisper's hypotheses of every clip, kept in git (hypotheses/): the same labels on every
    # machine, and minutes instead of two hours of recognition
    seed() { if [ -f "$E/hypotheses/$1.jsonl.gz" ]; then echo "--hypotheses $E/hypotheses/$1.jsonl.gz"; fi; }
    # shellcheck disable=SC2046  # seed's output is a flag and its value, or nothing
    $H prepare queen --out data/games/queen $(seed queen)
    # shellcheck disable=SC2046
    $H prepare sky --out data/games/sky $(seed sky)
    # shellcheck disable=SC2046
    $H prepare packs --out data/packs --workers 1 $(seed packs)
    narrowband data/corpus/dev.jsonl data/corpus_phone
    narrowband data/corpus/test.jsonl data/corpus_phone
    ;;
  stage1)
    mkdir -p runs
    SKY=""; [ -f data/games/sky/train.jsonl ] && SKY="data/games/sky/train.jsonl*${SKY_TIMES:-1}"
    PACKS=""; [ -f data/packs/train.jsonl ] && PACKS="data/packs/train.jsonl*${PACKS_TIMES:-4}"
    DISTIL=""; [ -n "${TEACHER:-}" ] && DISTIL="--teacher $TEACHER --distill-weight ${W:-0.5}"
    # shellcheck disable=SC2086
    $H train --train data/games/queen/train.jsonl*"${QUEEN_TIMES:-2}" $SKY $PACKS \
      data/corpus/train.jsonl*"${CORPUS_TIMES:-1}" data/asterisk/train.jsonl*4 \
      --dev data/games/queen/dev.jsonl --out "$RUN" \
      --init-from "${INIT:-models/default}" --model-config "${NET:-scripts/net_mel_3x512.json}" --device cpu \
      --precision auto --batch-size 16 --lr "${LR:-3e-4}" --warmup-steps 100 --epochs 1000 \
      --time-budget-s "${BUDGET_S:-3600}" --workers 1 --checkpoint-every 200 --dev-every 500 \
      --strategy alternated --sortagrad false --ema-decay 0.998 --threads 2 \
      --augment-preset light --p-lowpass "${P_LOWPASS:-0.25}" --p-telephone "${P_PHONE:-0.15}" \
      --p-8bit "${P_8BIT:-0.1}" $DISTIL
    ;;
  bundle)
    rm -rf "$CAND" && cp -r "$RUN/best" "$CAND"
    for f in lm.binary unigrams.txt decoder.json general.binary general.unigrams.txt general.LICENSE; do
      [ -f "$CAND/$f" ] || cp "models/default/$f" "$CAND/"
    done
    ;;
  soup)
    shift
    first=${1:?a bundle to average}
    .venv/bin/python experiments/soup/soup.py --base "${first%%\**}" "${OUT:?set OUT to the soup directory}" "$@"
    ;;
  eval|decide)
    # the decision sets first (real dev, TTS dev), then the test beside the peers, then the
    # narrowband copy and her prompts (`decide`: the candidate on the decision sets only);
    # JSON reports (per utterance) stay in runs/, their Markdown summaries are copied
    # beside this script
    TAG=${TAG:-real1}
    O=runs/${TAG}_eval
    mkdir -p "$O" "$E/reports"
    read_set() {  # BUNDLE TAG SET [more flags]
      local b=$1 tag=$2 set=$3
      shift 3
      local name
      name=$(echo "$set" | tr / _)
      $H eval --bundle "$b" --manifest "$set.jsonl" --beam --dtype "${DTYPE:-bf16}" "$@" \
        --out "$O/${name}_${tag}.json"
      cp "$O/${name}_${tag}.md" "$E/reports/"
    }
    if [ "$1" = decide ]; then
      for set in data/games/queen/dev data/corpus/dev; do read_set "$CAND" "$TAG" "$set"; done
      exit 0
    fi
    for set in data/games/queen/dev data/corpus/dev; do
      read_set "$CAND" "$TAG" "$set"
      read_set models/default pair "$set"
    done
    read_set "$CAND" "$TAG" data/games/queen/test --peers pocketsphinx whisper-tiny.en
    read_set models/default pair data/games/queen/test
    for set in data/corpus_phone/dev data/asterisk/dev data/prose/dev; do
      read_set "$CAND" "$TAG" "$set"
      read_set models/default pair "$set"
    done
    ;;
  baseline)
    # models/default on every set its figures name, into results/: the Markdown
    # summaries are committed, the per-utterance JSON beside them (what `harken compare` and
    # `decide`'s comparisons read) is not, so a fresh checkout remakes it here (~15 min)
    ev() {  # MANIFEST NAME [more flags]
      $H eval --bundle models/default --manifest "$1" --beam --dtype "${DTYPE:-bf16}" "${@:3}" \
        --out "results/default_eval_$2.json"
    }
    ev data/games/queen/dev.jsonl queen_dev
    ev data/corpus/dev.jsonl dev
    ev data/games/queen/test.jsonl queen_test
    ev data/corpus/test.jsonl test
    ev data/asterisk/test.jsonl real_test
    ev data/asterisk/dev.jsonl real_dev
    ev data/corpus_phone/dev.jsonl phone_dev
    ev data/prose/dev.jsonl prose_dev
    ev data/prose/test.jsonl prose_test
    ev data/corpus/train.jsonl train200 --limit 200
    ;;
  *) awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0"; exit 2 ;;
esac
