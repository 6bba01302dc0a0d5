"""Finding and preparing the pinned, project-local Pokémon Showdown install.

``scripts/setup.sh`` installs the pinned npm package under ``.showdown/`` and calls
``prepare_install``; ``find_install`` locates it (or an explicit one) for the server and the CLI.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path

from center.errors import ShowdownNotInstalled
from center.files import write_atomically

__all__ = ["SETUP_HINT", "SHOWDOWN_VERSION", "find_install", "prepare_install"]

logger = logging.getLogger(__name__)

SHOWDOWN_VERSION = "0.11.11"
"""The pinned pokemon-showdown npm version (poke-env parses the protocol strictly)."""

SETUP_HINT = "run ./scripts/setup.sh"
_PACKAGE_SUBPATH = Path(".showdown") / "node_modules" / "pokemon-showdown"
_REPO_ROOT = Path(__file__).resolve().parents[2]
_CONFIG_SETTINGS = {"bindaddress": "'127.0.0.1'", "nothrottle": "true", "repl": "false"}
_RUNTIME_DIRS = ("logs/repl", "logs/chat", "logs/modlog", "config/chat-plugins")


def _installed_version(package: Path) -> str | None:
    """The version in a package folder's package.json, or None when it is not readable."""
    try:
        text = (package / "package.json").read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(r'"version"\s*:\s*"([^"]+)"', text)
    return match.group(1) if match else None


def _is_install(package: Path) -> bool:
    """Whether ``package`` holds a built pokemon-showdown package."""
    return (package / "pokemon-showdown").is_file() and (
        package / "dist" / "server" / "index.js"
    ).is_file()


def _as_package(path: Path) -> Path:
    """Accept either the package folder or a prefix holding ``node_modules/pokemon-showdown``."""
    nested = path / "node_modules" / "pokemon-showdown"
    return nested if not _is_install(path) and _is_install(nested) else path


def find_install(install_dir: Path | None = None) -> Path:
    """Locate the pinned Pokémon Showdown package folder.

    Searched in order: ``install_dir``, ``$SEP_SHOWDOWN_DIR``, then
    ``.showdown/node_modules/pokemon-showdown`` under the repository root and under the
    current directory.
    Raises ShowdownNotInstalled (one line naming the fix) when node or the package is missing.
    """
    if shutil.which("node") is None:
        raise ShowdownNotInstalled(
            "node is not on PATH: install Node.js >= 18 and npm "
            f"(e.g. apt-get install -y nodejs npm), then {SETUP_HINT}"
        )
    explicit: list[Path] = []
    if install_dir is not None:
        explicit.append(Path(install_dir))
    elif os.environ.get("SEP_SHOWDOWN_DIR"):
        explicit.append(Path(os.environ["SEP_SHOWDOWN_DIR"]))
    if explicit:
        package = _as_package(explicit[0].expanduser().resolve())
        if not _is_install(package):
            raise ShowdownNotInstalled(
                f"no Pokémon Showdown package at {explicit[0]}: {SETUP_HINT} "
                "(or point SEP_SHOWDOWN_DIR at .showdown/node_modules/pokemon-showdown)"
            )
        version = _installed_version(package)
        if version != SHOWDOWN_VERSION:
            logger.warning(
                "Showdown at %s is version %s, the project pins %s",
                package,
                version,
                SHOWDOWN_VERSION,
            )
        return package

    candidates = [_REPO_ROOT / _PACKAGE_SUBPATH, Path.cwd().resolve() / _PACKAGE_SUBPATH]
    for package in dict.fromkeys(candidates):
        if not _is_install(package):
            continue
        version = _installed_version(package)
        if version != SHOWDOWN_VERSION:
            raise ShowdownNotInstalled(
                f"Pokémon Showdown at {package} is version {version}, the project pins "
                f"{SHOWDOWN_VERSION}: {SETUP_HINT}"
            )
        return package
    looked = ", ".join(str(p) for p in dict.fromkeys(candidates))
    raise ShowdownNotInstalled(
        f"Pokémon Showdown {SHOWDOWN_VERSION} is not installed (looked in {looked}): {SETUP_HINT}"
    )


def _apply_settings(config: str) -> str:
    """``config`` with our bind address, throttle and REPL settings, added when missing."""
    for key, value in _CONFIG_SETTINGS.items():
        line = f"exports.{key} = {value};"
        pattern = re.compile(rf"^exports\.{key}\s*=.*?;[ \t]*$", re.MULTILINE)
        config, count = pattern.subn(line, config, count=1)
        if count == 0:
            config = config.rstrip("\n") + f"\n{line}\n"
    return config


def prepare_install(path: Path) -> None:
    """Write ``config/config.js`` (bound to 127.0.0.1, no throttle, no REPL) and the runtime
    folders Showdown expects. Idempotent; keeps other edits to an existing config.js."""
    path = Path(path)
    if not _is_install(path):
        raise ShowdownNotInstalled(f"no Pokémon Showdown package at {path}: {SETUP_HINT}")
    for folder in _RUNTIME_DIRS:
        (path / folder).mkdir(parents=True, exist_ok=True)
    config_path = path / "config" / "config.js"
    source = config_path if config_path.exists() else path / "config" / "config-example.js"
    try:
        current = source.read_text(encoding="utf-8")
    except OSError as exc:
        raise ShowdownNotInstalled(f"cannot read {source} ({exc}): {SETUP_HINT}") from exc
    wanted = _apply_settings(current)
    if config_path.exists() and wanted == current:
        return
    # Atomic, so servers starting concurrently never read a half-written file.
    write_atomically(config_path, wanted)
    logger.info("wrote %s", config_path)
