#!/usr/bin/env bash
# Load the machine as a busy shared host would: two busy loops per core, for SECONDS (default
# 900), then they end on their own (Ctrl-C ends them at once). The test command is meant to pass
# beside it (docs/development.md, "On a loaded machine"):
#     ./scripts/load.sh 1800 & ./scripts/test.sh
set -euo pipefail
seconds="${1:-900}"
loops=$((2 * $(nproc)))
trap 'kill $(jobs -p) 2>/dev/null' EXIT
for _ in $(seq "$loops"); do
  timeout "$seconds" sh -c 'while :; do :; done' &
done
echo "load.sh: $loops busy loops for ${seconds}s (pids $(jobs -p | tr '\n' ' '))" >&2
wait
