#!/usr/bin/env bash
# Host suite: runs a harness (built without libFuzzer, replay_main.cpp) on
# the seed corpus and on the committed regression inputs, so what the fuzz
# suite once found stays fixed in every build.
#   replay.sh SEEDS_EXE MATRICES_DIR HARNESS REPLAY_EXE REGRESSIONS_DIR
set -euo pipefail
seeds_exe=$1 matrices=$2 harness=$3 replay=$4 regressions=$5
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$seeds_exe" "$matrices" "$work/seeds"
dirs=("$work/seeds/$harness")
[ -d "$regressions/$harness" ] && dirs+=("$regressions/$harness")
TMPDIR=$work "$replay" "${dirs[@]}"
