"""PokemonEnv: the Maple multi-agent environment (PettingZoo parallel API) on Pokémon Showdown.

Agents ``player_0`` and ``player_1`` observe and order through one Agent object per player
(``makeObs``, ``action_mask``, ``deploy``; by default :class:`edge.MapleAgent`, or
``MapleDoublesAgent`` in a doubles format), on the server or the seeded simulator
(:mod:`center.env.backend`). Rewards and infos are :mod:`center.env.rounds`', which a match between
candidates shares. The episode flow, waiting players, illegal actions and formats:
docs/environment.md.
"""

from __future__ import annotations

import logging
import warnings
from enum import Enum
from typing import Any, ClassVar

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv
from poke_env.battle import AbstractBattle
from poke_env.player import Player
from poke_env.ps_client.server_configuration import ServerConfiguration

from center.env.backend import SessionRequest, backend_spec
from center.env.env_player import disconnect_player
from center.env.playable import mask_size, playable_format
from center.env.rounds import RewardConfig, RoundEnd, idle_mask, settle_round, step_info
from center.env.seat_view import BattleView
from center.env.session_api import BattleBackend, SeatState
from center.env.tiebreak import TurnCap, check_turn_cap
from center.errors import EnvClosedError, EnvError
from center.showdown.sim_seeds import RunSecret
from edge.contract.agent import SEED_BOUND, Agent
from edge.contract.binding import bind_agent
from edge.contract.game_type import is_doubles_format
from edge.contract.legality import canonical_order, default_order
from edge.contract.outcomes import EndReason
from edge.errors import InvalidActionError
from edge.maple.doubles_agent import MapleDoublesAgent
from edge.maple.maple_agent import MapleAgent

logger = logging.getLogger(__name__)

PLAYERS = ("player_0", "player_1")


class DefaultChoice(Enum):
    """An action that needs no Agent: ``PLAY_DEFAULT`` plays Showdown's default choice (the first
    Pokémon at team preview), as after too many illegal actions in a row."""

    PLAY_DEFAULT = "play_default"


SIDES = {"player_0": "blue", "player_1": "red"}


