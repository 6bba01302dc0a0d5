"""CurveZMQ keys: generate, write, load, and the ``curve`` sections of ``sep_config.json``.

Keys are Z85 text, stored as pyzmq's ``zmq.auth`` stores them (``NAME.key`` public,
``NAME.key_secret`` both, owner-only), so ``zmq.auth.load_certificate`` reads them. They are
written here rather than by ``zmq.auth.create_certificates``, which opens the secret file with the
umask's mode (often world-readable) and cannot refuse to replace an existing key. The
``curve`` sections and how relative key files resolve: docs/protocol.md, "Authentication: CurveZMQ".
"""

from __future__ import annotations

import datetime
import logging
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq
import zmq.auth
from zmq.utils import z85

from edge.errors import CurveKeyError

__all__ = [
    "CurveConfig",
    "KeyPair",
    "center_curve_from_config",
    "check_z85_key",
    "edge_curve_from_config",
    "generate_curve_config",
    "generate_keypair",
    "load_keypair",
    "load_public_key",
    "write_keypair",
]

logger = logging.getLogger(__name__)

_SIDES = ("blue", "red")


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A CURVE key pair as Z85 text; the secret never appears in ``repr``."""

    public: str
    secret: str = field(repr=False)

    def __post_init__(self) -> None:
        check_z85_key(self.public, "public key")
        check_z85_key(self.secret, "secret key")
        if zmq.curve_public(self.secret.encode("ascii")).decode("ascii") != self.public:
            raise CurveKeyError("the public key does not belong to the secret key")


@dataclass(frozen=True, slots=True)
class CurveConfig:
    """What an edge server needs for CURVE: its key pair and the client keys it accepts."""

    keypair: KeyPair
    authorized_clients: frozenset[str]

    def __post_init__(self) -> None:
        if not self.authorized_clients:
            raise CurveKeyError(
                "CURVE needs at least one authorized client key (the center's public key)"
            )
        for key in self.authorized_clients:
            check_z85_key(key, "authorized client key")


def check_z85_key(key: object, what: str = "key") -> str:
    """``key`` if it is a Z85 CURVE key (40 characters, 32 bytes), else CurveKeyError."""
    if isinstance(key, bytes):
        key = key.decode("ascii", errors="replace")
    if not isinstance(key, str) or len(key) != 40:
        raise CurveKeyError(f"{what} must be 40 characters of Z85 text")
    try:
        z85.decode(key.encode("ascii"))
    except (ValueError, KeyError, UnicodeEncodeError) as exc:
        raise CurveKeyError(f"{what} is not valid Z85 text") from exc
    return key


def generate_keypair() -> KeyPair:
    """A new random key pair."""
    public, secret = zmq.curve_keypair()
    return KeyPair(public.decode("ascii"), secret.decode("ascii"))


def write_keypair(
    keypair: KeyPair, directory: str | os.PathLike[str], name: str, *, overwrite: bool = False
) -> tuple[Path, Path]:
    """Write ``NAME.key`` (public) and ``NAME.key_secret`` (mode 0600); return both paths.

    Existing key files are never replaced unless ``overwrite`` (a lost secret cannot be undone).
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    public_file = folder / f"{name}.key"
    secret_file = folder / f"{name}.key_secret"
    if not overwrite and (public_file.exists() or secret_file.exists()):
        raise CurveKeyError(f"key files for {name!r} already exist in {folder}")
    public_file.write_text(_certificate(keypair.public, None), encoding="ascii")
    fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(_certificate(keypair.public, keypair.secret))
    os.chmod(secret_file, 0o600)
    return public_file, secret_file


def load_keypair(secret_file: str | os.PathLike[str]) -> KeyPair:
    """The key pair stored in a ``.key_secret`` file; CurveKeyError when unusable."""
    path = Path(secret_file)
    public, secret = _load_certificate(path)
    if secret is None:
        raise CurveKeyError(f"{path} holds no secret key (is it the public .key file?)")
    if os.name == "posix" and path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning("secret key file %s is readable by other users; chmod 600 it", path)
    try:
        return KeyPair(public, secret)
    except CurveKeyError as exc:
        raise CurveKeyError(f"{path}: {exc}") from exc


def load_public_key(key_file: str | os.PathLike[str]) -> str:
    """The public key stored in a ``.key`` or ``.key_secret`` file."""
    public, _ = _load_certificate(Path(key_file))
    return public


