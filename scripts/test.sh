#!/usr/bin/env bash
# The test command: set up (idempotent), lint, type-check (the packages and scripts/, as
# pyproject.toml's [tool.mypy] lists them), then run the whole test suite against a real local
# Pokémon Showdown server that the tests start themselves. Extra arguments go to pytest.
#
# pytest runs twice: first the ordinary tests in 3 pytest-xdist workers (SEP_TEST_WORKERS=N for
# another count, -n 0 for one process; with two, the tests' waits left CPU idle), then the
# `serial` ones (tests/marks.py), which need the machine to themselves, in one process. Both runs
# get the extra arguments (a --junitxml report of the serial run goes to NAME.serial.xml beside
# the first's NAME.xml; not one set in PYTEST_ADDOPTS); the command fails if either does.
# The inner loop, under 3 minutes (the `quick` tests of tests/marks.py: the unit tests and the
# main path through edges of the test's own process), after the same set-up and checks (--quick
# first, other arguments after it go to pytest):
#     ./scripts/test.sh --quick
# Nine tests in ten (the ones under ~5 s each): ./scripts/test.sh -m "not slow"
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
if [ "${1:-}" = --quick ]; then quick=1; shift; fi
./scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
if [ "$quick" -eq 1 ]; then
  # Only QUICK's paths are collected (each worker collects them); one run: a serial test among
  # them would wait for the machine (tests/marks.py's lock).
  listed='from tests.marks import quick_paths; print(*quick_paths(), sep="\n")'
  mapfile -t paths < <(.venv/bin/python -c "$listed")
  exec .venv/bin/pytest -n "${SEP_TEST_WORKERS:-3}" --dist worksteal -m quick "${paths[@]}" "$@"
fi
# pytest's exit codes: 2 interrupted, 4 a usage error (the second run would say it again), 5 no
# test selected (a selection with no serial test, or only serial ones).
status=0
.venv/bin/pytest -n "${SEP_TEST_WORKERS:-3}" --dist worksteal --serial=skip "$@" || status=$?
if [ "$status" -eq 2 ] || [ "$status" -eq 4 ]; then exit "$status"; fi
serial_args=()
path_next=0
for arg in "$@"; do
  if [ "$path_next" -eq 1 ] && [ -n "$arg" ]; then
    arg="${arg%.xml}.serial.xml"
  elif [[ "$arg" == --junitxml=?* || "$arg" == --junit-xml=?* ]]; then
    value="${arg#*=}"
    arg="${arg%%=*}=${value%.xml}.serial.xml"
  fi
  path_next=0
  if [ "$arg" = --junitxml ] || [ "$arg" = --junit-xml ]; then path_next=1; fi
  serial_args+=("$arg")
done
serial=0
.venv/bin/pytest --serial=only "${serial_args[@]}" -n 0 || serial=$?
# A run that selected nothing takes the other's status; a failure of the first run stands.
if [ "$status" -eq 5 ] || { [ "$status" -eq 0 ] && [ "$serial" -ne 5 ]; }; then status=$serial; fi
exit "$status"
