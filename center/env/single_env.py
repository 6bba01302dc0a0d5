"""SinglizedEnv: a Gymnasium environment for one player whose opponent is played inside it.

A single-agent ``gymnasium.Env`` over :class:`PokemonEnv` (ASRCAISim1's "SinglizedEnv"): the
learner is ``player_0``; the opponent is a :class:`StandalonePolicy` acting through its own Agent
(by default random legal actions through MapleAgent) or a poke-env ``Player`` on the same server.
Episodes are reproducible from ``reset(seed)`` on the simulator backend only; ``action_masks()``
serves MaskablePPO.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium
import numpy as np
from poke_env.player import Player

from center.env.playable import mask_size, read_team
from center.env.pokemon_env import PLAYERS, SIDES, DefaultChoice, PokemonEnv
from center.env.rounds import RewardConfig
from edge.contract.agent import Agent
from edge.contract.game_type import is_doubles_format
from edge.contract.legality import MAX_INVALID_RETRIES
from edge.contract.outcomes import EndReason
from edge.contract.policy import StandalonePolicy
from edge.maple.doubles_agent import MapleDoublesAgent
from edge.maple.maple_agent import MapleAgent

logger = logging.getLogger(__name__)

#: ``info["end_reason"]`` of an episode the learner lost (the multi-agent environment says "win").
LOSS = "loss"


class RandomLegalPolicy(StandalonePolicy):
    """Picks a uniformly random action among those the mask allows (seeded)."""

    def __init__(self, seed: int | None = None) -> None:
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        pass

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> Any:
        mask = info.get("action_mask")
        if mask is None or not np.any(mask):
            return action_space.sample()
        if isinstance(action_space, gymnasium.spaces.MultiDiscrete):
            # One index per dimension, each from its own part of the flat mask (doubles: a slot).
            parts = np.split(np.asarray(mask), np.cumsum(action_space.nvec)[:-1])
            return np.array(
                [int(self.rng.choice(np.flatnonzero(part))) if part.any() else 0 for part in parts],
                dtype=np.int64,
            )
        return int(self.rng.choice(np.flatnonzero(mask)))


class SinglizedEnv(gymnasium.Env[np.ndarray, Any]):
    """The learner's view of a battle against an opponent played inside the environment."""

    # render_fps: the pace of "human" rendering in tools that play episodes back (one turn a second).
    metadata = {"render_modes": ["human", "ansi"], "render_fps": 1}  # noqa: RUF012 - typed as an instance variable by gymnasium.Env

    def __init__(
        self,
        battle_format: str = "gen9bssfactory",
        *,
        opponent: StandalonePolicy | Player | type[Player] | None = None,
        agent: Agent | None = None,
        opponent_agent: Agent | None = None,
        backend: str = "server",
        server: Any = None,
        teams: dict[str, str | None] | None = None,
        rewards: RewardConfig | None = None,
        reset_timeout: float | None = None,
        step_timeout: float | None = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
        team: str | None = None,
    ) -> None:
        self.render_mode = render_mode
        if team is not None and teams is None:
            teams = dict.fromkeys(PLAYERS, read_team(team))
        outside = isinstance(opponent, Player) or (
            isinstance(opponent, type) and issubclass(opponent, Player)
        )
        # A Player class is built by the environment, on its own server and in its format.
        self._player_opponent: Player | type[Player] | None = opponent if outside else None  # type: ignore[assignment]
        self._policy: StandalonePolicy | None = None
        if self._player_opponent is None:
            self._policy = (
                opponent if isinstance(opponent, StandalonePolicy) else RandomLegalPolicy()
            )

        def maple(player: str) -> Agent:
            config = {
                "side": SIDES[player],
                "player": player,
                "battle_format": battle_format,
                "seed": None,
            }
            if is_doubles_format(battle_format):
                return MapleDoublesAgent({}, config)
            return MapleAgent({}, config)

        agents = {PLAYERS[0]: agent or maple(PLAYERS[0])}
        if self._policy is not None:
            agents[PLAYERS[1]] = opponent_agent or maple(PLAYERS[1])
        self.env = PokemonEnv(
            battle_format,
            backend=backend,
            server=server,
            agents=agents,
            teams=teams,
            rewards=rewards,
            reset_timeout=reset_timeout,
            step_timeout=step_timeout,
            max_turns=max_turns,
            opponent=self._player_opponent,
        )
        self.observation_space = self.env.observation_space(PLAYERS[0])
        self.action_space = self.env.action_space(PLAYERS[0])
        self._opp: tuple[Any, float, bool, dict[str, Any]] | None = None
        self._mask_size = mask_size(self.action_space)
        self._last_mask: np.ndarray | None = None
        self._invalid_in_a_row = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if self._policy is not None:
            if seed is not None and isinstance(self._policy, RandomLegalPolicy):
                self._policy.rng = np.random.default_rng(seed + 1)
            self._policy.reset()
        observations, infos = self.env.reset(seed=seed, options=options)
        if self._policy is not None:
            self._opp = (observations[PLAYERS[1]], 0.0, False, infos[PLAYERS[1]])
        self._invalid_in_a_row = 0
        info = infos[PLAYERS[0]]
        self._last_mask = info.get("action_mask")
        return observations[PLAYERS[0]], info

    def action_masks(self) -> np.ndarray:
        """The learner's legal actions now, as booleans (sb3-contrib's MaskablePPO calls this).

        Where no action is legal (after the episode's end) every action reads as allowed, so that a
        masked distribution stays defined; the environment ignores actions then anyway.
        """
        if self._mask_size is None:
            raise NotImplementedError("action masks need a Discrete or MultiDiscrete action space")
        mask = self._last_mask
        if mask is None or not np.any(mask):
            return np.ones(self._mask_size, dtype=bool)
        return np.asarray(mask, dtype=bool)

    def _opponent_action(self) -> Any:
        assert self._policy is not None and self._opp is not None
        observation, reward, done, info = self._opp
        agent = self.env.agent_objects[PLAYERS[1]]
        return self._policy.step(
            observation,
            reward,
            done,
            info,
            "opponent:opponent:opponent",
            agent.observation_space,
            agent.action_space,
        )

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        me, opp = PLAYERS
        # The learner's illegal actions in a row are bounded as in the match runner: then the
        # default move is played for it, so no policy (a deterministic one above all) stalls.
        actions = {
            me: DefaultChoice.PLAY_DEFAULT
            if self._invalid_in_a_row >= MAX_INVALID_RETRIES
            else action
        }
        total = 0.0
        opp_invalid = 0
        while True:
            if self._policy is not None and self._opp is not None and self._opp[3]["needs_action"]:
                actions[opp] = (
                    DefaultChoice.PLAY_DEFAULT
                    if opp_invalid >= MAX_INVALID_RETRIES
                    else self._opponent_action()
                )
            observations, rewards, terminated, truncated, infos = self.env.step(actions)
            total += float(rewards[me])
            if self._policy is not None:
                opp_done = terminated.get(opp, False) or truncated.get(opp, False)
                self._opp = (observations[opp], float(rewards[opp]), opp_done, infos[opp])
                opp_invalid = opp_invalid + 1 if infos[opp]["invalid_action"] else 0
            done = terminated[me] or truncated[me]
            # Hand control back when the learner has a decision (or an invalid action to hear of).
            if done or infos[me]["needs_action"]:
                break
            actions = {}
        info = infos[me]
        # Only the learner's own action can be invalid, and then control comes back at once.
        self._invalid_in_a_row = self._invalid_in_a_row + 1 if info["invalid_action"] else 0
        self._last_mask = info.get("action_mask")
        if done:
            info = self._learner_outcome(info)
        if self.render_mode == "human":
            self.env.render("human")
        return observations[me], total, terminated[me], truncated[me], info

    def _learner_outcome(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` at an episode's end with ``won`` and the learner's ``end_reason``."""
        battle = self.env.battle(PLAYERS[0])
        reason = self.env.end_reason
        won: bool | None = None
        if reason == EndReason.WIN and battle is not None and (battle.won or battle.lost):
            won = bool(battle.won)
        elif reason == EndReason.TIEBREAK and self.env.tiebreak_winner is not None:
            won = self.env.tiebreak_winner == PLAYERS[0]
        return {**info, "won": won, "end_reason": LOSS if won is False else reason}

    def render(self) -> str | None:
        return self.env.render(self.render_mode or "ansi")

    def close(self) -> None:
        self.env.close()
