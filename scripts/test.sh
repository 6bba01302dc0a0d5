#!/usr/bin/env bash
# The test command: set up (idempotent), lint, type-check (the packages and scripts/, as
# pyproject.toml's [tool.mypy] lists them), then run the whole test suite against a real local
# Pokémon Showdown server that the tests start themselves. Extra arguments go to pytest.
#
# The tests run in 2 pytest-xdist workers (SEP_TEST_WORKERS=N for another count, -n 0 for one
# process); a test marked `serial` (tests/marks.py) waits until it has the machine to itself.
# Quick first run (nine tests in ten: the ones under ~5 s each):
#     ./scripts/test.sh -m "not slow"
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
.venv/bin/pytest -n "${SEP_TEST_WORKERS:-2}" --dist worksteal "$@"
