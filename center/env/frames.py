"""Where the raw Showdown frames of each battle live, for whoever needs them after the fact.

``EnvPlayer`` records, per battle, every raw message it received, in order, and registers that list
here under the poke-env ``Battle`` object. A remote side (``center.isolation.edge_session``) looks
the list up from the battle it decides on and forwards the frames it has not sent yet; the match
runner writes the same list as the battle's protocol log.
"""

from __future__ import annotations

import threading
from weakref import WeakKeyDictionary

from poke_env.battle import AbstractBattle

_lock = threading.Lock()
_frames: WeakKeyDictionary[AbstractBattle, list[str]] = WeakKeyDictionary()


def register(battle: AbstractBattle, frames: list[str]) -> None:
    """Associate ``battle`` with its (growing) list of raw frames."""
    with _lock:
        _frames[battle] = frames


def frames_of(battle: AbstractBattle) -> list[str] | None:
    """The raw frames received so far for ``battle``, or None if it was not recorded."""
    with _lock:
        return _frames.get(battle)