class PokemonEnv(ParallelEnv[str, Any, Any]):
    """Two players battle on Showdown; each step takes one decision from each player that has one."""

    metadata: ClassVar[dict[str, Any]] = {
        "name": "maple_pokemon_v0",
        "render_modes": ["human", "ansi"],
        "is_parallelizable": True,
    }

    RESET_TIMEOUT = 30.0
    STEP_TIMEOUT = 10.0

    def __init__(
        self,
        battle_format: str = "gen9bssfactory",
        *,
        backend: str = "server",
        server: Any = None,
        agents: dict[str, Agent] | None = None,
        teams: dict[str, str | None] | None = None,
        rewards: RewardConfig | None = None,
        reset_timeout: float | None = None,
        step_timeout: float | None = None,
        max_turns: int | None = None,
        render_mode: str | None = None,
        username_prefix: str = "maple",
        opponent: Player | type[Player] | None = None,
        run_secret: RunSecret | None = None,
        turn_cap: TurnCap = "tie",
        open_team_sheets: bool = False,
    ) -> None:
        if not backend_spec(backend).outside_player and opponent is not None:
            raise EnvError('an outside poke-env Player plays on a server: use backend="server"')
        try:
            self.turn_cap = check_turn_cap(turn_cap)
        except ValueError as exc:
            raise EnvError(str(exc)) from None
        if opponent is not None and max_turns is not None and turn_cap == "tiebreak":
            raise EnvError(
                "turn_cap='tiebreak' needs both sides' exact HP, and an outside Player's is not "
                "known here: use turn_cap='tie' with an opponent"
            )
        refusal = playable_format(battle_format)
        if refusal:
            raise EnvError(refusal)
        self.doubles = is_doubles_format(battle_format)
        self.backend: str = backend
        self.battle_format = battle_format
        self.rewards = rewards or RewardConfig()
        self.reset_timeout = reset_timeout if reset_timeout is not None else self.RESET_TIMEOUT
        self.step_timeout = step_timeout if step_timeout is not None else self.STEP_TIMEOUT
        self.max_turns = max_turns
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise EnvError(f"render_mode must be one of {self.metadata['render_modes']}")
        self.render_mode = render_mode
        self.opponent = opponent
        #: the key of the simulator's seeds, the battle tags and the Agents' seeds
        self.run_secret = run_secret if run_secret is not None else RunSecret.random()
        self.possible_agents = list(PLAYERS if opponent is None else PLAYERS[:1])
        self.agents: list[str] = []
        if agents is not None:  # plain duck-typed Agents work: optional hooks resolved once
            agents = {p: bind_agent(a) for p, a in agents.items()}
        default_agent = MapleDoublesAgent if self.doubles else MapleAgent
        self.agent_objects: dict[str, Agent] = agents or {
            p: default_agent(
                {}, {"side": SIDES[p], "player": p, "battle_format": battle_format, "seed": None}
            )
            for p in self.possible_agents
        }
        missing = set(self.possible_agents) - set(self.agent_objects)
        if missing:
            raise EnvError(f"agents must be given for {sorted(missing)}")
        self.observation_spaces = {
            p: self.agent_objects[p].observation_space for p in self.possible_agents
        }
        self.action_spaces = {p: self.agent_objects[p].action_space for p in self.possible_agents}
        self._server_arg = server
        self._built_opponent: Player | None = None
        self._owned_server: Any = None
        self._teams = teams
        self._username_prefix = username_prefix
        self._open_team_sheets = open_team_sheets
        self._session: BattleBackend | None = None
        self._np_random = np.random.default_rng()
        self._closed = False
        self._over = True
        self._last: tuple[dict[str, Any], ...] | None = None
        #: each player's observation from its last makeObs (returned while it has nothing to do)
        self._observed: dict[str, Any] = {}
        self.end_reason: EndReason | None = None
        #: the player the last battle's tiebreak gave the win (None: a tie, or no tiebreak)
        self.tiebreak_winner: str | None = None

    # -- PettingZoo API -------------------------------------------------------------------------

    def observation_space(self, agent: str) -> gymnasium.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.Space[Any]:
        return self.action_spaces[agent]

    @property
    def session(self) -> BattleBackend:
        if self._closed:
            raise EnvClosedError("the environment is closed")
        if self._session is not None:
            return self._session
        session, self._owned_server = backend_spec(self.backend).session(
            SessionRequest(
                self.possible_agents,
                battle_format=self.battle_format,
                server=self._server_arg,
                teams=self._teams,
                username_prefix=self._username_prefix,
                secret=self.run_secret,
                opponent=self._outside_opponent,
                open_team_sheets=self._open_team_sheets,
            )
        )
        self._session = session
        return session

    def _outside_opponent(self, config: ServerConfiguration) -> Player | None:
        """The outside opponent Player on this env's server: built here when given as a class."""
        opponent = self.opponent
        if isinstance(opponent, type):
            opponent = opponent(
                battle_format=self.battle_format,
                server_configuration=config,
                max_concurrent_battles=1,
            )
            self.opponent = self._built_opponent = opponent
        if opponent is None:
            return None
        theirs = opponent.ps_client.server_configuration.websocket_url
        if theirs != config.websocket_url:
            raise EnvError(
                f"the opponent {type(opponent).__name__} connects to {theirs}, but this "
                f"environment plays on {config.websocket_url}: pass the class "
                f"(opponent={type(opponent).__name__}) or build it with "
                "server_configuration=env.server_configuration"
            )
        if opponent.format != self.battle_format:
            raise EnvError(
                f"the opponent {type(opponent).__name__} plays {opponent.format}, but this "
                f"environment plays {self.battle_format}"
            )
        return opponent

    def set_teams(self, teams: dict[str, str | None]) -> None:
        """Teams for the next battles (formats where teams are brought), keeping the connections."""
        self._teams = teams
        if self._session is not None:
            self._session.set_teams(teams)

    def set_series_game(self, game: int) -> None:
        """The next battles are game ``game`` of a series (0: the first, or none): on the
        simulator, new rolls and the first game's dealt teams, each with its player."""
        self.session.set_series_game(game)

    def set_agents(
        self, agents: dict[str, Agent], teams: dict[str, str | None] | None = None
    ) -> None:
        """Use other Agent objects (and teams) from the next ``reset`` on, keeping the connections."""
        if not self._over:
            logger.warning("set_agents() during an episode: abandoning it")
            self.forfeit(self.possible_agents[0], reason=EndReason.ABORTED)
        missing = set(self.possible_agents) - set(agents)
        if missing:
            raise EnvError(f"agents must be given for {sorted(missing)}")
        agents = {p: bind_agent(a) for p, a in agents.items()}
        self.agent_objects = agents
        self.observation_spaces = {p: agents[p].observation_space for p in self.possible_agents}
        self.action_spaces = {p: agents[p].action_space for p in self.possible_agents}
        if teams is not None:
            self.set_teams(teams)

    def usernames(self) -> dict[str, str]:
        """The Showdown username of each controlled player (logging them in if needed)."""
        return self.session.usernames()

    def forfeit(self, agent: str, reason: EndReason = EndReason.FORFEIT) -> None:
        """End the episode now with ``agent`` forfeiting on Showdown (the other player wins)."""
        if self._over:
            return
        self.session.abandon(forfeiter=agent)
        self.end_reason = EndReason(reason)
        self._over = True
        self.agents = []

    def replay_source(self) -> list[str] | None:
        """What the backend replays the last battle from, once it has ended (the simulator's
        input log, waiting a little for its word); None on a backend that cannot replay."""
        return self.session.replay_source()

    def battle(self, agent: str) -> AbstractBattle | None:
        """The poke-env Battle of ``agent`` in the current episode (its own view)."""
        return self.session.battle(agent)

    def view(self, agent: str) -> BattleView | None:
        """What the match reads of ``agent``'s battle (request, turn, tag, result): kept for every
        seat, a poke-env Battle or not."""
        return self.session.view(agent)

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start a new battle; return each player's first observation and info.

        ``reset`` raises ``ResetTimeout`` when no battle starts within ``reset_timeout``. On the
        ``sim`` backend the battle's seed is ``seed`` (or, without one, drawn from the generator a
        previous ``reset(seed)`` seeded), so the whole episode is reproducible.
        """
        _ = self.session  # opened (or refused, once closed) before any Agent is seeded
        if seed is not None:
            self._np_random = np.random.default_rng(seed)
        episode_seed = seed if seed is not None else int(self._np_random.integers(2**31))
        for agent_name in self.possible_agents:
            agent = self.agent_objects[agent_name]
            # From the secret: an Agent's seed must not tell it the battle's seed.
            agent.seed(self.run_secret.agent_seed(episode_seed, agent_name, SEED_BOUND))
            agent.reset()
        self.session.keep_battles(self.possible_agents)  # every Agent here reads its Battle
        self.start_battle(episode_seed)
        no_invalid = dict.fromkeys(self.possible_agents, False)
        self._observed = {}
        observations = {p: self._observe(p) for p in self.possible_agents}
        infos = {p: self._info(p, no_invalid) for p in self.possible_agents}
        self._last = (
            observations,
            dict.fromkeys(self.possible_agents, np.float32(0.0)),
            dict.fromkeys(self.possible_agents, False),
            dict.fromkeys(self.possible_agents, False),
            infos,
        )
        return observations, infos

    def start_battle(self, seed: int) -> None:
        """Start the episode's battle (seeded by ``seed`` on a seeded backend) without asking any
        Agent: what ``reset`` does after seeding the Agents, for a caller that decides itself."""
        session = self.session
        battle_seed = seed if backend_spec(self.backend).seeded else None
        self.end_reason, self.tiebreak_winner = None, None
        self._over = False
        self.agents = list(self.possible_agents)
        try:
            session.start_battle(self.reset_timeout, seed=battle_seed)
        except Exception:
            self.agents = []
            self._over = True
            raise

    @property
    def over(self) -> bool:
        """The episode's battle has ended (or none has started)."""
        return self._over

    def end_round(self) -> RoundEnd | None:
        """Once every player that had to act has chosen: wait for Showdown's answer and end the
        episode if the battle ended (see :func:`center.env.rounds.settle_round`)."""
        end = settle_round(
            self.session,
            self.agents,
            self.rewards,
            step_timeout=self.step_timeout,
            max_turns=self.max_turns,
            turn_cap=self.turn_cap,
        )
        if end is not None:
            self.end_reason, self.tiebreak_winner = end.reason, end.tiebreak_winner
            self._over = True
        return end

    def step(
        self, actions: dict[str, Any], return_masks: bool = False
    ) -> tuple[dict[str, Any], ...]:
        """Apply the actions of the players that need one; see the module docstring."""
        session = self.session
        if self._over:
            return self._step_after_end(return_masks)
        session.drain()
        rewards = dict.fromkeys(self.agents, 0.0)
        invalid = dict.fromkeys(self.agents, False)
        for name in self.agents:
            seat = session.seats[name]
            if seat.state is not SeatState.NEEDS_ACTION or name not in actions:
                continue
            assert seat.battle is not None
            if actions[name] is DefaultChoice.PLAY_DEFAULT:
                session.submit(name, default_order(seat.request))
                continue
            agent = self.agent_objects[name]
            try:
                order = agent.deploy(seat.battle, actions[name])
            except (InvalidActionError, ValueError) as exc:
                logger.debug("%s: invalid action %r: %s", name, actions[name], exc)
                rewards[name] += self.rewards.invalid
                invalid[name] = True
                continue
            try:
                # The center's one check of an order: rebuilt from the request, or refused.
                message = canonical_order(seat.request, order)
            except ValueError as exc:  # InvalidActionError is one
                logger.debug("%s: illegal order %r: %s", name, order, exc)
                rewards[name] += self.rewards.invalid
                invalid[name] = True
                continue
            session.submit(name, message)

        terminated = dict.fromkeys(self.agents, False)
        truncated = dict.fromkeys(self.agents, False)
        end = self.end_round()
        if end is not None:
            for name in self.agents:
                (terminated if end.terminated else truncated)[name] = True
                rewards[name] += end.rewards[name]

        observations = {p: self._observe(p) for p in self.agents}
        rewards32 = {p: np.float32(r) for p, r in rewards.items()}
        infos = {p: self._info(p, invalid) for p in self.agents}
        if self._over:
            self.agents = []
            for name in self.possible_agents:
                battle = self.battle(name)
                if battle is not None:
                    self.agent_objects[name].onEpisodeEnd(battle)
        self._last = (observations, rewards32, terminated, truncated, infos)
        if self.render_mode == "human":
            self.render()
        if return_masks:
            return observations, rewards32, terminated, truncated, infos, self._masks(infos)
        return observations, rewards32, terminated, truncated, infos

    def _step_after_end(self, return_masks: bool) -> tuple[dict[str, Any], ...]:
        if self._last is None:
            raise EnvError("call reset() before step()")
        warnings.warn(
            "step() called after the episode ended; call reset()", RuntimeWarning, stacklevel=3
        )
        observations, _, terminated, truncated, infos = self._last
        zeros = {p: np.float32(0.0) for p in observations}
        if return_masks:
            return observations, zeros, terminated, truncated, infos, self._masks(infos)
        return observations, zeros, terminated, truncated, infos

    # -- observations and info ------------------------------------------------------------------

    def _observe(self, name: str) -> Any:
        """The player's observation: a new one (``makeObs``) when it must act or the episode is
        over; while it waits for the other side, the one of its last decision, without calling
        its Agent (a remote Agent costs no round trip for it)."""
        if not self._over and not self._needs_action(name) and name in self._observed:
            return self._observed[name]
        battle = self.battle(name)
        assert battle is not None
        observation = self._observed[name] = self.agent_objects[name].makeObs(battle)
        return observation

    def _needs_action(self, name: str) -> bool:
        return not self._over and self.session.seats[name].state is SeatState.NEEDS_ACTION

    def _mask(self, name: str) -> np.ndarray | None:
        if not self._needs_action(name):
            return idle_mask(self.action_spaces[name])
        size = mask_size(self.action_spaces[name])
        battle = self.battle(name)
        assert battle is not None
        mask = self.agent_objects[name].action_mask(battle)
        if mask is None and size:
            mask = np.ones(size, dtype=np.int8)
        return mask

    def _info(self, name: str, invalid: dict[str, bool]) -> dict[str, Any]:
        battle = self.battle(name)
        assert battle is not None
        return step_info(
            battle,
            needs_action=self._needs_action(name),
            invalid=invalid.get(name, False),
            end_reason=self.end_reason,
            mask=self._mask(name),
        )

    @staticmethod
    def _masks(infos: dict[str, dict[str, Any]]) -> dict[str, Any]:
        return {p: info["action_mask"] for p, info in infos.items()}

    # -- render and close -----------------------------------------------------------------------

    def render(self, mode: str | None = None) -> str | None:
        """Text view: the turn, both sides' HP, the active Pokémon's moves with PP."""
        from center.env.render import render_battle

        mode = mode or self.render_mode or "human"
        battle = self.battle(PLAYERS[0]) if self._session is not None else None
        text = render_battle(battle) if battle is not None else "(no battle)"
        if mode == "human":
            print(text)
            return None
        return text

    def close(self) -> None:
        """Forfeit a running battle, disconnect the players and stop a server (or simulator host)
        this env started."""
        if self._closed:
            return
        try:
            if self._session is not None:
                self._session.close()
        finally:
            # An opponent built here is this env's to disconnect, before its server stops.
            if self._built_opponent is not None:
                disconnect_player(self._built_opponent)
                self._built_opponent = None
            self._closed = True
            self.agents = []
            if self._owned_server is not None:
                self._owned_server.stop()
                self._owned_server = None

    def __enter__(self) -> PokemonEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