def edge_curve_from_config(
    config: Mapping[str, Any], side: str, base_dir: str | os.PathLike[str] = "."
) -> CurveConfig | None:
    """The CURVE setup of the ``side`` edge from a parsed ``sep_config.json``; None without one.

    Loads the edge's secret key file, checks it matches ``public_key``, and takes
    ``authorized_clients`` (default: the center's ``public_key``).
    """
    section = _curve_section(config, side)
    if section is None:
        return None
    public = check_z85_key(section.get("public_key"), f"{side}.curve.public_key")
    keypair = load_keypair(_resolve(section, "secret_key_file", side, base_dir))
    if keypair.public != public:
        raise CurveKeyError(
            f"{side}.curve.secret_key_file does not hold the key pair of {side}.curve.public_key"
        )
    clients = section.get("authorized_clients")
    if clients is None:
        center = _curve_section(config, "center")
        if center is None or "public_key" not in center:
            raise CurveKeyError(
                f"{side}.curve.authorized_clients is missing and there is no center.curve.public_key"
            )
        clients = [center["public_key"]]
    if not isinstance(clients, list):
        raise CurveKeyError(f"{side}.curve.authorized_clients must be a list of Z85 keys")
    authorized = frozenset(
        check_z85_key(key, f"{side}.curve.authorized_clients[{i}]") for i, key in enumerate(clients)
    )
    return CurveConfig(keypair=keypair, authorized_clients=authorized)


def center_curve_from_config(
    config: Mapping[str, Any], side: str, base_dir: str | os.PathLike[str] = "."
) -> tuple[str, KeyPair] | None:
    """(the ``side`` edge's public key, the center's key pair) for EdgeClient; None if insecure.

    CURVE is on for a side when its section has a ``curve`` section; the center's key pair then
    comes from ``center.curve.secret_key_file``.
    """
    section = _curve_section(config, side)
    if section is None:
        return None
    server_public = check_z85_key(section.get("public_key"), f"{side}.curve.public_key")
    center = _curve_section(config, "center")
    if center is None:
        raise CurveKeyError(f"{side} uses CURVE but sep_config.json has no center.curve section")
    keypair = load_keypair(_resolve(center, "secret_key_file", "center", base_dir))
    if "public_key" in center and center["public_key"] != keypair.public:
        raise CurveKeyError(
            "center.curve.secret_key_file does not hold the key pair of center.curve.public_key"
        )
    return server_public, keypair


def generate_curve_config(
    key_dir: str | os.PathLike[str],
    *,
    sides: Iterable[str] = _SIDES,
    base_dir: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> dict[str, Any]:
    """Generate key pairs for the center and each side into ``key_dir``; return the sections.

    The result, e.g. ``{"blue": {"curve": {...}}, "red": {...}, "center": {"curve": {...}}}``, is
    meant to be merged into ``sep_config.json`` (next to ``host``/``port``). Key file paths are
    written relative to ``base_dir`` (the config's folder) when given. Existing key files are
    kept (CurveKeyError) unless ``overwrite``.
    """
    folder = Path(key_dir)

    def shown(path: Path) -> str:
        return os.path.relpath(path, base_dir) if base_dir is not None else str(path)

    center = generate_keypair()
    _, center_secret = write_keypair(center, folder, "center", overwrite=overwrite)
    result: dict[str, Any] = {
        "center": {"curve": {"public_key": center.public, "secret_key_file": shown(center_secret)}}
    }
    for side in sides:
        keypair = generate_keypair()
        _, secret_file = write_keypair(keypair, folder, side, overwrite=overwrite)
        result[side] = {
            "curve": {
                "public_key": keypair.public,
                "secret_key_file": shown(secret_file),
                "authorized_clients": [center.public],
            }
        }
    return result


def _curve_section(config: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    entry = config.get(name)
    if entry is None:
        return None
    if not isinstance(entry, Mapping):
        raise CurveKeyError(f"{name} must be an object in sep_config.json")
    section = entry.get("curve")
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise CurveKeyError(f"{name}.curve must be an object in sep_config.json")
    return section


def _resolve(
    section: Mapping[str, Any], key: str, name: str, base_dir: str | os.PathLike[str]
) -> Path:
    value = section.get(key)
    if not isinstance(value, str) or not value:
        raise CurveKeyError(f"{name}.curve.{key} must name a key file")
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(base_dir) / path


def _load_certificate(path: Path) -> tuple[str, str | None]:
    try:
        public, secret = zmq.auth.load_certificate(path)
    except OSError as exc:
        raise CurveKeyError(f"cannot read key file {path}: {exc.strerror or exc}") from exc
    except (ValueError, KeyError, IndexError) as exc:
        raise CurveKeyError(f"{path} is not a CURVE key file: {exc}") from exc
    public_text = check_z85_key(public, f"public key in {path}")
    if secret is None:
        return public_text, None
    return public_text, check_z85_key(secret, f"secret key in {path}")


def _certificate(public: str, secret: str | None) -> str:
    """The ZPL text pyzmq writes for a certificate (``zmq.auth.certs``)."""
    kind = "Secret" if secret is not None else "Public"
    warning = (
        "#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions."
        if secret is not None
        else "#   Give this file to whoever needs to trust this key."
    )
    lines = [
        f"#   ****  Generated on {datetime.datetime.now():%Y-%m-%d %H:%M:%S} by maple-sep  ****",
        f"#   ZeroMQ CURVE **{kind}** Certificate",
        warning,
        "",
        "metadata",
        "curve",
        f'    public-key = "{public}"',
    ]
    if secret is not None:
        lines.append(f'    secret-key = "{secret}"')
    return "\n".join(lines) + "\n"
