#!/usr/bin/env bash
# The main job: set everything up, then play a demo on the embedded default setup.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/python scripts/demo_episode.py "$@"
