#!/usr/bin/env bash
# Load the machine as a busy shared host would: two busy loops per core for SECONDS (default 900),
# then they end on their own; stopping the script (Ctrl-C, kill) ends them at once. The test
# command is meant to pass beside it (docs/development.md, "On a loaded machine"):
#     ./scripts/load.sh 3600 & ./scripts/test.sh; kill %1
set -euo pipefail
seconds="${1:-900}"
loops=$((2 * $(nproc)))
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT INT TERM
for _ in $(seq "$loops"); do
  timeout "$seconds" sh -c 'while :; do :; done' &
done
echo "load.sh: $loops busy loops for ${seconds}s" >&2
wait
