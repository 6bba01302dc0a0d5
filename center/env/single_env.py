"""SinglizedEnv: a Gymnasium environment for one player whose opponent is played inside it.

A single-agent ``gymnasium.Env`` over the multi-agent environment (ASRCAISim1 calls this a
"SinglizedEnv"). The learner is ``player_0`` of a :class:`PokemonEnv`. The opponent is either

- a :class:`StandalonePolicy` (default: uniformly random legal actions) acting through its own Agent
  (default: MapleAgent), stepped by this environment whenever it has a decision; or
- a poke-env ``Player`` that plays on its own on the same server: give its class
  (``opponent=RandomPlayer``) and the environment builds it on its server and in its format, or an
  instance built with ``server_configuration=`` that server.

On the server (``backend="server"``, the default) Showdown draws teams, damage rolls and move order,
so an episode is not reproducible from ``reset(seed)`` alone: only the agent-side randomness is
(``MaplePokemon-v0`` is registered with ``nondeterministic=True``). On the simulator
(``backend="sim"``, registered as ``MaplePokemonSim-v0``) the battle is seeded too, and the same
``reset(seed)`` and actions give the same episode; a poke-env ``Player`` opponent needs the server.
"""

from __future__ import annotations

import logging
from typing import Any, SupportsFloat

import gymnasium
import numpy as np
from poke_env.player import Player

from center.env.backend import Backend
from center.env.pokemon_env import PLAYERS, SIDES, PokemonEnv, RewardConfig
from center.errors import EnvError
from edge.contract.agent import Agent
from edge.contract.policy import StandalonePolicy
from edge.maple.action_helper import ActionHelper
from edge.maple.maple_agent import MapleAgent

logger = logging.getLogger(__name__)

MAX_OPPONENT_INVALID = 3


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
        if mask is not None and np.any(mask):
            return int(self.rng.choice(np.flatnonzero(mask)))
        return action_space.sample()


class SinglizedEnv(gymnasium.Env[np.ndarray, Any]):
    """The learner's view of a battle against an opponent played inside the environment."""

    metadata = {"render_modes": ["human", "ansi"]}  # noqa: RUF012 - typed as an instance variable by gymnasium.Env

    def __init__(
        self,
        battle_format: str = "gen9bssfactory",
        *,
        opponent: StandalonePolicy | Player | type[Player] | None = None,
        agent: Agent | None = None,
        opponent_agent: Agent | None = None,
        backend: Backend = "server",
        server: Any = None,
        teams: dict[str, str | None] | None = None,
        rewards: RewardConfig | None = None,
        reset_timeout: float | None = None,
        step_timeout: float | None = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
    ) -> None:
        self.render_mode = render_mode
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
        return observations[PLAYERS[0]], infos[PLAYERS[0]]

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

    def _fallback_action(self, invalid_in_a_row: int) -> Any:
        """A legal action for an opponent policy that keeps choosing illegal ones."""
        agent = self.env.agent_objects[PLAYERS[1]]
        battle = self.env.battle(PLAYERS[1])
        helper = getattr(agent, "helper", None)
        if isinstance(helper, ActionHelper) and battle is not None:
            return helper.random_legal_action(battle)
        if invalid_in_a_row > 10 * MAX_OPPONENT_INVALID:
            raise EnvError("the opponent policy keeps choosing illegal actions")
        return self._opponent_action()

    def step(self, action: Any) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        me, opp = PLAYERS
        actions = {me: action}
        total = 0.0
        opp_invalid = 0
        while True:
            if self._policy is not None and self._opp is not None and self._opp[3]["needs_action"]:
                actions[opp] = self._opponent_action()
                if opp_invalid >= MAX_OPPONENT_INVALID:
                    actions[opp] = self._fallback_action(opp_invalid)
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
        if self.render_mode == "human":
            self.env.render("human")
        return observations[me], np.float32(total), terminated[me], truncated[me], infos[me]

    def render(self) -> str | None:
        return self.env.render(self.render_mode or "ansi")

    def close(self) -> None:
        self.env.close()
