"""Exceptions raised by the center (Showdown management, environment, matches).

Exception tree::

    CenterError
    ├── ShowdownError              the local Showdown server cannot be used
    │   ├── ShowdownNotInstalled   node, npm or the pinned install is missing (says which command fixes it)
    │   └── ShowdownStartError     the server did not come up or answer in time
    ├── EnvError                   misuse of PokemonEnv or a battle that cannot be set up
    │   ├── ResetTimeout           no battle was established within RESET_TIMEOUT (C-3)
    │   └── EnvClosedError         the environment was used after close()
    └── ConfigError                a bad candidates.json / sep_config.json / command-line value
"""

from __future__ import annotations


class CenterError(Exception):
    """Root of every exception raised by the ``center`` package."""


class ShowdownError(CenterError):
    """The local Pokémon Showdown server cannot be used."""


class ShowdownNotInstalled(ShowdownError):
    """node, npm or the pinned Showdown install is missing."""


class ShowdownStartError(ShowdownError):
    """The Showdown server did not start or did not answer in time."""


class EnvError(CenterError):
    """PokemonEnv was misused, or a battle could not be set up."""


class ResetTimeout(EnvError, TimeoutError):
    """No battle was established within RESET_TIMEOUT."""


class EnvClosedError(EnvError):
    """The environment was used after ``close()``."""


class ConfigError(CenterError):
    """A configuration file or command-line value is invalid."""
