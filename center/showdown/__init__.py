"""The local Pokémon Showdown as managed components: install, process plumbing, the server, the
simulator host (Showdown's own simulator in node, seeded battles), team CLI.

The lowest layer of the center: imports only ``center.errors``, ``center.files`` and third-party
packages."""

from center.showdown.install import SHOWDOWN_VERSION, find_install, prepare_install
from center.showdown.server import ShowdownServer
from center.showdown.sim_host import SimHost
from center.showdown.teams import pack_team, validate_team

__all__ = [
    "SHOWDOWN_VERSION",
    "ShowdownServer",
    "SimHost",
    "find_install",
    "pack_team",
    "prepare_install",
    "validate_team",
]
