"""EndReason: why a battle ended, as ``PokemonEnv.end_reason`` and the ``end_reason`` column say.

It lives with the environment, which produces most of the values; the match runner adds the
reasons of a side's forfeit. The values are the strings written to battles.csv, a pinned interface.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["EndReason"]


class EndReason(StrEnum):
    """Every reason a battle ends for; a ``str``, so it compares equal to its value."""

    # Set by PokemonEnv.
    WIN = "win"  # Showdown declared a winner in normal play
    TIE = "tie"  # Showdown declared a tie
    MAX_TURNS = "max_turns"  # stopped at the turn limit (truncated; a tie in battles.csv)
    TIEBREAK = "tiebreak"  # ended at the turn limit by Showdown's tiebreak (a winner, or a tie)
    STEP_TIMEOUT = "step_timeout"  # Showdown did not answer a step in time (truncated)
    DISCONNECT = "disconnect"  # the connection to Showdown was lost, or (in a match) a side's edge
    FORFEIT = "forfeit"  # PokemonEnv.forfeit() called without a reason
    ABORTED = "aborted"  # set_agents() during an episode abandoned it
    # Set by the match runner when a side forfeits; each matches the side's status.
    ERROR = "error"  # the side's code raised, or the side could not be set up
    TIMEOUT = "timeout"  # the side exhausted its time bank
