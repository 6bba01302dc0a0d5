"""The local Pokémon Showdown as a managed component: install, process plumbing, server, team CLI.

The lowest layer of the center: imports only ``center.errors`` and third-party packages."""

from center.showdown.install import SHOWDOWN_VERSION, find_install, prepare_install
from center.showdown.server import ShowdownServer
from center.showdown.teams import pack_team, validate_team

__all__ = [
    "SHOWDOWN_VERSION",
    "ShowdownServer",
    "find_install",
    "pack_team",
    "prepare_install",
    "validate_team",
]
