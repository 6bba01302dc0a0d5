#!/usr/bin/env bash
# Set up maple-sep on this machine: the Python virtualenv (.venv) and the pinned, project-local
# Pokémon Showdown (.showdown/). Idempotent: a second run only checks stamps and versions.
#
# Usage: ./scripts/setup.sh            (from anywhere)
# Env:   PYTHON=/path/to/python3.11    (optional: the interpreter used to create .venv)
set -euo pipefail

SHOWDOWN_VERSION="0.11.11"          # keep in sync with center/showdown/install.py SHOWDOWN_VERSION
SOURCE_MAP_SUPPORT_VERSION="0.5.21" # needed by `pokemon-showdown validate-team`

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO_ROOT/.venv"
SHOWDOWN_PREFIX="$REPO_ROOT/.showdown"
SHOWDOWN_PKG="$SHOWDOWN_PREFIX/node_modules/pokemon-showdown"
PIP_STAMP="$VENV/.sep-pyproject.sha256"
# torch for the `train` extra (Stable-Baselines3): the CPU-only build, found through pip's own
# configuration or PyTorch's CPU index. PyPI's default build pulls ~3 GB of CUDA libraries.
TORCH_CPU="torch==2.13.0+cpu"
TORCH_CPU_INDEX="${SEP_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}"

step() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# Run a command with its output in a log file; show the log's tail only when it fails.
quietly() {
    local log status=0
    log="$(mktemp "${TMPDIR:-/tmp}/sep-setup.XXXXXX")"
    "$@" >"$log" 2>&1 || status=$?
    if ((status != 0)); then
        tail -n 40 "$log" >&2
        rm -f "$log"
        die "'$*' failed (exit $status)"
    fi
    rm -f "$log"
}

# --- Prerequisites first, so a fresh machine fails before the slow steps ----------------------
command -v node >/dev/null 2>&1 || die "node not found; install Node.js >= 18 and npm (e.g. apt-get install -y nodejs npm), then rerun ./scripts/setup.sh"
command -v npm >/dev/null 2>&1 || die "npm not found; install it (e.g. apt-get install -y npm), then rerun ./scripts/setup.sh"
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
((NODE_MAJOR >= 18)) || die "node $(node --version) is too old; install Node.js >= 18 (e.g. from https://nodejs.org or nodesource), then rerun ./scripts/setup.sh"

# --- Python ---------------------------------------------------------------------------------
python_ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; }

find_python() {
    local candidate
    # 3.11 first: the version the project is tested with, and the one CPU-only torch wheels are
    # most often at hand for (a local wheel, or pip's own index).
    for candidate in "${PYTHON:-}" python3.11 python3 python3.12 python3.13; do
        [[ -n "$candidate" ]] || continue
        if command -v "$candidate" >/dev/null 2>&1 && python_ok "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

if [[ -x "$VENV/bin/python" ]] && python_ok "$VENV/bin/python"; then
    step "venv: $VENV exists"
else
    PY="$(find_python)" || die "Python >= 3.11 not found; install it (e.g. apt-get install -y python3.11 python3.11-venv) or set PYTHON=/path/to/python3.11"
    step "venv: creating $VENV with $PY"
    "$PY" -m venv "$VENV" || die "could not create $VENV; install the venv module (e.g. apt-get install -y python3-venv)"
fi

TORCH_INSTALLED="$("$VENV/bin/python" -c 'import importlib.metadata as m; print(m.version("torch"))' 2>/dev/null || true)"
if [[ -n "$TORCH_INSTALLED" ]]; then
    step "torch: $TORCH_INSTALLED present"
else
    step "torch: installing the CPU-only $TORCH_CPU"
    # Pip's own configuration first (a local wheel or index), then PyTorch's CPU index.
    "$VENV/bin/python" -m pip install -q "$TORCH_CPU" >/dev/null 2>&1 \
        || quietly "$VENV/bin/python" -m pip install "$TORCH_CPU" --extra-index-url "$TORCH_CPU_INDEX"
fi

PYPROJECT_HASH="$(sha256sum "$REPO_ROOT/pyproject.toml" | cut -d' ' -f1)"
if [[ -f "$PIP_STAMP" ]] && [[ "$(cat "$PIP_STAMP")" == "$PYPROJECT_HASH" ]]; then
    step "pip: up to date (pyproject.toml unchanged)"
else
    step "pip: installing maple-sep[test,ray,train,web] (editable)"
    quietly "$VENV/bin/python" -m pip install -e "$REPO_ROOT[test,ray,train,web]"
    printf '%s\n' "$PYPROJECT_HASH" >"$PIP_STAMP"
fi

# --- Pokémon Showdown ------------------------------------------------------------------------
installed_version() { # $1: package folder; prints its version or nothing
    [[ -f "$1/package.json" ]] || return 0
    node -p "require(process.argv[1]).version" "$1/package.json" 2>/dev/null || true
}

if [[ "$(installed_version "$SHOWDOWN_PKG")" == "$SHOWDOWN_VERSION" ]] \
    && [[ "$(installed_version "$SHOWDOWN_PREFIX/node_modules/source-map-support")" == "$SOURCE_MAP_SUPPORT_VERSION" ]]; then
    step "showdown: pokemon-showdown@$SHOWDOWN_VERSION already in $SHOWDOWN_PREFIX"
else
    step "showdown: npm install pokemon-showdown@$SHOWDOWN_VERSION into $SHOWDOWN_PREFIX"
    mkdir -p "$SHOWDOWN_PREFIX"
    if [[ ! -f "$SHOWDOWN_PREFIX/package.json" ]]; then
        printf '{\n  "name": "sep-showdown",\n  "private": true\n}\n' >"$SHOWDOWN_PREFIX/package.json"
    fi
    # --omit=optional --ignore-scripts: ~15 s instead of ~4 min; the server runs with --skip-build.
    quietly npm install --prefix "$SHOWDOWN_PREFIX" --omit=optional --ignore-scripts \
        --save-exact --no-audit --no-fund --loglevel=error \
        "pokemon-showdown@$SHOWDOWN_VERSION" "source-map-support@$SOURCE_MAP_SUPPORT_VERSION"
fi

step "showdown: preparing config"
"$VENV/bin/python" -c 'import sys; from pathlib import Path; from center.showdown import prepare_install; prepare_install(Path(sys.argv[1]))' "$SHOWDOWN_PKG"

# --- Chromium, for the report's browser tests (Debian's package; never a downloaded browser) ----
CHROMIUM="${SEP_CHROMIUM:-/usr/bin/chromium}"
if [[ -x "$CHROMIUM" ]]; then
    step "chromium: $CHROMIUM present"
elif command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == "0" ]]; then
    step "chromium: apt-get install chromium chromium-driver (for the report's browser tests)"
    quietly env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    quietly env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
else
    step "chromium: missing; the report's browser tests need it (e.g. sudo apt-get install -y chromium chromium-driver)"
fi

step "done: Showdown $SHOWDOWN_VERSION in $SHOWDOWN_PKG, venv in $VENV"
