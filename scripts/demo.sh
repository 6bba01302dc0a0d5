#!/usr/bin/env bash
# The main job: set everything up, start the blue and red edges on loopback, run a league over the
# sample candidates through them (sep_main starts its own Showdown simulator host), print the
# standings and where the results and the report are, and leave no process behind.
#
#   ./scripts/demo.sh              # 6 battles per pair
#   ./scripts/demo.sh -n 20        # any sep_main option can be added
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
PY=.venv/bin/python
LOG_DIR=${LOG_DIR:-runs/demo}
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

# The edges must be ours: refuse to run against whatever already listens on their ports.
$PY - <<'PY'
import socket, sys
from edge.wire.sep_config import load_sep_config
config = load_sep_config("sep_config.json")
for side in ("blue", "red"):
    host, port = config.address(side)
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no conflict
        try:
            s.bind((host, port))
        except OSError:
            sys.exit(f"demo: port {port} of the {side} edge ({host}) is already in use; stop what "
                     "listens there (an earlier sep_edge?) or change sep_config.json")
PY

mkdir -p "$LOG_DIR"
for side in blue red; do
  .venv/bin/sep_edge "$side" --config sep_config.json --candidates candidates.json \
    >"$LOG_DIR/edge-$side.log" 2>&1 &
  pids+=($!)
done
# Wait (bounded) until both edges answer.
$PY - <<'PY'
import sys, time
from center.isolation.edge_client import EdgeClient
from edge.wire.sep_config import load_sep_config
config = load_sep_config("sep_config.json")
for side in ("blue", "red"):
    with EdgeClient(config.endpoint(side)) as client:
        deadline = time.monotonic() + 60
        while not client.ping(timeout=2.0):
            if time.monotonic() > deadline:
                sys.exit(f"the {side} edge did not start; see its log, edge-{side}.log, in the LOG_DIR")
print("edges ready: blue and red on loopback", file=sys.stderr)
PY
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2>/dev/null || { echo "demo: an edge exited at start; see $LOG_DIR/edge-*.log" >&2; exit 1; }
done
.venv/bin/sep_main --league -n 6 -l "$LOG_DIR" --config sep_config.json --candidates candidates.json "$@"
