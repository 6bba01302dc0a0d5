"""The simulator's secret seeds: what a battle's public ``seed`` becomes under a run secret.

The battle's PRNG seed and each side's team seed derive from the public ``seed`` with an HMAC keyed
by a :class:`RunSecret`, so a module that knows the public seed cannot rebuild its opponent's
hidden team or foresee rolls; the room name and the Agent's seed come from the same HMAC.
:func:`public_seeds` is the scheme of runs before run secrets, which ``sep_replay`` still knows.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

__all__ = ["KEY_BYTES", "RunSecret", "SimSeeds", "public_seeds"]

#: A run secret's length in bytes.
KEY_BYTES = 32
# scrypt's cost for a secret derived from --seed (32 MiB per guess; its time: docs/performance.md)
# makes trying every small --seed slow (it is no defence for a --seed that can be read, see
# docs/sandbox.md).
_SCRYPT = {"n": 2**15, "r": 8, "p": 1, "maxmem": 64 * 2**20}
_SCRYPT_SALT = b"maple-sep run secret from --seed, v1"

SEED_NAMES = ("battle", "p1", "p2")
#: (the battle's seed, p1's team seed, p2's team seed), as the simulator takes them
SimSeeds = tuple[str, str, str]


def _game(game: int) -> str:
    # A series' later games: a suffix; game 0 keeps the derivation battles always had.
    return f":g{int(game)}" if game else ""


def _sodium(digest: bytes) -> str:
    return f"sodium,{digest.hex()[:32]}"


def public_seeds(root: int) -> SimSeeds:
    """The seeds of runs before run secrets: ``sha256("maple-sim:{root}:{what}")``, public.

    Anyone who knows ``root`` computes them: kept only to recognise battles of those runs.
    """

    def seed(what: str) -> str:
        return _sodium(hashlib.sha256(f"maple-sim:{root}:{what}".encode()).digest())

    battle, p1, p2 = (seed(what) for what in SEED_NAMES)
    return battle, p1, p2


class RunSecret:
    """The key of a run's simulator seeds, battle tags and Agent seeds (never printed)."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes) -> None:
        if not isinstance(key, bytes) or len(key) != KEY_BYTES:
            raise ValueError(f"a run secret is {KEY_BYTES} bytes")
        self._key = key

    @classmethod
    def random(cls) -> RunSecret:
        """A fresh secret from the operating system's CSPRNG."""
        return cls(secrets.token_bytes(KEY_BYTES))

    @classmethod
    def from_seed(cls, seed: int) -> RunSecret:
        """The secret of ``--seed seed``: scrypt of the seed, deliberately slow.

        The same seed always gives the same secret, so the same command on a fresh LOG_DIR plays
        the same battles; the secret is only as hard to find as the seed is to guess.
        """
        key = hashlib.scrypt(str(int(seed)).encode(), salt=_SCRYPT_SALT, dklen=KEY_BYTES, **_SCRYPT)
        return cls(key)

    @classmethod
    def from_hex(cls, text: str) -> RunSecret:
        """The secret written by :meth:`hex`; ValueError when ``text`` is not one."""
        return cls(bytes.fromhex(text.strip()))

    def hex(self) -> str:
        """The secret as text, for the file that keeps it."""
        return self._key.hex()

    def _mac(self, what: str) -> bytes:
        return hmac.new(self._key, what.encode(), hashlib.sha256).digest()

    def sim_seeds(self, root: int, game: int = 0) -> SimSeeds:
        """The battle seed and the team seeds of p1 and p2 for the public seed ``root``.

        Each side's team depends only on ``root`` and its slot, so the two battles of a pair (the
        same ``root``, sides swapped) deal the same team to the same slot whoever plays it. Game
        ``game`` of a series (0: its first, or a lone battle) has rolls of its own and the teams of
        game 0, swapped in the odd games (whose sides are): each candidate keeps its team.
        """
        battle = _sodium(self._mac(f"sim:{int(root)}:battle{_game(game)}"))
        p1, p2 = (_sodium(self._mac(f"sim:{int(root)}:{what}")) for what in SEED_NAMES[1:])
        return (battle, p2, p1) if game % 2 else (battle, p1, p2)

    def battle_tag(self, battle_format: str, root: int, game: int = 0) -> str:
        """The room the players see, shaped as the server names rooms: ``battle-FORMAT-N``, N a
        number that says nothing of ``root`` to whoever lacks the secret."""
        mac = self._mac(f"tag:{int(root)}{_game(game)}")
        number = int.from_bytes(mac[:4], "big") & 0x7FFF_FFFF
        return f"battle-{battle_format}-{number}"

    def agent_seed(self, root: int, player: str, bound: int = 2**32, game: int = 0) -> int:
        """The seed ``player``'s Agent gets for the battle of ``root`` (``instanceConfig["seed"]``
        and the ``seed`` hook), game ``game`` of its series: reproducible, and no key to the
        simulator's seeds."""
        mac = self._mac(f"agent:{int(root)}:{player}{_game(game)}")
        return int.from_bytes(mac[:8], "big") % bound

    def __repr__(self) -> str:
        return "RunSecret(<hidden>)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunSecret) and hmac.compare_digest(self._key, other._key)

    def __hash__(self) -> int:
        return hash(self._mac("hash"))
