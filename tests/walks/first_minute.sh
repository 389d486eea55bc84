#!/usr/bin/env bash
# The first minute of a new user, in a real X window (not part of `make test`): a fresh settings file,
# the first window, a first Start, Pause/Resume/Stop, the keyboard, the Get a model… dialog, Help, every
# tab, and closing mid-run. Each step takes a screenshot; open every one at full size afterwards.
#
#   tests/walks/first_minute.sh [WIDTHxHEIGHT ...]     default: 1280x800 1920x1080
#
# Needs the project's .venv (make test or make run builds it) and the xwalk helper that starts a virtual
# screen with a window manager (XWALK, default ../shared/tools/xwalk beside the checkout). Screenshots go
# to $XWALK_DIR/<size>/ (default /tmp/walk-first-minute/<size>/), with a log of what was checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
XWALK=${XWALK:-../shared/tools/xwalk}
ROOT=${XWALK_DIR:-/tmp/walk-first-minute}
sizes=("$@"); [[ ${#sizes[@]} -gt 0 ]] || sizes=(1280x800 1920x1080)

for size in "${sizes[@]}"; do
  export XWALK_DIR=$ROOT/$size
  rm -rf "$XWALK_DIR"; mkdir -p "$XWALK_DIR"
  log=$XWALK_DIR/walk.log
  say() { echo "$*" | tee -a "$log"; }
  x() { "$XWALK" "$@"; }
  windows() { x windows | tee -a "$log"; }
  shot() { x shot "$1" >/dev/null; say "shot $1"; }
  screen_w=${size%x*}; screen_h=${size#*x}

  say "== $size: a first launch with a fresh settings file"
  x start "$size" | tee -a "$log"
  sleep 8  # the starter model, the other panels and tabs are built after the first paint
  windows
  geom=$(x windows | head -1 | sed -E 's/.*Geometry: ([0-9]+)x([0-9]+).*/\1 \2/')
  read -r w h <<<"$geom"
  if (( w <= screen_w && h <= screen_h )); then say "ok: the window ($w×$h) fits the screen"; else say "FAIL: window $w×$h is larger than $size"; fi
  shot 01-first-window

  say "-- F5: Start on the starter with the default settings (no dialog may open)"
  x keys F5; sleep 6
  n=$(x windows | wc -l); (( n == 1 )) && say "ok: no dialog" || { say "FAIL: a dialog opened"; windows; }
  shot 02-training

  say "-- F6 pauses (no ETA while paused), F6 resumes"
  x keys F6; sleep 2; shot 03-paused
  x keys F6; sleep 3

  say "-- the keyboard: 40 Tabs from where the focus is, then type digits: no hidden panel may change"
  for _ in $(seq 40); do x keys Tab; done
  shot 04-after-tabs

  say "-- F7 stops; the focus goes back to Start (the next key must not edit a field)"
  x keys F7; sleep 3; shot 05-stopped

  say "-- every tab (Ctrl+1 … Ctrl+7)"
  for i in 1 2 3 4 5 6 7; do x keys "ctrl+$i"; sleep 3; shot "06-tab-$i"; done
  x keys ctrl+1; sleep 1

  say "-- F1: what am I looking at?"
  x keys F1; sleep 2; windows; shot 07-help-page; x keys Escape; sleep 1

  say "-- File → Get a model…: the keys go to the repo field; type a repo id key by key (no error may pop up)"
  x keys ctrl+shift+o; sleep 2
  x type "openai-"; sleep 1; shot 08-get-model-partial
  x type "community/gpt2"; sleep 1; shot 09-get-model-typed
  n=$(x windows | wc -l); (( n == 2 )) && say "ok: only the dialog itself" || { say "FAIL: another dialog"; windows; }
  x keys Escape; sleep 1

  say "-- File → New run over unsaved work asks first (Escape: Cancel keeps the model)"
  x keys ctrl+n; sleep 2; windows; shot 10-new-run-asks
  x keys Escape; sleep 1

  say "-- F5 continues the run; Ctrl+Q mid-run asks; Discard; the process must end promptly"
  x keys F5; sleep 4
  x keys ctrl+q; sleep 2; windows; shot 11-quit-asks
  t0=$(date +%s.%N)
  x keys Tab space  # from Save to Discard
  pid=$(awk '{print $3}' "$XWALK_DIR/state")
  running() { local st; st=$(ps -o stat= -p "$pid" 2>/dev/null) && [[ $st != Z* ]]; }  # a zombie has ended
  for _ in $(seq 200); do running || break; sleep 0.05; done
  if running; then say "FAIL: the app is still running 10 s after Quit"; else
    say "ok: the process ended $(echo "$(date +%s.%N) - $t0" | bc) s after Discard"; fi
  x stop
  say "screenshots: $XWALK_DIR"
done
