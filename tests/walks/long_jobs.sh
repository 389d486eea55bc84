#!/usr/bin/env bash
# Long jobs on a real model, in a REAL X window (not part of `make test`): SmolLM2-135M-Instruct, an
# 8,000-token prompt pasted into the Attention tab (the busy line with its progress and ETA, the previous
# prompt greyed and named), Cancel, Run again, the long head on the Head page, then a patching run on a
# 14-token prompt and a second one with another corrupted prompt (the old numbers greyed and named while
# the new ones are measured). Each step takes a screenshot; open every one at full size afterwards.
#
#   tests/walks/long_jobs.sh [WIDTHxHEIGHT ...]     default: 1280x800 1024x768
#
# Needs the project's .venv (make test or make run builds it), xclip (to paste the prompt) and the xwalk
# helper that starts a virtual screen with a window manager (XWALK, default ../shared/tools/xwalk beside
# the checkout). Screenshots go to $XWALK_DIR/<size>/ (default /tmp/walk-long-jobs/<size>/).
#
# The clicks are screen pixels read off the screenshots of each size (the window fills the screen); a
# change of layout moves them: look at the screenshots, and update the table below.
set -euo pipefail
cd "$(dirname "$0")/../.."
XWALK=${XWALK:-../shared/tools/xwalk}
ROOT=${XWALK_DIR:-/tmp/walk-long-jobs}
sizes=("$@"); [[ ${#sizes[@]} -gt 0 ]] || sizes=(1280x800 1024x768)
command -v xclip >/dev/null || { apt-get update -qq >/dev/null && apt-get install -y -qq xclip >/dev/null; }

# size → "prompt box | Cancel on the banner | Run again | Head tab (after a long trace) | prompt box (after)
#          | Patching tab | corrupted prompt box | Patch"
declare -A AT=(
  [1280x800]="670,125 1205,713 1160,129 512,229 670,140 1156,185 760,315 1032,299"
  [1024x768]="535,125 950,666 912,129 442,229 505,140 464,213 598,330 777,313"
)

mkdir -p "$ROOT"
prompt=$ROOT/prompt-8000.txt
.venv/bin/python - "$prompt" <<'EOF'
import random, sys
from model.io.gguf.load import packaged_gguf
from model.io.pretrained import open_model
tok = open_model(packaged_gguf()).tokenizer
words = open("README.md", encoding="utf-8").read().split()
rng, text = random.Random(0), ""
while len(tok.encode(text)) < 8000:
    text += " " + " ".join(rng.sample(words, len(words)))
open(sys.argv[1], "w", encoding="utf-8").write(tok.decode(tok.encode(text)[:7998]))
EOF

for size in "${sizes[@]}"; do
  export XWALK_DIR=$ROOT/$size
  rm -rf "$XWALK_DIR"; mkdir -p "$XWALK_DIR"
  log=$XWALK_DIR/walk.log
  say() { echo "$*" | tee -a "$log"; }
  x() { "$XWALK" "$@"; }
  shot() { x shot "$1" >/dev/null; say "shot $1"; }
  read -r P CANCEL AGAIN HEAD P2 PATCHING CORRUPT PATCH <<<"${AT[$size]}"
  xy() { echo "${1%,*} ${1#*,}"; }

  say "== $size: SmolLM2-135M-Instruct from the package"
  x start "$size" -- package:SmolLM2-135M-Instruct | tee -a "$log"
  sleep 25
  x keys ctrl+3; sleep 6; shot 01-attention

  say "-- paste 7,998 tokens: at once the busy line, and the previous prompt greyed and named"
  (DISPLAY=${XWALK_DISPLAY:-:77} xclip -selection clipboard -i "$prompt" &); sleep 1
  x click $(xy "$P"); x keys ctrl+a ctrl+v; sleep 1; shot 02-busy
  sleep 12; shot 03-progress
  say "-- Cancel: the previous prompt stays, said to be the previous one"
  x click $(xy "$CANCEL"); sleep 1; shot 04-cancelled
  say "-- Run again, to the end (about 35 s on a quiet 2-core machine)"
  x click $(xy "$AGAIN"); sleep 50; shot 05-traced
  x click $(xy "$HEAD"); sleep 12; shot 06-head-8000

  say "-- a 14-token prompt, then the Patching page: 690 patched runs, counted"
  x click $(xy "$P2"); x keys ctrl+a; x type "When Mary and John went to the store, John gave a drink to"; sleep 4
  x click $(xy "$PATCHING"); sleep 3; shot 07-patching-busy
  sleep 25; shot 08-patching-done
  say "-- another corrupted prompt and Patch: the old numbers greyed and named until the new ones"
  x click $(xy "$CORRUPT"); x keys ctrl+a; x type "When John and Mary went to the store, John gave a drink to"
  x click $(xy "$PATCH"); sleep 2; shot 09-patching-stale
  sleep 25; shot 10-patching-new
  x stop
  disp=${XWALK_DISPLAY:-:77}
  for _ in $(seq 100); do [[ -e /tmp/.X${disp#:}-lock ]] || break; sleep 0.1; done  # the next size's screen
done
