#!/usr/bin/env bash
# The test command: set up (idempotent), lint, type-check, then run the whole test suite against a
# real local Showdown server that the tests start themselves. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
.venv/bin/pytest "$@"
