"""The local Pokémon Showdown as a managed component: install, server process, team CLI.

The lowest layer of the center: imports only ``center.errors`` and third-party packages."""
